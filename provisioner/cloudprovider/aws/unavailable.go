package aws

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
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

// offeringKey names an offering: an instance type in a zone as a capacity type.
type offeringKey struct {
	instanceType, zone, capacityType string
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
		return false
	}
	return true
}
