package localaws

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
)

// Price List API constants. The term and rate codes are the ones AWS uses for on-demand
// hourly prices; the SKU is derived from the instance type.
const (
	priceServiceCode    = "AmazonEC2"
	vpcServiceCode      = "AmazonVPC"
	priceFormatVersion  = "aws_v1"
	onDemandTermCode    = "JRTCKXETXF"
	onDemandRateCode    = "6YS6EN2CT7"
	codePricingParam    = "InvalidParameterException"
	codePricingNotFound = "NotFoundException"
)

// regionNames are the Price List location names of the regions the catalog may describe.
var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)",
	"us-east-2": "US East (Ohio)",
	"us-west-2": "US West (Oregon)",
}

// instanceFamilies name the Price List instanceFamily of a catalog category.
var instanceFamilies = map[string]string{
	"a": "General purpose", "m": "General purpose", "t": "General purpose",
	"c": "Compute optimized", "hpc": "Compute optimized",
	"r": "Memory optimized", "x": "Memory optimized", "u": "Memory optimized", "z": "Memory optimized",
	"d": "Storage optimized", "h": "Storage optimized", "i": "Storage optimized", "im": "Storage optimized", "is": "Storage optimized",
	"g": "GPU instance", "gr": "GPU instance", "p": "GPU instance",
	"inf": "Machine Learning ASIC Instances", "trn": "Machine Learning ASIC Instances",
	"f": "FPGA Instances", "vt": "Media Accelerator Instances",
}

// capacityBlockCategories are the catalog categories that EC2 Capacity Blocks for ML sell.
var capacityBlockCategories = map[string]bool{"p": true, "trn": true}

// marketNames are how price descriptions name each marketoption.
var marketNames = map[string]string{"OnDemand": "On Demand", "CapacityBlock": "Capacity Block"}

// capacityBlockPriceRatio sets a capacity block's hourly price apart from its type's
// on-demand price, so that a price lookup that lets capacity blocks in shows it.
const capacityBlockPriceRatio = 0.45

// product is one Price List product: a Linux, shared-tenancy instance type, sold on demand
// (marketoption OnDemand) or as a capacity block (CapacityBlock); an EBS volume type's
// storage, IOPS or throughput; or a public IPv4 address (AmazonVPC).
type product struct {
	sku         string
	service     string
	family      string
	attributes  map[string]string
	price       float64
	unit        string
	description string
}

type getProductsRequest struct {
	ServiceCode   string          `json:"ServiceCode"`
	Filters       []pricingFilter `json:"Filters"`
	FormatVersion string          `json:"FormatVersion"`
	NextToken     string          `json:"NextToken"`
	MaxResults    int             `json:"MaxResults"`
}

type pricingFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

type getProductsResponse struct {
	FormatVersion string   `json:"FormatVersion"`
	PriceList     []string `json:"PriceList"`
	NextToken     string   `json:"NextToken,omitempty"`
}

// priceDocument is a product in the shape of the AWS price list.
type priceDocument struct {
	Product         priceProduct                    `json:"product"`
	ServiceCode     string                          `json:"serviceCode"`
	Terms           map[string]map[string]priceTerm `json:"terms"`
	Version         string                          `json:"version"`
	PublicationDate string                          `json:"publicationDate"`
}

type priceProduct struct {
	ProductFamily string            `json:"productFamily"`
	Attributes    map[string]string `json:"attributes"`
	SKU           string            `json:"sku"`
}

type priceTerm struct {
	PriceDimensions map[string]priceDimension `json:"priceDimensions"`
	SKU             string                    `json:"sku"`
	EffectiveDate   string                    `json:"effectiveDate"`
	OfferTermCode   string                    `json:"offerTermCode"`
	TermAttributes  map[string]string         `json:"termAttributes"`
}

type priceDimension struct {
	Unit         string            `json:"unit"`
	EndRange     string            `json:"endRange"`
	Description  string            `json:"description"`
	AppliesTo    []string          `json:"appliesTo"`
	RateCode     string            `json:"rateCode"`
	BeginRange   string            `json:"beginRange"`
	PricePerUnit map[string]string `json:"pricePerUnit"`
}

// buildProducts describes every catalog type as a Price List product, and the types that
// Capacity Blocks for ML sell once more as capacity-block products: same attributes but
// marketoption CapacityBlock, a price of their own, listed right after the on-demand one.
// Only the marketoption filter tells them apart, as in the AWS price list.
func (s *Server) buildProducts() []product {
	location, ok := regionNames[s.region]
	if !ok {
		location = s.region
	}
	out := make([]product, 0, len(s.instanceTypes))
	for i := range s.instanceTypes {
		t := &s.instanceTypes[i]
		storage := "EBS only"
		if t.LocalNVMeGiB != nil {
			storage = fmt.Sprintf("1 x %d NVMe SSD", *t.LocalNVMeGiB)
		}
		generation := "Yes"
		if previousGenerationFamilies[t.Family] {
			generation = "No"
		}
		family, ok := instanceFamilies[t.Category]
		if !ok {
			family = "General purpose"
		}
		attrs := map[string]string{
			"servicecode":           priceServiceCode,
			"servicename":           "Amazon Elastic Compute Cloud",
			"location":              location,
			"locationType":          "AWS Region",
			"regionCode":            s.region,
			"instanceType":          t.Name,
			"instanceFamily":        family,
			"currentGeneration":     generation,
			"vcpu":                  strconv.Itoa(t.VCPU),
			"memory":                formatGiB(t.MemoryMiB),
			"storage":               storage,
			"networkPerformance":    networkPerformance(t.NetworkBandwidthMbps),
			"processorArchitecture": "64-bit",
			"operatingSystem":       "Linux",
			"tenancy":               "Shared",
			"preInstalledSw":        "NA",
			"capacitystatus":        "Used",
			"licenseModel":          "No License required",
			"marketoption":          "OnDemand",
			"usagetype":             "BoxUsage:" + t.Name,
			"operation":             "RunInstances",
		}
		if t.GPU != nil {
			attrs["gpu"] = strconv.Itoa(t.GPU.Count)
			attrs["gpuMemory"] = formatGiB(int64(t.GPU.Count) * t.GPU.MemoryMiB)
		}
		out = append(out, instanceProduct(strings.ToUpper(hexDigits(16, "sku", s.region, t.Name)), attrs, t.OnDemandPricePerHour))
		if t.Arch == archAMD64 {
			windows := maps.Clone(attrs)
			windows["operatingSystem"] = "Windows"
			windows["licenseModel"] = "License included"
			windows["operation"] = "RunInstances:0002"
			out = append(out, instanceProduct(strings.ToUpper(hexDigits(16, "sku", s.region, t.Name, "windows")), windows, windowsPrice(t.OnDemandPricePerHour, t.VCPU)))
		}
		if capacityBlockCategories[t.Category] {
			block := maps.Clone(attrs)
			block["marketoption"] = "CapacityBlock"
			price := math.Round(t.OnDemandPricePerHour*capacityBlockPriceRatio*10000) / 10000
			out = append(out, instanceProduct(strings.ToUpper(hexDigits(16, "sku", s.region, t.Name, "capacity-block")), block, price))
		}
	}
	return out
}

func instanceProduct(sku string, attrs map[string]string, price float64) product {
	return product{
		sku: sku, service: priceServiceCode, family: "Compute Instance", attributes: attrs, price: price, unit: "Hrs",
		description: fmt.Sprintf("$%s per %s %s %s Instance Hour", strconv.FormatFloat(price, 'f', -1, 64), marketNames[attrs["marketoption"]], attrs["operatingSystem"], attrs["instanceType"]),
	}
}

// windowsLicensePerVCPUHour is what the Windows Server license adds to the catalog's Linux
// price, per vCPU-hour, on demand and on spot. The shared catalog has Linux prices only, so
// Windows prices are derived: $0.046 is the difference between AWS's Windows
// (license included) and Linux on-demand prices, e.g. m5.large in us-east-1 at $0.188
// against $0.096.
const windowsLicensePerVCPUHour = 0.046

// windowsPrice is the hourly price of a Windows instance whose Linux price is linux.
func windowsPrice(linux float64, vcpus int) float64 {
	return math.Round((linux+float64(vcpus)*windowsLicensePerVCPUHour)*1e6) / 1e6
}

// nodeCostProducts describe the prices of the node cost table as Price List products: per
// EBS volume type its storage (GB-Mo), and the IOPS (IOPS-Mo) and throughput (MiBps-Mo) of
// the types that price them, under AmazonEC2; a public IPv4 address in use (Hrs) under
// AmazonVPC. io2's IOPS are one product per tier, as AWS lists them.
func (s *Server) nodeCostProducts(table *nodecost.Table) []product {
	location, ok := regionNames[s.region]
	if !ok {
		location = s.region
	}
	var out []product
	add := func(service, family, usage, volumeType, unit string, price float64) {
		attrs := map[string]string{
			"servicecode":  service,
			"location":     location,
			"locationType": "AWS Region",
			"regionCode":   s.region,
			"usagetype":    usage,
		}
		if volumeType != "" {
			attrs["volumeApiName"] = volumeType
		}
		out = append(out, product{
			sku: strings.ToUpper(hexDigits(16, "sku", s.region, service, usage)), service: service, family: family,
			attributes: attrs, price: price, unit: unit,
			description: fmt.Sprintf("$%s per %s of %s", strconv.FormatFloat(price, 'f', -1, 64), unit, usage),
		})
	}
	for _, volumeType := range slices.Sorted(maps.Keys(table.EBS)) {
		p := table.EBS[volumeType]
		usage := "EBS:VolumeUsage." + volumeType
		if volumeType == "standard" {
			usage = "EBS:VolumeUsage"
		}
		add(priceServiceCode, "Storage", usage, volumeType, "GB-Mo", p.PerGiBMonth)
		if p.PerIopsMonthAboveFree > 0 {
			add(priceServiceCode, "System Operation", "EBS:VolumeP-IOPS."+volumeType, volumeType, "IOPS-Mo", p.PerIopsMonthAboveFree)
		}
		if p.PerIopsMonth > 0 {
			add(priceServiceCode, "System Operation", "EBS:VolumeP-IOPS."+volumeType, volumeType, "IOPS-Mo", p.PerIopsMonth)
		}
		for i, tier := range p.PerIopsMonthTiers {
			usage := "EBS:VolumeP-IOPS." + volumeType
			if i > 0 {
				usage += fmt.Sprintf(".tier%d", i+1)
			}
			add(priceServiceCode, "System Operation", usage, volumeType, "IOPS-Mo", tier.Price)
		}
		if p.PerMiBpsMonthAboveFree > 0 {
			add(priceServiceCode, "Provisioned Throughput", "EBS:VolumeP-Throughput."+volumeType, volumeType, "MiBps-Mo", p.PerMiBpsMonthAboveFree)
		}
	}
	add(vpcServiceCode, "VPC Public IPv4 Address", "PublicIPv4:InUseAddress", "", "Hrs", table.PublicIPv4.PerHour)
	return out
}

// formatGiB writes a size the way the price list does, e.g. "8 GiB" or "3.75 GiB".
func formatGiB(mib int64) string {
	gib := math.Round(float64(mib)/1024*1000) / 1000
	return strconv.FormatFloat(gib, 'f', -1, 64) + " GiB"
}

// pricingAction runs one operation of AWSPriceListService.
func (s *Server) pricingAction(operation string, body []byte) (any, error) {
	if operation != "GetProducts" {
		return nil, newAPIError("UnknownOperationException", "The operation AWSPriceListService.%s is not served by the local endpoint.", operation)
	}
	var req getProductsRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	return s.getProducts(req)
}

// getProducts serves GetProducts for AmazonEC2 and AmazonVPC.
func (s *Server) getProducts(req getProductsRequest) (*getProductsResponse, error) {
	if req.ServiceCode != priceServiceCode && req.ServiceCode != vpcServiceCode {
		return nil, newAPIError(codePricingNotFound, "The service code %q is not served by the local endpoint; only %s and %s are.", req.ServiceCode, priceServiceCode, vpcServiceCode)
	}
	if req.FormatVersion != "" && req.FormatVersion != priceFormatVersion {
		return nil, newAPIError(codePricingParam, "Unsupported format version %q.", req.FormatVersion)
	}
	matches := make([]func(map[string]string) bool, 0, len(req.Filters))
	for _, f := range req.Filters {
		m, err := compilePricingFilter(f)
		if err != nil {
			return nil, err
		}
		matches = append(matches, m)
	}
	found := filterSlice(s.products, func(p product) bool {
		if p.service != req.ServiceCode {
			return false
		}
		for _, m := range matches {
			if !m(p.attributes) {
				return false
			}
		}
		return true
	})
	page, next, err := paginate(found, req.MaxResults, req.NextToken, pageLimits{min: 1, max: 100, fallback: 100, tokenCode: "InvalidNextTokenException", paramCode: codePricingParam})
	if err != nil {
		return nil, err
	}
	resp := &getProductsResponse{FormatVersion: priceFormatVersion, PriceList: make([]string, 0, len(page)), NextToken: next}
	for _, p := range page {
		doc, err := json.Marshal(s.priceDocument(p))
		if err != nil {
			return nil, fmt.Errorf("encoding price document %s: %w", p.sku, err)
		}
		resp.PriceList = append(resp.PriceList, string(doc))
	}
	return resp, nil
}

// compilePricingFilter returns a predicate on product attributes. Field names and values
// compare without regard to case, as the Price List API does.
func compilePricingFilter(f pricingFilter) (func(map[string]string) bool, error) {
	if f.Field == "" {
		return nil, newAPIError(codePricingParam, "A filter needs a Field.")
	}
	lookup := func(attrs map[string]string) (string, bool) {
		for k, v := range attrs {
			if strings.EqualFold(k, f.Field) {
				return v, true
			}
		}
		return "", false
	}
	anyOf := func(v string) bool {
		for _, want := range strings.Split(f.Value, ",") {
			if strings.EqualFold(strings.TrimSpace(want), v) {
				return true
			}
		}
		return false
	}
	var match func(string) bool
	switch f.Type {
	case "TERM_MATCH", "EQUALS":
		match = func(v string) bool { return strings.EqualFold(v, f.Value) }
	case "CONTAINS":
		match = func(v string) bool { return strings.Contains(strings.ToLower(v), strings.ToLower(f.Value)) }
	case "ANY_OF":
		match = anyOf
	case "NONE_OF":
		match = func(v string) bool { return !anyOf(v) }
	default:
		return nil, newAPIError(codePricingParam, "Unsupported filter type %q.", f.Type)
	}
	return func(attrs map[string]string) bool {
		v, ok := lookup(attrs)
		return ok && match(v)
	}, nil
}

// priceDocument builds the price list document of a product.
func (s *Server) priceDocument(p product) priceDocument {
	published := s.startedAt.Truncate(24 * time.Hour)
	termKey := p.sku + "." + onDemandTermCode
	rateKey := termKey + "." + onDemandRateCode
	return priceDocument{
		Product: priceProduct{
			ProductFamily: p.family,
			Attributes:    p.attributes,
			SKU:           p.sku,
		},
		ServiceCode: p.service,
		Terms: map[string]map[string]priceTerm{
			"OnDemand": {
				termKey: {
					PriceDimensions: map[string]priceDimension{
						rateKey: {
							Unit:         p.unit,
							EndRange:     "Inf",
							Description:  p.description,
							AppliesTo:    []string{},
							RateCode:     rateKey,
							BeginRange:   "0",
							PricePerUnit: map[string]string{"USD": strconv.FormatFloat(p.price, 'f', 10, 64)},
						},
					},
					SKU:            p.sku,
					EffectiveDate:  published.Format(time.RFC3339),
					OfferTermCode:  onDemandTermCode,
					TermAttributes: map[string]string{},
				},
			},
		},
		Version:         published.Format("20060102150405"),
		PublicationDate: published.Format(time.RFC3339),
	}
}
