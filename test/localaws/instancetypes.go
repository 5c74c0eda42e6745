package localaws

import (
	"encoding/xml"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// Catalog values as EC2 spells them on the wire.
const (
	archAMD64        = "amd64"
	archX8664        = "x86_64"
	archARM64        = "arm64"
	capacitySpot     = "spot"
	capacityOnDemand = "on-demand"
	productLinux     = "Linux/UNIX"
	productWindows   = "Windows"
)

// previousGenerationFamilies are the catalog's families that EC2 lists as previous generation.
var previousGenerationFamilies = map[string]bool{
	"c1": true, "c3": true, "c4": true, "d2": true, "i2": true, "m1": true, "m2": true,
	"m3": true, "m4": true, "r3": true, "r4": true, "t1": true,
}

// neuronDevices describes the AWS accelerators of the catalog: cores per device, their
// version and the memory per device.
var neuronDevices = map[string]struct {
	cores, version int
	memoryMiB      int64
}{
	"inferentia":  {cores: 4, version: 1, memoryMiB: 8192},
	"inferentia2": {cores: 2, version: 2, memoryMiB: 32768},
	"trainium":    {cores: 2, version: 2, memoryMiB: 32768},
}

type describeInstanceTypesResponse struct {
	XMLName xml.Name `xml:"DescribeInstanceTypesResponse"`
	ec2Envelope
	InstanceTypes []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

type xmlInstanceType struct {
	InstanceType                  string                       `xml:"instanceType"`
	CurrentGeneration             bool                         `xml:"currentGeneration"`
	FreeTierEligible              bool                         `xml:"freeTierEligible"`
	SupportedUsageClasses         []string                     `xml:"supportedUsageClasses>item"`
	SupportedRootDeviceTypes      []string                     `xml:"supportedRootDeviceTypes>item"`
	SupportedVirtualizationTypes  []string                     `xml:"supportedVirtualizationTypes>item"`
	SupportedBootModes            []string                     `xml:"supportedBootModes>item"`
	BareMetal                     bool                         `xml:"bareMetal"`
	Hypervisor                    string                       `xml:"hypervisor,omitempty"`
	ProcessorInfo                 xmlProcessorInfo             `xml:"processorInfo"`
	VCPUInfo                      xmlVCPUInfo                  `xml:"vCpuInfo"`
	MemoryInfo                    xmlMemory                    `xml:"memoryInfo"`
	InstanceStorageSupported      bool                         `xml:"instanceStorageSupported"`
	InstanceStorageInfo           *xmlInstanceStorageInfo      `xml:"instanceStorageInfo,omitempty"`
	EBSInfo                       xmlEBSInfo                   `xml:"ebsInfo"`
	NetworkInfo                   xmlNetworkInfo               `xml:"networkInfo"`
	GPUInfo                       *xmlGPUInfo                  `xml:"gpuInfo,omitempty"`
	InferenceAcceleratorInfo      *xmlInferenceAcceleratorInfo `xml:"inferenceAcceleratorInfo,omitempty"`
	NeuronInfo                    *xmlNeuronInfo               `xml:"neuronInfo,omitempty"`
	BurstablePerformanceSupported bool                         `xml:"burstablePerformanceSupported"`
	HibernationSupported          bool                         `xml:"hibernationSupported"`
	DedicatedHostsSupported       bool                         `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported         bool                         `xml:"autoRecoverySupported"`
}

type xmlProcessorInfo struct {
	SupportedArchitectures []string `xml:"supportedArchitectures>item"`
	Manufacturer           string   `xml:"manufacturer"`
}

type xmlVCPUInfo struct {
	DefaultVCPUs          int `xml:"defaultVCpus"`
	DefaultCores          int `xml:"defaultCores"`
	DefaultThreadsPerCore int `xml:"defaultThreadsPerCore"`
}

type xmlMemory struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type xmlInstanceStorageInfo struct {
	TotalSizeInGB     int       `xml:"totalSizeInGB"`
	Disks             []xmlDisk `xml:"disks>item"`
	NVMeSupport       string    `xml:"nvmeSupport"`
	EncryptionSupport string    `xml:"encryptionSupport"`
}

type xmlDisk struct {
	SizeInGB int    `xml:"sizeInGB"`
	Count    int    `xml:"count"`
	Type     string `xml:"type"`
}

type xmlEBSInfo struct {
	EBSOptimizedSupport string               `xml:"ebsOptimizedSupport"`
	EncryptionSupport   string               `xml:"encryptionSupport"`
	NVMeSupport         string               `xml:"nvmeSupport"`
	EBSOptimizedInfo    *xmlEBSOptimizedInfo `xml:"ebsOptimizedInfo,omitempty"`
}

type xmlEBSOptimizedInfo struct {
	BaselineBandwidthInMbps int `xml:"baselineBandwidthInMbps"`
	MaximumBandwidthInMbps  int `xml:"maximumBandwidthInMbps"`
}

type xmlNetworkInfo struct {
	NetworkPerformance           string           `xml:"networkPerformance"`
	MaximumNetworkInterfaces     int              `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards          int              `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex      int              `xml:"defaultNetworkCardIndex"`
	NetworkCards                 []xmlNetworkCard `xml:"networkCards>item"`
	IPv4AddressesPerInterface    int              `xml:"ipv4AddressesPerInterface"`
	IPv6AddressesPerInterface    int              `xml:"ipv6AddressesPerInterface"`
	IPv6Supported                bool             `xml:"ipv6Supported"`
	ENASupport                   string           `xml:"enaSupport"`
	EFASupported                 bool             `xml:"efaSupported"`
	EncryptionInTransitSupported bool             `xml:"encryptionInTransitSupported"`
}

type xmlNetworkCard struct {
	NetworkCardIndex         int      `xml:"networkCardIndex"`
	NetworkPerformance       string   `xml:"networkPerformance"`
	MaximumNetworkInterfaces int      `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  *float64 `xml:"baselineBandwidthInGbps,omitempty"`
	PeakBandwidthInGbps      *float64 `xml:"peakBandwidthInGbps,omitempty"`
}

type xmlGPUInfo struct {
	GPUs                []xmlGPU `xml:"gpus>item"`
	TotalGPUMemoryInMiB int64    `xml:"totalGpuMemoryInMiB"`
}

type xmlGPU struct {
	Name         string    `xml:"name"`
	Manufacturer string    `xml:"manufacturer"`
	Count        int       `xml:"count"`
	MemoryInfo   xmlMemory `xml:"memoryInfo"`
}

type xmlInferenceAcceleratorInfo struct {
	// EC2 lists inference accelerators as member elements, unlike every other list.
	Accelerators              []xmlInferenceDevice `xml:"accelerators>member"`
	TotalInferenceMemoryInMiB int64                `xml:"totalInferenceMemoryInMiB"`
}

type xmlInferenceDevice struct {
	Count        int       `xml:"count"`
	Name         string    `xml:"name"`
	Manufacturer string    `xml:"manufacturer"`
	MemoryInfo   xmlMemory `xml:"memoryInfo"`
}

type xmlNeuronInfo struct {
	NeuronDevices                []xmlNeuronDevice `xml:"neuronDevices>item"`
	TotalNeuronDeviceMemoryInMiB int64             `xml:"totalNeuronDeviceMemoryInMiB"`
}

type xmlNeuronDevice struct {
	Count      int           `xml:"count"`
	Name       string        `xml:"name"`
	CoreInfo   xmlNeuronCore `xml:"coreInfo"`
	MemoryInfo xmlMemory     `xml:"memoryInfo"`
}

type xmlNeuronCore struct {
	Count   int `xml:"count"`
	Version int `xml:"version"`
}

// instanceTypeFilters are the DescribeInstanceTypes filters served.
func instanceTypeFilters() filterFields[*catalog.InstanceType] {
	return filterFields[*catalog.InstanceType]{fields: map[string]func(*catalog.InstanceType) []string{
		"instance-type":                         func(t *catalog.InstanceType) []string { return oneValue(t.Name) },
		"current-generation":                    func(t *catalog.InstanceType) []string { return boolValue(!previousGenerationFamilies[t.Family]) },
		"bare-metal":                            func(t *catalog.InstanceType) []string { return boolValue(t.BareMetal) },
		"burstable-performance-supported":       func(t *catalog.InstanceType) []string { return boolValue(t.Burstable) },
		"hypervisor":                            func(t *catalog.InstanceType) []string { return oneValue(t.Hypervisor) },
		"processor-info.supported-architecture": func(t *catalog.InstanceType) []string { return oneValue(ec2Arch(t.Arch)) },
		"supported-usage-class":                 usageClasses,
		"supported-virtualization-type":         func(*catalog.InstanceType) []string { return oneValue("hvm") },
		"vcpu-info.default-vcpus":               func(t *catalog.InstanceType) []string { return oneValue(strconv.Itoa(t.VCPU)) },
		"memory-info.size-in-mib":               func(t *catalog.InstanceType) []string { return oneValue(strconv.FormatInt(t.MemoryMiB, 10)) },
		"instance-storage-supported":            func(t *catalog.InstanceType) []string { return boolValue(t.LocalNVMeGiB != nil) },
	}}
}

// describeInstanceTypes serves DescribeInstanceTypes from the catalog.
func (s *Server) describeInstanceTypes(p queryParams) (*describeInstanceTypesResponse, error) {
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := instanceTypeFilters().compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	names := p.strs("InstanceType")
	var unknown []string
	for _, name := range names {
		if _, ok := s.typesByName[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return nil, newAPIError("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(unknown, ", "))
	}
	candidates := make([]*catalog.InstanceType, 0, len(s.instanceTypes))
	for i := range s.instanceTypes {
		if t := &s.instanceTypes[i]; len(names) == 0 || slices.Contains(names, t.Name) {
			candidates = append(candidates, t)
		}
	}
	page, next, err := paginate(filterSlice(candidates, keep), maxResults, token, pageLimits{min: 5, max: 100, fallback: 100, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	resp := &describeInstanceTypesResponse{NextToken: next}
	for _, t := range page {
		resp.InstanceTypes = append(resp.InstanceTypes, toXMLInstanceType(t))
	}
	return resp, nil
}

// toXMLInstanceType describes a catalog instance type the way EC2 does.
func toXMLInstanceType(t *catalog.InstanceType) xmlInstanceType {
	threads := 1
	if t.Arch == archAMD64 && t.VCPU > 1 {
		threads = 2
	}
	bootModes := []string{"legacy-bios", "uefi"}
	if t.Arch == archARM64 {
		bootModes = []string{"uefi"}
	}
	nitro := t.Hypervisor == "nitro" || t.BareMetal
	out := xmlInstanceType{
		InstanceType:                  t.Name,
		CurrentGeneration:             !previousGenerationFamilies[t.Family],
		FreeTierEligible:              t.Name == "t2.micro" || t.Name == "t3.micro",
		SupportedUsageClasses:         usageClasses(t),
		SupportedRootDeviceTypes:      []string{"ebs"},
		SupportedVirtualizationTypes:  []string{"hvm"},
		SupportedBootModes:            bootModes,
		BareMetal:                     t.BareMetal,
		Hypervisor:                    t.Hypervisor,
		ProcessorInfo:                 xmlProcessorInfo{SupportedArchitectures: []string{ec2Arch(t.Arch)}, Manufacturer: manufacturerName(t.CPUManufacturer)},
		VCPUInfo:                      xmlVCPUInfo{DefaultVCPUs: t.VCPU, DefaultCores: max(1, t.VCPU/threads), DefaultThreadsPerCore: threads},
		MemoryInfo:                    xmlMemory{SizeInMiB: t.MemoryMiB},
		InstanceStorageSupported:      t.LocalNVMeGiB != nil,
		BurstablePerformanceSupported: t.Burstable,
		HibernationSupported:          !t.BareMetal && t.MemoryMiB <= 150*1024,
		DedicatedHostsSupported:       true,
		AutoRecoverySupported:         t.LocalNVMeGiB == nil && !t.BareMetal,
		EBSInfo: xmlEBSInfo{
			EBSOptimizedSupport: "default",
			EncryptionSupport:   "supported",
			NVMeSupport:         "unsupported",
		},
		NetworkInfo: xmlNetworkInfo{
			NetworkPerformance:           networkPerformance(t.NetworkBandwidthMbps),
			MaximumNetworkInterfaces:     t.MaxENIs,
			MaximumNetworkCards:          1,
			IPv4AddressesPerInterface:    t.IPv4PerENI,
			IPv6AddressesPerInterface:    t.IPv4PerENI,
			IPv6Supported:                true,
			ENASupport:                   "supported",
			EncryptionInTransitSupported: t.EncryptionInTransit,
			NetworkCards: []xmlNetworkCard{{
				NetworkPerformance:       networkPerformance(t.NetworkBandwidthMbps),
				MaximumNetworkInterfaces: t.MaxENIs,
			}},
		},
	}
	if nitro {
		out.EBSInfo.NVMeSupport = "required"
		out.NetworkInfo.ENASupport = "required"
	}
	if t.EBSBandwidthMbps > 0 {
		out.EBSInfo.EBSOptimizedInfo = &xmlEBSOptimizedInfo{BaselineBandwidthInMbps: t.EBSBandwidthMbps, MaximumBandwidthInMbps: t.EBSBandwidthMbps}
	}
	if t.NetworkBandwidthMbps > 0 {
		gbps := float64(t.NetworkBandwidthMbps) / 1000
		out.NetworkInfo.NetworkCards[0].BaselineBandwidthInGbps = &gbps
		out.NetworkInfo.NetworkCards[0].PeakBandwidthInGbps = &gbps
	}
	if t.LocalNVMeGiB != nil {
		out.InstanceStorageInfo = &xmlInstanceStorageInfo{
			TotalSizeInGB:     *t.LocalNVMeGiB,
			Disks:             []xmlDisk{{SizeInGB: *t.LocalNVMeGiB, Count: 1, Type: "ssd"}},
			NVMeSupport:       "required",
			EncryptionSupport: "required",
		}
	}
	if g := t.GPU; g != nil {
		out.GPUInfo = &xmlGPUInfo{
			GPUs:                []xmlGPU{{Name: g.Name, Manufacturer: manufacturerName(g.Manufacturer), Count: g.Count, MemoryInfo: xmlMemory{SizeInMiB: g.MemoryMiB}}},
			TotalGPUMemoryInMiB: int64(g.Count) * g.MemoryMiB,
		}
	}
	if a := t.Accelerator; a != nil {
		dev := neuronDevices[a.Name]
		out.NeuronInfo = &xmlNeuronInfo{
			NeuronDevices: []xmlNeuronDevice{{
				Count:      a.Count,
				Name:       a.Name,
				CoreInfo:   xmlNeuronCore{Count: dev.cores, Version: dev.version},
				MemoryInfo: xmlMemory{SizeInMiB: dev.memoryMiB},
			}},
			TotalNeuronDeviceMemoryInMiB: int64(a.Count) * dev.memoryMiB,
		}
		// First-generation Inferentia is also reported as an inference accelerator.
		if a.Name == "inferentia" {
			out.InferenceAcceleratorInfo = &xmlInferenceAcceleratorInfo{
				Accelerators:              []xmlInferenceDevice{{Count: a.Count, Name: a.Name, Manufacturer: manufacturerName(a.Manufacturer), MemoryInfo: xmlMemory{SizeInMiB: dev.memoryMiB}}},
				TotalInferenceMemoryInMiB: int64(a.Count) * dev.memoryMiB,
			}
		}
	}
	return out
}

// usageClasses returns the capacity types a type is sold as in any zone.
func usageClasses(t *catalog.InstanceType) []string {
	seen := map[string]bool{}
	for _, o := range t.Offerings {
		seen[o.CapacityType] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// ec2Arch maps a Kubernetes architecture to EC2's name for it.
func ec2Arch(arch string) string {
	if arch == archAMD64 {
		return archX8664
	}
	return arch
}

// manufacturerName spells a catalog manufacturer the way EC2 does.
func manufacturerName(m string) string {
	switch m {
	case "intel":
		return "Intel"
	case "amd", "aws", "nvidia", "xilinx":
		return strings.ToUpper(m)
	}
	return m
}

// networkPerformance describes bandwidth the way EC2 does.
func networkPerformance(mbps int) string {
	if mbps <= 0 {
		return "Moderate"
	}
	if mbps < 1000 {
		return fmt.Sprintf("%d Megabit", mbps)
	}
	return strconv.FormatFloat(float64(mbps)/1000, 'f', -1, 64) + " Gigabit"
}

type describeInstanceTypeOfferingsResponse struct {
	XMLName xml.Name `xml:"DescribeInstanceTypeOfferingsResponse"`
	ec2Envelope
	Offerings []xmlInstanceTypeOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string                    `xml:"nextToken,omitempty"`
}

type xmlInstanceTypeOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

// describeInstanceTypeOfferings lists where each type is sold, by region, zone or zone id.
// A type is offered in a zone when it is sold there as any capacity type.
func (s *Server) describeInstanceTypeOfferings(p queryParams) (*describeInstanceTypeOfferingsResponse, error) {
	locationType := p.str("LocationType")
	if locationType == "" {
		locationType = "region"
	}
	zoneIDs := map[string]string{}
	for _, z := range s.zones {
		zoneIDs[z.name] = z.id
	}
	var offerings []xmlInstanceTypeOffering
	for i := range s.instanceTypes {
		t := &s.instanceTypes[i]
		seen := map[string]bool{}
		for _, o := range t.Offerings {
			var location string
			switch locationType {
			case "region":
				location = s.region
			case "availability-zone":
				location = o.Zone
			case "availability-zone-id":
				location = zoneIDs[o.Zone]
			default:
				return nil, invalidParameter("The location type '%s' is invalid; use region, availability-zone or availability-zone-id.", locationType)
			}
			if !seen[location] {
				seen[location] = true
				offerings = append(offerings, xmlInstanceTypeOffering{InstanceType: t.Name, LocationType: locationType, Location: location})
			}
		}
	}
	sort.SliceStable(offerings, func(i, j int) bool {
		if offerings[i].Location != offerings[j].Location {
			return offerings[i].Location < offerings[j].Location
		}
		return offerings[i].InstanceType < offerings[j].InstanceType
	})
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := filterFields[xmlInstanceTypeOffering]{fields: map[string]func(xmlInstanceTypeOffering) []string{
		"location":      func(o xmlInstanceTypeOffering) []string { return oneValue(o.Location) },
		"instance-type": func(o xmlInstanceTypeOffering) []string { return oneValue(o.InstanceType) },
	}}.compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(filterSlice(offerings, keep), maxResults, token, pageLimits{min: 5, max: 1000, fallback: 1000, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	return &describeInstanceTypeOfferingsResponse{Offerings: page, NextToken: next}, nil
}

type describeSpotPriceHistoryResponse struct {
	XMLName xml.Name `xml:"DescribeSpotPriceHistoryResponse"`
	ec2Envelope
	Prices    []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

type xmlSpotPrice struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
}

// describeSpotPriceHistory returns the catalog's spot price of every type in every zone that
// sells it as spot. Prices never change, so each has one record, dated when the server started:
// the price in effect at any StartTime the caller asks about.
func (s *Server) describeSpotPriceHistory(p queryParams) (*describeSpotPriceHistoryResponse, error) {
	if _, err := p.timestamp("StartTime"); err != nil {
		return nil, err
	}
	end, err := p.timestamp("EndTime")
	if err != nil {
		return nil, err
	}
	if !end.IsZero() && end.Before(s.startedAt) {
		return &describeSpotPriceHistoryResponse{}, nil
	}
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := filterFields[xmlSpotPrice]{fields: map[string]func(xmlSpotPrice) []string{
		"availability-zone":   func(sp xmlSpotPrice) []string { return oneValue(sp.AvailabilityZone) },
		"instance-type":       func(sp xmlSpotPrice) []string { return oneValue(sp.InstanceType) },
		"product-description": func(sp xmlSpotPrice) []string { return oneValue(sp.ProductDescription) },
	}}.compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	types := map[string]bool{}
	for _, name := range p.strs("InstanceType") {
		types[name] = true
	}
	products := map[string]bool{productLinux: true, productWindows: true}
	if wanted := p.strs("ProductDescription"); len(wanted) > 0 {
		products = map[string]bool{}
		for _, w := range wanted {
			products[w] = true
		}
	}
	zone := p.str("AvailabilityZone")
	zoneIDs := map[string]string{}
	for _, z := range s.zones {
		zoneIDs[z.name] = z.id
	}
	stamp := formatTime(s.startedAt.Truncate(time.Hour))
	var prices []xmlSpotPrice
	for i := range s.instanceTypes {
		t := &s.instanceTypes[i]
		if len(types) > 0 && !types[t.Name] {
			continue
		}
		for _, o := range t.Offerings {
			if o.CapacityType != capacitySpot || (zone != "" && o.Zone != zone) {
				continue
			}
			for _, product := range []string{productLinux, productWindows} {
				price := o.PricePerHour
				if product == productWindows {
					// Windows runs on x86_64 alone; its spot price includes the license.
					if t.Arch != archAMD64 {
						continue
					}
					price = windowsPrice(price, t.VCPU)
				}
				sp := xmlSpotPrice{
					InstanceType:       t.Name,
					ProductDescription: product,
					SpotPrice:          strconv.FormatFloat(price, 'f', 6, 64),
					Timestamp:          stamp,
					AvailabilityZone:   o.Zone,
					AvailabilityZoneID: zoneIDs[o.Zone],
				}
				if products[product] && keep(sp) {
					prices = append(prices, sp)
				}
			}
		}
	}
	page, next, err := paginate(prices, maxResults, token, pageLimits{min: 5, max: 1000, fallback: 1000, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	return &describeSpotPriceHistoryResponse{Prices: page, NextToken: next}, nil
}
