package pricing

import (
	"math"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
)

// Book holds hourly prices: on-demand per instance type, spot per type and zone.
type Book struct {
	OnDemand map[string]float64
	Spot     map[string]map[string]float64
}

// NewBook returns an empty book.
func NewBook() *Book {
	return &Book{OnDemand: map[string]float64{}, Spot: map[string]map[string]float64{}}
}

// Price is the hourly price of the instance type in the zone as the capacity type (spot or
// on-demand), false when the book has none.
func (p *Book) Price(instanceType, zone, capacityType string) (float64, bool) {
	if capacityType == karpv1.CapacityTypeSpot {
		v, ok := p.Spot[instanceType][zone]
		return v, ok
	}
	v, ok := p.OnDemand[instanceType]
	return v, ok
}

// AddCatalogPrices records the type's prices as the Pricing API and the spot price history
// would report them.
func (p *Book) AddCatalogPrices(t *catalog.InstanceType) {
	if t.OnDemandPricePerHour > 0 {
		p.OnDemand[t.Name] = t.OnDemandPricePerHour
	}
	for _, o := range t.Offerings {
		switch o.CapacityType {
		case catalog.CapacityTypeSpot:
			if p.Spot[t.Name] == nil {
				p.Spot[t.Name] = map[string]float64{}
			}
			p.Spot[t.Name][o.Zone] = o.PricePerHour
		case catalog.CapacityTypeOnDemand:
			if _, ok := p.OnDemand[t.Name]; !ok {
				p.OnDemand[t.Name] = o.PricePerHour
			}
		}
	}
}

// Embedded are the prices of the catalog embedded in the binary.
func Embedded() *Book {
	prices := NewBook()
	cat, err := catalog.Embedded()
	if err != nil {
		return prices
	}
	for i := range cat.InstanceTypes {
		prices.AddCatalogPrices(&cat.InstanceTypes[i])
	}
	return prices
}

// EmbeddedNodeCosts is the node cost table embedded in the binary.
func EmbeddedNodeCosts() *nodecost.Table {
	t, err := nodecost.Embedded()
	if err != nil {
		// The embedded table is validated by the package's tests: a node then costs its
		// instance only.
		return &nodecost.Table{HoursPerMonth: 730}
	}
	return t
}

// WindowsLicensePerVCPUHour is what a Windows Server license adds to an instance's hourly
// price, per vCPU, on demand and on spot: the difference between AWS's Windows (license
// included) and Linux on-demand prices, e.g. m5.large in us-east-1 at $0.188 against $0.096.
// It is a derived figure, used only where AWS's own Windows prices cannot be read (isolated
// VPC, the embedded catalog, a failed read).
const WindowsLicensePerVCPUHour = 0.046

// DeriveWindows adds the Windows license (WindowsLicensePerVCPUHour per vCPU) to Linux
// prices, on demand and on spot, rounded to the millionth of a dollar spot prices are given
// in; vcpus are the vCPUs of each instance type, and types without are left out.
func DeriveWindows(linux *Book, vcpus map[string]int64) *Book {
	license := func(name string) float64 { return float64(vcpus[name]) * WindowsLicensePerVCPUHour }
	round := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }
	out := NewBook()
	for name, price := range linux.OnDemand {
		if _, ok := vcpus[name]; ok {
			out.OnDemand[name] = round(price + license(name))
		}
	}
	for name, zones := range linux.Spot {
		if _, ok := vcpus[name]; !ok {
			continue
		}
		out.Spot[name] = map[string]float64{}
		for zone, price := range zones {
			out.Spot[name][zone] = round(price + license(name))
		}
	}
	return out
}
