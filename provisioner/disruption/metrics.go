package disruption

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
)

var (
	decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "decisions_total",
		Help: "Disruption decisions carried out, by reason (Drifted, Empty, Underutilized) and action (delete, replace).",
	}, []string{"reason", "action"})
	savingsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "savings_dollars_per_hour_total",
		Help: "Hourly price saved by the disruption decisions that save, summed over decisions, by reason (a drifted node's replacement, or a group's replacements launched ahead of the rest of the group, may cost more than the nodes they take away).",
	}, []string{"reason"})
	passesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "passes_total",
		Help: "Disruption passes, by result: decided (a disruption began), idle (nothing to disrupt), busy (a disruption under way), failed.",
	}, []string{"result"})
	budgetBlockedCandidates = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "budget_blocked_candidates",
		Help: "Nodes the last disruption pass would disrupt for a reason (Drifted; Empty; Underutilized: consolidatable with pods) that their NodePool's disruption budgets allow none of now, by NodePool and reason.",
	}, []string{metrics.LabelNodePool, "reason"})
	decideSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "decide_duration_seconds",
		Help:    "Time one pass took to decide the next disruption.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	})
)

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics disruption registers: what init registers, and what the
// metrics reference lists.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{decisionsTotal, savingsTotal, passesTotal, budgetBlockedCandidates, decideSeconds}
}

// reportBudgetBlocked publishes budgetBlocked as tailor_disruption_budget_blocked_candidates.
func reportBudgetBlocked(candidates []Candidate, budget Budget) {
	budgetBlockedCandidates.Reset()
	for key, n := range budgetBlocked(candidates, budget) {
		budgetBlockedCandidates.WithLabelValues(key.nodePool, string(key.reason)).Set(float64(n))
	}
}

// Consolidation types, the consolidation_type label of Karpenter's disruption metrics:
// empty nodes removed, one node or several consolidated at once; drift has none.
const (
	ConsolidationTypeEmpty  = "empty"
	ConsolidationTypeSingle = "single"
	ConsolidationTypeMulti  = "multi"
)

// disruptionReasons are the reasons of voluntary disruption, each with its eligible nodes.
var disruptionReasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonUnderutilized}

// consolidationType is the consolidation_type label of a decision.
func consolidationType(d Decision) string {
	switch {
	case d.Reason == karpv1.DisruptionReasonEmpty:
		return ConsolidationTypeEmpty
	case d.Reason != karpv1.DisruptionReasonUnderutilized:
		return ""
	case len(d.Originals) == 1:
		return ConsolidationTypeSingle
	default:
		return ConsolidationTypeMulti
	}
}

// eligible counts the candidates each reason could disrupt now, before budgets.
func eligible(candidates []Candidate) map[karpv1.DisruptionReason]int {
	out := map[karpv1.DisruptionReason]int{}
	for _, c := range candidates {
		switch {
		case c.Drifted:
			out[karpv1.DisruptionReasonDrifted]++
		case c.MayRemoveEmpty && len(c.Pods) == 0:
			out[karpv1.DisruptionReasonEmpty]++
		case c.MayConsolidate && len(c.Pods) > 0:
			out[karpv1.DisruptionReasonUnderutilized]++
		}
	}
	return out
}

// recordPass sets Karpenter's gauges of one pass: the nodes eligible for each reason and
// what each NodePool's budgets allow now; and observes how long deciding took.
func recordPass(c Cluster, budget Budget, d Decision, decided bool, took time.Duration) {
	counts := eligible(c.Candidates)
	for _, r := range disruptionReasons {
		metrics.KarpenterDisruptionEligibleNodes.WithLabelValues(metrics.SnakeCase(string(r))).Set(float64(counts[r]))
	}
	for _, np := range c.NodePools {
		for _, r := range disruptionReasons {
			metrics.KarpenterAllowedDisruptions.WithLabelValues(np.NodePool.Name, metrics.SnakeCase(string(r))).Set(float64(budget(np.NodePool.Name, r)))
		}
	}
	reason, ctype := "", ""
	if decided {
		reason, ctype = metrics.SnakeCase(string(d.Reason)), consolidationType(d)
	}
	metrics.KarpenterDisruptionEvaluationDuration.WithLabelValues(reason, ctype).Observe(took.Seconds())
	metrics.ObservePlan(metrics.ControllerDisruption, took)
}

// recordDecision counts a decision carried out; action is delete or replace.
func recordDecision(d Decision, action string) {
	decisionsTotal.WithLabelValues(string(d.Reason), action).Inc()
	metrics.KarpenterDisruptionDecisions.WithLabelValues(action, metrics.SnakeCase(string(d.Reason)), consolidationType(d)).Inc()
}
