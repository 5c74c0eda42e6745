package instancetype

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
)

// DefaultVMMemoryOverheadPercent is the share of an instance's memory the hypervisor and OS
// keep when no other value is configured.
const DefaultVMMemoryOverheadPercent = 0.075

// OfflineOptions configure instance types built from a catalog instead of from AWS. They
// mean what the Options of the same name mean.
type OfflineOptions struct {
	// VMMemoryOverheadPercent of an instance's memory that the kubelet does not see; 0 means
	// 0.075, as for the provider.
	VMMemoryOverheadPercent float64
	// ReservedENIs are network interfaces kept from pods.
	ReservedENIs int
	// PrefixDelegation says the VPC CNI assigns /28 prefixes.
	PrefixDelegation bool
	// NodeCosts prices what a node costs besides its instance; nil means the embedded table.
	NodeCosts *nodecost.Table
	// PublicSubnets says the subnets map a public IPv4 address on launch.
	PublicSubnets bool
}

// CatalogInstanceTypes builds, without calling AWS, the instance types an EC2NodeClass can
// launch according to a catalog: the labels, capacity, kubelet overhead and priced offerings
// (node costs included)
// that Provider.InstanceTypes computes from EC2 for the same instance types. There are no
// subnets offline, so every zone of the catalog counts, unless the class's status lists its
// subnets (a class exported from a cluster): then their zones, with their zone IDs; without
// them zone IDs, an account's own mapping, are unknown and a requirement on
// topology.k8s.aws/zone-id matches no offering. No AMIs are resolved, so both architectures
// count (amd64 alone for a Windows class, whose prices are the Linux ones plus
// pricing.WindowsLicensePerVCPUHour per vCPU). Spot prices are the catalog's spot offerings; the
// on-demand price is
// the type's onDemandPricePerHour (or its on-demand offering price when that is unset) in
// every zone where the type has any offering, as with EC2's regional on-demand prices. The
// result is sorted by name, offerings by zone and capacity type.
func CatalogInstanceTypes(cat *catalog.Catalog, class *awsv1.EC2NodeClass, opts OfflineOptions) ([]*cloudprovider.InstanceType, error) {
	if opts.VMMemoryOverheadPercent == 0 {
		opts.VMMemoryOverheadPercent = DefaultVMMemoryOverheadPercent
	}
	if err := errors.Join(ValidateVMMemoryOverhead(opts.VMMemoryOverheadPercent), validateReservedENIs(opts.ReservedENIs)); err != nil {
		return nil, fmt.Errorf("configuring offline instance types: %w", err)
	}
	if _, err := amifamily.Of(class); err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: %w", class.Name, err)
	}
	zones := make(map[string]string, len(cat.Zones))
	for _, z := range cat.Zones {
		zones[z] = ""
	}
	if len(class.Status.Subnets) > 0 {
		clear(zones)
		for _, sn := range class.Status.Subnets {
			zones[sn.Zone] = sn.ZoneID
		}
	}
	prices := pricing.NewBook()
	entries := make([]*Entry, 0, len(cat.InstanceTypes))
	for i := range cat.InstanceTypes {
		t := &cat.InstanceTypes[i]
		entries = append(entries, newCatalogEntry(t))
		prices.AddCatalogPrices(t)
	}
	windows := amifamily.WindowsBuild(class) != ""
	if windows {
		vcpus := map[string]int64{}
		for _, e := range entries {
			vcpus[string(e.Info.InstanceType)] = int64(aws.ToInt32(e.Info.VCpuInfo.DefaultVCpus))
		}
		prices = pricing.DeriveWindows(prices, vcpus)
	}
	settings := Settings{VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent, ReservedENIs: int64(opts.ReservedENIs), PrefixDelegation: opts.PrefixDelegation}
	table := opts.NodeCosts
	if table == nil {
		table = pricing.EmbeddedNodeCosts()
	}
	costs := table.NodeCosts(class, opts.PublicSubnets)
	out := make([]*cloudprovider.InstanceType, 0, len(entries))
	for _, e := range entries {
		it := New(e, class, zones, prices, settings)
		if len(it.Offerings) == 0 || (windows && it.Labels[corev1.LabelArchStable] != amifamily.ArchitectureAMD64) {
			continue
		}
		for i := range it.Offerings {
			it.Offerings[i].NodeCosts = costs
		}
		sortOfferings(it.Offerings)
		out = append(out, it)
	}
	slices.SortFunc(out, func(a, b *cloudprovider.InstanceType) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// sortOfferings orders offerings by zone, then capacity type.
func sortOfferings(offerings []cloudprovider.Offering) {
	slices.SortFunc(offerings, func(a, b cloudprovider.Offering) int {
		return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.CapacityType, b.CapacityType))
	})
}

// ValidateVMMemoryOverhead returns an error unless percent, the share of memory the VM
// keeps from the kubelet, is in [0, 1).
func ValidateVMMemoryOverhead(percent float64) error {
	if percent < 0 || percent >= 1 {
		return fmt.Errorf("vm memory overhead percent %v must be in [0, 1)", percent)
	}
	return nil
}

func validateReservedENIs(n int) error {
	if n < 0 {
		return fmt.Errorf("reserved ENIs %d must not be negative", n)
	}
	return nil
}

// newCatalogEntry is what DescribeInstanceTypes and DescribeInstanceTypeOfferings say about a
// catalog instance type: the zones where it has any offering.
func newCatalogEntry(t *catalog.InstanceType) *Entry {
	e := &Entry{Info: instanceTypeInfo(t), Zones: map[string]bool{}}
	for _, o := range t.Offerings {
		e.Zones[o.Zone] = true
	}
	return e
}

// instanceTypeInfo describes a catalog instance type the way DescribeInstanceTypes does, as
// far as the catalog knows it. Accelerators made by AWS are Neuron devices (Inferentia,
// Trainium); the catalog's other accelerators have no device plugin Tailor knows.
func instanceTypeInfo(t *catalog.InstanceType) ec2types.InstanceTypeInfo {
	arch := ec2types.ArchitectureTypeX8664
	if t.Arch == catalog.ArchARM64 {
		arch = ec2types.ArchitectureTypeArm64
	}
	card := ec2types.NetworkCardInfo{NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: aws.Int32(int32(t.MaxENIs))}
	if t.NetworkBandwidthMbps > 0 {
		card.BaselineBandwidthInGbps = aws.Float64(float64(t.NetworkBandwidthMbps) / 1000)
		card.PeakBandwidthInGbps = card.BaselineBandwidthInGbps
	}
	info := ec2types.InstanceTypeInfo{
		InstanceType:                  ec2types.InstanceType(t.Name),
		BareMetal:                     aws.Bool(t.BareMetal),
		BurstablePerformanceSupported: aws.Bool(t.Burstable),
		Hypervisor:                    ec2types.InstanceTypeHypervisor(t.Hypervisor),
		SupportedUsageClasses:         usageClasses(t),
		SupportedVirtualizationTypes:  []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm},
		ProcessorInfo:                 &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}},
		VCpuInfo:                      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(int32(t.VCPU))},
		MemoryInfo:                    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(t.MemoryMiB)},
		InstanceStorageSupported:      aws.Bool(t.LocalNVMeGiB != nil),
		NetworkInfo: &ec2types.NetworkInfo{
			MaximumNetworkInterfaces:     aws.Int32(int32(t.MaxENIs)),
			MaximumNetworkCards:          aws.Int32(1),
			DefaultNetworkCardIndex:      aws.Int32(0),
			Ipv4AddressesPerInterface:    aws.Int32(int32(t.IPv4PerENI)),
			EncryptionInTransitSupported: aws.Bool(t.EncryptionInTransit),
			NetworkCards:                 []ec2types.NetworkCardInfo{card},
		},
	}
	if t.CPUManufacturer != "" {
		info.ProcessorInfo.Manufacturer = aws.String(t.CPUManufacturer)
	}
	if t.EBSBandwidthMbps > 0 {
		info.EbsInfo = &ec2types.EbsInfo{EbsOptimizedInfo: &ec2types.EbsOptimizedInfo{
			BaselineBandwidthInMbps: aws.Int32(int32(t.EBSBandwidthMbps)),
			MaximumBandwidthInMbps:  aws.Int32(int32(t.EBSBandwidthMbps)),
		}}
	}
	if t.LocalNVMeGiB != nil {
		size := int64(*t.LocalNVMeGiB)
		info.InstanceStorageInfo = &ec2types.InstanceStorageInfo{
			TotalSizeInGB: aws.Int64(size),
			Disks:         []ec2types.DiskInfo{{SizeInGB: aws.Int64(size), Count: aws.Int32(1), Type: ec2types.DiskTypeSsd}},
			NvmeSupport:   ec2types.EphemeralNvmeSupportRequired,
		}
	}
	if g := t.GPU; g != nil {
		info.GpuInfo = &ec2types.GpuInfo{
			Gpus: []ec2types.GpuDeviceInfo{{
				Name:         aws.String(g.Name),
				Manufacturer: aws.String(g.Manufacturer),
				Count:        aws.Int32(int32(g.Count)),
				MemoryInfo:   &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(int32(g.MemoryMiB))},
			}},
			TotalGpuMemoryInMiB: aws.Int32(int32(int64(g.Count) * g.MemoryMiB)),
		}
	}
	if a := t.Accelerator; a != nil && strings.EqualFold(a.Manufacturer, "aws") {
		device := ec2types.NeuronDeviceInfo{Name: aws.String(a.Name), Count: aws.Int32(int32(a.Count))}
		if cores, ok := neuronCoresPerDevice[strings.ToLower(a.Name)]; ok {
			device.CoreInfo = &ec2types.NeuronDeviceCoreInfo{Count: aws.Int32(cores)}
		}
		info.NeuronInfo = &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{device}}
	}
	return info
}

// neuronCoresPerDevice are the NeuronCores of each Neuron device, which the catalog does not
// carry: from AWS's Neuron documentation (Inferentia has four NeuronCore-v1, Inferentia2 and
// Trainium two NeuronCore-v2, Trainium2 eight NeuronCore-v3), as DescribeInstanceTypes
// reports them.
var neuronCoresPerDevice = map[string]int32{"inferentia": 4, "inferentia2": 2, "trainium": 2, "trainium2": 8}

// usageClasses are the capacity types the type is sold as in any zone, on-demand first.
func usageClasses(t *catalog.InstanceType) []ec2types.UsageClassType {
	var out []ec2types.UsageClassType
	for _, c := range []struct {
		capacityType string
		usage        ec2types.UsageClassType
	}{
		{catalog.CapacityTypeOnDemand, ec2types.UsageClassTypeOnDemand},
		{catalog.CapacityTypeSpot, ec2types.UsageClassTypeSpot},
	} {
		if slices.ContainsFunc(t.Offerings, func(o catalog.Offering) bool { return o.CapacityType == c.capacityType }) {
			out = append(out, c.usage)
		}
	}
	return out
}
