package lifecycle

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// waitingDesc is the longest wait of a NodeClaim of a NodePool for a condition.
var waitingDesc = prometheus.NewDesc("tailor_nodeclaims_waiting_seconds",
	"Longest time a live NodeClaim of the NodePool has waited for its node: since launch to register (condition Registered), since registration to initialize (condition Initialized). Absent while none waits.",
	[]string{"nodepool", "condition"}, nil)

// waitingScrapeTimeout bounds reading the cache on a scrape.
const waitingScrapeTimeout = 5 * time.Second

// WaitingCollector reports, when scraped, how long NodeClaims have been waiting to register
// and to initialize, read from the manager's cache: a node that never joins shows as a wait
// that grows until garbage collection's registration timeout.
type WaitingCollector struct {
	kube  client.Reader
	clock clock.PassiveClock
}

var _ prometheus.Collector = &WaitingCollector{}

// NewWaitingCollector returns a collector reading NodeClaims from kube.
func NewWaitingCollector(kube client.Reader, clk clock.PassiveClock) *WaitingCollector {
	return &WaitingCollector{kube: kube, clock: clk}
}

// Describe sends the collector's descriptor.
func (c *WaitingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- waitingDesc }

// Collect sends the longest wait per NodePool and condition.
func (c *WaitingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), waitingScrapeTimeout)
	defer cancel()
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeClaims for metrics")
		return
	}
	for key, wait := range longestWaits(claims.Items, c.clock.Now()) {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, wait.Seconds(), key.nodePool, key.condition)
	}
}

// waitKey is a NodePool and the condition its NodeClaims wait for.
type waitKey struct{ nodePool, condition string }

// longestWaits returns, per NodePool and condition, the longest wait of a live NodeClaim:
// launched and not registered since the launch, registered and not initialized since the
// registration.
func longestWaits(claims []karpv1.NodeClaim, now time.Time) map[waitKey]time.Duration {
	out := map[waitKey]time.Duration{}
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		conds := nc.Status.Conditions
		var since *metav1.Condition
		key := waitKey{nodePool: nc.Labels[karpv1.NodePoolLabelKey]}
		switch {
		case !meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeLaunched):
			continue
		case !meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeRegistered):
			since, key.condition = meta.FindStatusCondition(conds, karpv1.ConditionTypeLaunched), karpv1.ConditionTypeRegistered
		case !meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeInitialized):
			since, key.condition = meta.FindStatusCondition(conds, karpv1.ConditionTypeRegistered), karpv1.ConditionTypeInitialized
		default:
			continue
		}
		out[key] = max(out[key], now.Sub(since.LastTransitionTime.Time))
	}
	return out
}
