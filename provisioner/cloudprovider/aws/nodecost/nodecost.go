// Package nodecost prices what an EC2 node costs besides its instance: its EBS volumes (the
// EC2NodeClass's block device mappings, or the AMI family's default root volume), a public
// IPv4 address, and CloudWatch detailed monitoring. Prices come from a Table: the embedded
// table of us-east-1's list prices, or one read from the Pricing API over it.
package nodecost

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/table"
)

//go:embed node-costs-us-east-1.json
var embedded []byte

// embeddedName names the embedded table's file in errors.
const embeddedName = "provisioner/cloudprovider/aws/nodecost/node-costs-us-east-1.json"

// Volume types whose IOPS and throughput are priced apart from their storage.
const (
	VolumeTypeGP3 = "gp3"
	VolumeTypeIO1 = "io1"
	VolumeTypeIO2 = "io2"
)

// Table holds the list prices of one region. Monthly prices are per month of HoursPerMonth.
type Table struct {
	Region        string  `json:"region"`
	HoursPerMonth float64 `json:"hoursPerMonth"`
	// EBS prices by volume type (gp3, gp2, io1, io2, st1, sc1, standard).
	EBS                map[string]VolumePrices `json:"ebs"`
	PublicIPv4         PublicIPv4Prices        `json:"publicIPv4"`
	DetailedMonitoring MonitoringPrices        `json:"detailedMonitoring"`
	// DefaultBlockDeviceMappings are the volumes a node of each AMI family gets when its
	// EC2NodeClass has no block device mappings.
	DefaultBlockDeviceMappings map[string][]DefaultVolume `json:"defaultBlockDeviceMappings"`
}

// VolumePrices are the prices of one EBS volume type.
type VolumePrices struct {
	PerGiBMonth float64 `json:"perGiBMonth"`
	// FreeIops and FreeThroughputMiBps are what a gp3 volume includes; PerIopsMonthAboveFree
	// and PerMiBpsMonthAboveFree price what is provisioned beyond.
	FreeIops               int64   `json:"freeIops,omitempty"`
	PerIopsMonthAboveFree  float64 `json:"perIopsMonthAboveFree,omitempty"`
	FreeThroughputMiBps    int64   `json:"freeThroughputMiBps,omitempty"`
	PerMiBpsMonthAboveFree float64 `json:"perMiBpsMonthAboveFree,omitempty"`
	// PerIopsMonth prices every provisioned IOPS of io1; PerIopsMonthTiers those of io2.
	PerIopsMonth      float64    `json:"perIopsMonth,omitempty"`
	PerIopsMonthTiers []IopsTier `json:"perIopsMonthTiers,omitempty"`
	// PerMillionIORequests is what magnetic (standard) volumes charge for I/O, which depends
	// on use and is not part of a node's price.
	PerMillionIORequests float64 `json:"perMillionIORequests,omitempty"`
}

// IopsTier prices the IOPS of a volume up to UpTo (nil: no bound).
type IopsTier struct {
	UpTo  *int64  `json:"upTo"`
	Price float64 `json:"price"`
}

// PublicIPv4Prices price a public IPv4 address in use.
type PublicIPv4Prices struct {
	PerHour float64 `json:"perHour"`
}

// MonitoringPrices price detailed monitoring: CloudWatch metrics per instance, each a month.
type MonitoringPrices struct {
	MetricsPerInstance int     `json:"metricsPerInstance"`
	PerMetricMonth     float64 `json:"perMetricMonth"`
}

// DefaultVolume is a volume an AMI family attaches by default.
type DefaultVolume struct {
	DeviceName string            `json:"deviceName"`
	VolumeSize resource.Quantity `json:"volumeSize"`
	VolumeType string            `json:"volumeType"`
}

// Parse decodes and validates a table, read strictly (see package table).
func Parse(r io.Reader) (*Table, error) {
	var t Table
	if err := table.Decode(r, &t); err != nil {
		return nil, err
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Embedded decodes the embedded table of us-east-1. Each call returns a fresh copy.
func Embedded() (*Table, error) {
	t, err := Parse(bytes.NewReader(embedded))
	if err != nil {
		return nil, fmt.Errorf("embedded node cost table %s: %w", embeddedName, err)
	}
	return t, nil
}

func (t *Table) validate() error {
	var errs []error
	if t.HoursPerMonth <= 0 {
		errs = append(errs, fmt.Errorf("hoursPerMonth must be positive, got %v", t.HoursPerMonth))
	}
	for _, name := range slices.Sorted(maps.Keys(t.EBS)) {
		if t.EBS[name].PerGiBMonth < 0 {
			errs = append(errs, fmt.Errorf("ebs.%s.perGiBMonth must not be negative", name))
		}
	}
	for _, family := range slices.Sorted(maps.Keys(t.DefaultBlockDeviceMappings)) {
		for i, v := range t.DefaultBlockDeviceMappings[family] {
			if _, ok := t.EBS[v.VolumeType]; !ok {
				errs = append(errs, fmt.Errorf("defaultBlockDeviceMappings.%s[%d]: volume type %q has no ebs prices", family, i, v.VolumeType))
			}
		}
	}
	return errors.Join(errs...)
}

// clone copies the table deeply enough for prices to be overwritten.
func (t *Table) clone() *Table {
	out := *t
	out.EBS = maps.Clone(t.EBS)
	for k, v := range out.EBS {
		v.PerIopsMonthTiers = slices.Clone(v.PerIopsMonthTiers)
		out.EBS[k] = v
	}
	out.DefaultBlockDeviceMappings = maps.Clone(t.DefaultBlockDeviceMappings)
	return &out
}

// NodeCosts prices a node of the class, in a subnet that maps a public IPv4 address on
// launch or not: the class's associatePublicIPAddress, when set, decides instead.
func (t *Table) NodeCosts(class *awsv1.EC2NodeClass, subnetMapsPublicIPv4 bool) cloudprovider.NodeCosts {
	var costs cloudprovider.NodeCosts
	if class == nil {
		return costs
	}
	costs.Volumes = t.volumes(class)
	public := subnetMapsPublicIPv4
	if v := class.Spec.AssociatePublicIPAddress; v != nil {
		public = *v
	}
	if public {
		costs.PublicIPv4 = t.PublicIPv4.PerHour
	}
	if v := class.Spec.DetailedMonitoring; v != nil && *v {
		costs.Monitoring = float64(t.DetailedMonitoring.MetricsPerInstance) * t.DetailedMonitoring.PerMetricMonth / t.HoursPerMonth
	}
	return costs
}

// volumes prices the class's block device mappings, or its AMI family's default volumes
// (AL2023's for Custom, whose AMI's own mappings are not known here).
func (t *Table) volumes(class *awsv1.EC2NodeClass) float64 {
	total := 0.0
	if len(class.Spec.BlockDeviceMappings) == 0 {
		family := class.ResolvedAMIFamily()
		if strings.HasPrefix(family, "Windows") {
			// Windows2019 and Windows2022 AMIs have the same root volume.
			family = "Windows"
		}
		defaults, ok := t.DefaultBlockDeviceMappings[family]
		if !ok {
			defaults = t.DefaultBlockDeviceMappings[awsv1.AMIFamilyAL2023]
		}
		for _, v := range defaults {
			total += t.Volume(v.VolumeType, v.VolumeSize, 0, 0)
		}
		return total
	}
	for _, m := range class.Spec.BlockDeviceMappings {
		if m == nil || m.EBS == nil {
			continue
		}
		volumeType := VolumeTypeGP3
		if m.EBS.VolumeType != nil {
			volumeType = *m.EBS.VolumeType
		}
		var size resource.Quantity
		if m.EBS.VolumeSize != nil {
			size = *m.EBS.VolumeSize
		}
		total += t.Volume(volumeType, size, deref(m.EBS.IOPS), deref(m.EBS.Throughput))
	}
	return total
}

// Volume is the hourly price of one EBS volume: its size (0 when only a snapshot sets it)
// at the type's price per GiB-month, plus provisioned IOPS and throughput (0: the type's
// default) beyond what the type includes. An unknown volume type costs nothing.
func (t *Table) Volume(volumeType string, size resource.Quantity, iops, throughput int64) float64 {
	p, ok := t.EBS[volumeType]
	if !ok {
		return 0
	}
	gib := float64(size.Value()) / (1 << 30)
	monthly := gib * p.PerGiBMonth
	switch volumeType {
	case VolumeTypeGP3:
		monthly += float64(max(iops-p.FreeIops, 0)) * p.PerIopsMonthAboveFree
		monthly += float64(max(throughput-p.FreeThroughputMiBps, 0)) * p.PerMiBpsMonthAboveFree
	case VolumeTypeIO1:
		monthly += float64(iops) * p.PerIopsMonth
	case VolumeTypeIO2:
		monthly += tieredIops(p.PerIopsMonthTiers, iops)
	}
	return monthly / t.HoursPerMonth
}

// tieredIops prices iops through the tiers, each tier's price applying to the IOPS between
// the previous tier's bound and its own.
func tieredIops(tiers []IopsTier, iops int64) float64 {
	total, from := 0.0, int64(0)
	for _, tier := range tiers {
		upTo := iops
		if tier.UpTo != nil {
			upTo = min(iops, *tier.UpTo)
		}
		if upTo > from {
			total += float64(upTo-from) * tier.Price
			from = upTo
		}
	}
	return total
}

func deref(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
