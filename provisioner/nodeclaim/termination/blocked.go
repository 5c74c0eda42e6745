package termination

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// drainBlockedMetric counts, per NodePool, the NodeClaims being terminated whose last drain
// pass found pods it may not evict yet: a PodDisruptionBudget refused, or a pod carries
// karpenter.sh/do-not-disrupt.
var drainBlockedMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "tailor_termination_drain_blocked_nodeclaims",
	Help: "NodeClaims being terminated whose last drain pass found pods it may not evict yet (a PodDisruptionBudget refused, or karpenter.sh/do-not-disrupt), by NodePool.",
}, []string{"nodepool"})

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics termination registers: what init registers, and what the
// metrics reference lists.
func Collectors() []prometheus.Collector { return []prometheus.Collector{drainBlockedMetric} }

// blockedDrains tracks which NodeClaims' drains are blocked, and publishes their count per
// NodePool. Reconciles run concurrently.
type blockedDrains struct {
	gauge *prometheus.GaugeVec

	mu sync.Mutex
	// pools is the NodePool of each NodeClaim whose drain is blocked.
	pools map[string]string
}

func newBlockedDrains(gauge *prometheus.GaugeVec) *blockedDrains {
	return &blockedDrains{gauge: gauge, pools: map[string]string{}}
}

// set records whether the drain of the NodeClaim of the NodePool is blocked.
func (b *blockedDrains) set(nodeClaim, nodePool string, blocked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	before, was := b.pools[nodeClaim]
	if (!was && !blocked) || (was && blocked && before == nodePool) {
		return
	}
	// The NodePools whose count changes.
	counts := map[string]int{}
	if was {
		counts[before] = 0
		delete(b.pools, nodeClaim)
	}
	if blocked {
		counts[nodePool] = 0
		b.pools[nodeClaim] = nodePool
	}
	for _, pool := range b.pools {
		if _, changed := counts[pool]; changed {
			counts[pool]++
		}
	}
	for pool, n := range counts {
		b.gauge.WithLabelValues(pool).Set(float64(n))
	}
}
