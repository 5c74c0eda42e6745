package aws

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// DefaultUnavailableOfferingsTTL is how long an offering that reported a capacity error is
// kept from the planner and from launches.
const DefaultUnavailableOfferingsTTL = 3 * time.Minute

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

// offeringKey names an offering: an instance type in a zone as a capacity type, and for
// capacity type reserved its capacity reservation.
type offeringKey struct {
	instanceType, zone, capacityType, reservationID string
}

// keyOf names an offering of the instance type; a reserved one by its reservation.
func keyOf(instanceType string, o cloudprovider.Offering) offeringKey {
	k := offeringKey{instanceType: instanceType, zone: o.Zone, capacityType: o.CapacityType}
	if o.CapacityType == karpv1.CapacityTypeReserved {
		k.reservationID = o.ReservationID
	}
	return k
}

// unavailableOfferings remembers offerings out of capacity until their TTL passes.
type unavailableOfferings struct {
	clock clock.Clock
	ttl   time.Duration

	mu    sync.Mutex
	until map[offeringKey]time.Time
}

func newUnavailableOfferings(clk clock.Clock, ttl time.Duration) *unavailableOfferings {
	return &unavailableOfferings{clock: clk, ttl: ttl, until: map[offeringKey]time.Time{}}
}

// mark keeps the offering unavailable for the TTL from now.
func (u *unavailableOfferings) mark(key offeringKey) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.until[key] = u.clock.Now().Add(u.ttl)
	u.reportLocked()
}

// unavailableOfferingsMetric counts the offerings kept from planning and launches.
var unavailableOfferingsMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "tailor_cloudprovider_unavailable_offerings",
	Help: "Offerings (instance type, zone, capacity type) kept from planning and launches after a capacity error, by capacity type.",
}, []string{"capacity_type"})

// reportLocked publishes how many offerings are unavailable; u.mu must be held.
func (u *unavailableOfferings) reportLocked() {
	counts := map[string]float64{karpv1.CapacityTypeSpot: 0, karpv1.CapacityTypeOnDemand: 0, karpv1.CapacityTypeReserved: 0}
	for key := range u.until {
		counts[key.capacityType]++
	}
	for capacityType, n := range counts {
		unavailableOfferingsMetric.WithLabelValues(capacityType).Set(n)
	}
}

// has reports whether the offering is unavailable now, forgetting it once its TTL passed.
func (u *unavailableOfferings) has(key offeringKey) bool {
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
