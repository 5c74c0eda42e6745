// Package unavailable remembers the offerings that reported a capacity error, keeping them
// from planning and launches until a time to live passes.
package unavailable

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// DefaultTTL is how long an offering that reported a capacity error is
// kept from the planner and from launches.
const DefaultTTL = 3 * time.Minute

// capacityErrorCodes are the CreateFleet error codes that say an offering cannot launch now,
// as opposed to a request that is wrong.
var capacityErrorCodes = map[string]bool{
	"InsufficientInstanceCapacity":      true,
	"MaxSpotInstanceCountExceeded":      true,
	"UnfulfillableCapacity":             true,
	"Unsupported":                       true,
	"VcpuLimitExceeded":                 true,
	"InsufficientFreeAddressesInSubnet": true,
	"ReservationCapacityExceeded":       true,
}

// IsCapacityError reports whether a CreateFleet error code says an offering cannot launch
// now, as opposed to a request that is wrong.
func IsCapacityError(code string) bool { return capacityErrorCodes[code] }

// Key names an offering: an instance type in a zone as a capacity type, and for
// capacity type reserved its capacity reservation.
type Key struct {
	InstanceType, Zone, CapacityType, ReservationID string
}

// KeyOf names an offering of the instance type; a reserved one by its reservation.
func KeyOf(instanceType string, o cloudprovider.Offering) Key {
	k := Key{InstanceType: instanceType, Zone: o.Zone, CapacityType: o.CapacityType}
	if o.CapacityType == karpv1.CapacityTypeReserved {
		k.ReservationID = o.ReservationID
	}
	return k
}

// Offerings remembers offerings out of capacity until their TTL passes.
type Offerings struct {
	clock clock.Clock
	ttl   time.Duration

	mu    sync.Mutex
	until map[Key]time.Time
}

// New returns offerings that stay unavailable for ttl after they are marked.
func New(clk clock.Clock, ttl time.Duration) *Offerings {
	return &Offerings{clock: clk, ttl: ttl, until: map[Key]time.Time{}}
}

// Mark keeps the offering unavailable for the TTL from now.
func (u *Offerings) Mark(key Key) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.until[key] = u.clock.Now().Add(u.ttl)
	u.reportLocked()
}

// Collectors are the metrics of the package.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{unavailableOfferingsMetric}
}

// unavailableOfferingsMetric counts the offerings kept from planning and launches.
var unavailableOfferingsMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "tailor_cloudprovider_unavailable_offerings",
	Help: "Offerings (instance type, zone, capacity type) kept from planning and launches after a capacity error, by capacity type.",
}, []string{"capacity_type"})

// reportLocked publishes how many offerings are unavailable; u.mu must be held.
func (u *Offerings) reportLocked() {
	counts := map[string]float64{karpv1.CapacityTypeSpot: 0, karpv1.CapacityTypeOnDemand: 0, karpv1.CapacityTypeReserved: 0}
	for key := range u.until {
		counts[key.CapacityType]++
	}
	for capacityType, n := range counts {
		unavailableOfferingsMetric.WithLabelValues(capacityType).Set(n)
	}
}

// Has reports whether the offering is unavailable now, forgetting it once its TTL passed.
func (u *Offerings) Has(key Key) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.until[key]
	if !ok {
		return false
	}
	if !u.clock.Now().Before(until) {
		delete(u.until, key)
		u.reportLocked()
		return false
	}
	return true
}
