package surge

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Event reasons, on the pod replaced and on the NodeClaim whose node it leaves.
const (
	// ReasonReplacing: a copy of the pod starts before it is evicted; the message says
	// where and until when it may take to be Ready.
	ReasonReplacing = "ReplacingBeforeEviction"
	// ReasonReplaced: the copy is Ready and the ReplicaSet takes the old pod away.
	ReasonReplaced = "ReplacedBeforeEviction"
	// ReasonReplacementAbandoned: the copy was not Ready in time, or its decision was
	// lost; the copy is deleted and the pod stays.
	ReasonReplacementAbandoned = "ReplacementAbandoned"
	// ReasonNoReplacement: an opted-in pod that needed a copy cannot have one (a
	// StatefulSet's or a bare pod, a Deployment with maxSurge 0, ...): it keeps today's
	// rules, and the message says why.
	ReasonNoReplacement = "NoReplacementBeforeEviction"
)

// Results, the result label of tailor_replace_before_evict_total.
const (
	ResultDone      = "done"
	ResultAbandoned = "abandoned"
	ResultFallback  = "fallback"
)

var (
	replacementsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tailor", Name: "replace_before_evict_total",
		Help: "Opted-in pods (tailor.sh/replace-before-evict) whose eviction needed a copy started first, by result: done (the copy was Ready and took the pod's place), abandoned (the copy was not Ready in time, or its decision was lost: the copy is deleted and the node kept), fallback (no copy could be made: a StatefulSet's or a bare pod, maxSurge 0; the pod keeps the usual rules).",
	}, []string{"result"})
	inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "tailor", Name: "replace_before_evict_in_flight",
		Help: "Copies started ahead of an eviction and not yet Ready.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics surge registers: what init registers, and what the metrics
// reference lists.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{replacementsTotal, inFlight}
}

// Count records a replacement's result.
func Count(result string) { replacementsTotal.WithLabelValues(result).Inc() }

// SetInFlight publishes how many copies are under way.
func SetInFlight(n int) { inFlight.Set(float64(n)) }
