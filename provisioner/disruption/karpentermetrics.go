package disruption

import (
	"time"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
)

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
