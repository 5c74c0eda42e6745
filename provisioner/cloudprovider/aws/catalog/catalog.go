// Package catalog is the schema of Tailor's EC2 instance catalog: instance specs, on-demand
// prices and offerings per zone and capacity type. It reads catalog files and embeds the
// catalog of us-east-1, which serves the local EC2-compatible endpoint, tests, benchmarks
// and `tailor-provisioner simulate`: real instance specs and on-demand prices, synthetic zone
// offerings and spot prices (fixed, so results repeat).
package catalog

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/table"
)

// Capacity types of an offering.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// Architectures of an instance type, as Kubernetes names them.
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
)

//go:embed ec2-us-east-1.json
var embedded []byte

// embeddedName names the embedded catalog's file in errors.
const embeddedName = "provisioner/cloudprovider/aws/catalog/ec2-us-east-1.json"

// Catalog is an EC2 instance catalog of one region.
type Catalog struct {
	Region        string         `json:"region"`
	Zones         []string       `json:"zones"`
	Currency      string         `json:"currency"`
	InstanceTypes []InstanceType `json:"instanceTypes"`
}

// InstanceType is one EC2 instance type and its offerings.
type InstanceType struct {
	Name                 string       `json:"name"`
	Family               string       `json:"family"`
	Category             string       `json:"category"`
	Generation           int          `json:"generation"`
	Size                 string       `json:"size"`
	Arch                 string       `json:"arch"`
	VCPU                 int          `json:"vcpu"`
	MemoryMiB            int64        `json:"memoryMiB"`
	CPUManufacturer      string       `json:"cpuManufacturer"`
	Hypervisor           string       `json:"hypervisor"`
	BareMetal            bool         `json:"bareMetal"`
	Burstable            bool         `json:"burstable"`
	NetworkBandwidthMbps int          `json:"networkBandwidthMbps"`
	EBSBandwidthMbps     int          `json:"ebsBandwidthMbps"`
	LocalNVMeGiB         *int         `json:"localNvmeGiB"`
	EncryptionInTransit  bool         `json:"encryptionInTransit"`
	MaxENIs              int          `json:"maxENIs"`
	IPv4PerENI           int          `json:"ipv4PerENI"`
	MaxPods              int          `json:"maxPods"`
	GPU                  *GPU         `json:"gpu"`
	Accelerator          *Accelerator `json:"accelerator"`
	OnDemandPricePerHour float64      `json:"onDemandPricePerHour"`
	Offerings            []Offering   `json:"offerings"`
}

// GPU describes the GPUs of an instance type.
type GPU struct {
	Count        int    `json:"count"`
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	MemoryMiB    int64  `json:"memoryMiB"`
}

// Accelerator describes non-GPU accelerators (Inferentia, Trainium, ...).
type Accelerator struct {
	Count        int    `json:"count"`
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
}

// Offering is an instance type sold in a zone with a capacity type at a price.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
}

// Parse decodes and validates a catalog. It is read strictly (see package table), so a
// misspelt field is reported rather than silently read as zero.
func Parse(r io.Reader) (*Catalog, error) {
	var c Catalog
	if err := table.Decode(r, &c); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// LoadFile reads and validates the catalog file at path. Its errors name the file.
func LoadFile(path string) (*Catalog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading EC2 catalog: %w", err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("EC2 catalog %s: %w", path, err)
	}
	return c, nil
}

// Embedded decodes the embedded catalog of us-east-1. Each call returns a fresh copy the
// caller may change.
func Embedded() (*Catalog, error) {
	c, err := Parse(bytes.NewReader(embedded))
	if err != nil {
		return nil, fmt.Errorf("embedded EC2 catalog %s: %w", embeddedName, err)
	}
	return c, nil
}

// validate reports every field that would make the catalog unusable, each with its path.
func (c *Catalog) validate() error {
	var errs []error
	if len(c.Zones) == 0 {
		errs = append(errs, errors.New("zones: must list at least one zone"))
	}
	if len(c.InstanceTypes) == 0 {
		errs = append(errs, errors.New("instanceTypes: must list at least one instance type"))
	}
	zones := map[string]bool{}
	for i, z := range c.Zones {
		if z == "" {
			errs = append(errs, fmt.Errorf("zones[%d]: must not be empty", i))
		}
		zones[z] = true
	}
	seen := map[string]int{}
	for i := range c.InstanceTypes {
		t := &c.InstanceTypes[i]
		at := fmt.Sprintf("instanceTypes[%d]", i)
		if t.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name must be set", at))
			continue
		}
		at = fmt.Sprintf("%s (%s)", at, t.Name)
		if first, ok := seen[t.Name]; ok {
			errs = append(errs, fmt.Errorf("%s: duplicates instanceTypes[%d]", at, first))
		}
		seen[t.Name] = i
		errs = append(errs, t.validate(at, zones)...)
	}
	return errors.Join(errs...)
}

func (t *InstanceType) validate(at string, zones map[string]bool) []error {
	var errs []error
	if t.Arch != ArchAMD64 && t.Arch != ArchARM64 {
		errs = append(errs, fmt.Errorf("%s: arch %q must be %s or %s", at, t.Arch, ArchAMD64, ArchARM64))
	}
	if t.VCPU <= 0 {
		errs = append(errs, fmt.Errorf("%s: vcpu must be positive, got %d", at, t.VCPU))
	}
	if t.MemoryMiB <= 0 {
		errs = append(errs, fmt.Errorf("%s: memoryMiB must be positive, got %d", at, t.MemoryMiB))
	}
	if t.MaxENIs < 0 || t.IPv4PerENI < 0 {
		errs = append(errs, fmt.Errorf("%s: maxENIs and ipv4PerENI must not be negative, got %d and %d", at, t.MaxENIs, t.IPv4PerENI))
	}
	if t.GPU != nil && t.GPU.Count <= 0 {
		errs = append(errs, fmt.Errorf("%s: gpu.count must be positive, got %d (use \"gpu\": null for none)", at, t.GPU.Count))
	}
	if t.Accelerator != nil && t.Accelerator.Count <= 0 {
		errs = append(errs, fmt.Errorf("%s: accelerator.count must be positive, got %d (use \"accelerator\": null for none)", at, t.Accelerator.Count))
	}
	if t.OnDemandPricePerHour < 0 {
		errs = append(errs, fmt.Errorf("%s: onDemandPricePerHour must not be negative, got %v", at, t.OnDemandPricePerHour))
	}
	for j, o := range t.Offerings {
		oat := fmt.Sprintf("%s: offerings[%d]", at, j)
		if !zones[o.Zone] {
			errs = append(errs, fmt.Errorf("%s: zone %q is not one of the catalog's zones", oat, o.Zone))
		}
		if o.CapacityType != CapacityTypeSpot && o.CapacityType != CapacityTypeOnDemand {
			errs = append(errs, fmt.Errorf("%s: capacityType %q must be %s or %s", oat, o.CapacityType, CapacityTypeSpot, CapacityTypeOnDemand))
		}
		if o.PricePerHour <= 0 {
			errs = append(errs, fmt.Errorf("%s: pricePerHour must be positive, got %v", oat, o.PricePerHour))
		}
	}
	return errs
}
