package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// Karpenter's metrics, under Karpenter's names, labels and units, so that the dashboards
// and alerts a Karpenter fleet already has read Tailor the same way. Each is fed where
// Tailor's own metric of the same event is, and docs/tasks/migrate-from-karpenter.md maps one
// onto the other.

const karpenterNamespace = "karpenter"

// Label names of Karpenter's metrics.
const (
	LabelMinValuesRelaxed    = "min_values_relaxed"
	LabelConsolidationPolicy = "consolidation_policy"
	LabelTerminationMode     = "termination_mode"
	LabelController          = "controller"
	LabelMethod              = "method"
	LabelProvider            = "provider"
	LabelError               = "error"
	LabelDecision            = "decision"
	LabelConsolidationType   = "consolidation_type"
	LabelMessageType         = "message_type"
	LabelActionable          = "actionable"
)

// Values of the reason label of karpenter_nodeclaims_created_total and
// karpenter_nodeclaims_disrupted_total that are not disruption reasons.
const (
	ReasonProvisioned          = "provisioned"
	ReasonExpired              = "expired"
	ReasonInsufficientCapacity = "insufficient_capacity"
	ReasonNodeClassNotReady    = "nodeclass_not_ready"
)

// Values of the termination_mode label.
const (
	TerminationModeGraceful = "graceful"
	TerminationModeEventual = "eventual"
	TerminationModeForceful = "forceful"
)

// Values of the controller label of the scheduling and cloud provider metrics.
const (
	ControllerProvisioner = "provisioner"
	ControllerDisruption  = "disruption"
)

// durationBuckets are Karpenter's buckets for durations, from 5 ms to 10 minutes.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1,
	1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}

// summaryObjectives are the quantiles of Karpenter's summaries.
var summaryObjectives = map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}

func karpenterCounter(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: karpenterNamespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func karpenterGauge(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: karpenterNamespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func karpenterHistogram(subsystem, name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: karpenterNamespace, Subsystem: subsystem, Name: name, Help: help, Buckets: durationBuckets,
	}, labels)
}

func karpenterSummary(subsystem, name, help string, labels ...string) *prometheus.SummaryVec {
	return prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Namespace: karpenterNamespace, Subsystem: subsystem, Name: name, Help: help, Objectives: summaryObjectives,
	}, labels)
}

var (
	// KarpenterNodeClaimsCreated is karpenter_nodeclaims_created_total.
	KarpenterNodeClaimsCreated = karpenterCounter("nodeclaims", "created_total",
		"Number of nodeclaims created in total, by the reason it was created (provisioned, or the disruption reason of a replacement), the owning nodepool, and whether minValues was relaxed for it.",
		LabelReason, LabelNodePool, LabelMinValuesRelaxed)
	// KarpenterNodeClaimsTerminated is karpenter_nodeclaims_terminated_total.
	KarpenterNodeClaimsTerminated = karpenterCounter("nodeclaims", "terminated_total",
		"Number of nodeclaims terminated in total, by the owning nodepool, capacity type and zone.",
		LabelNodePool, LabelCapacityType, LabelZone)
	// KarpenterNodeClaimsDisrupted is karpenter_nodeclaims_disrupted_total.
	KarpenterNodeClaimsDisrupted = karpenterCounter("nodeclaims", "disrupted_total",
		"Number of nodeclaims disrupted in total, by the reason, the owning nodepool, the capacity type, the consolidation policy (consolidation only) and the termination mode.",
		LabelReason, LabelNodePool, LabelCapacityType, LabelConsolidationPolicy, LabelTerminationMode)
	// KarpenterNodesCreated is karpenter_nodes_created_total.
	KarpenterNodesCreated = karpenterCounter("nodes", "created_total",
		"Number of nodes created in total, by the owning nodepool and zone.", LabelNodePool, LabelZone)
	// KarpenterNodesTerminated is karpenter_nodes_terminated_total.
	KarpenterNodesTerminated = karpenterCounter("nodes", "terminated_total",
		"Number of nodes terminated in total, by the owning nodepool and zone.", LabelNodePool, LabelZone)
	// KarpenterNodesTerminationDuration is karpenter_nodes_termination_duration_seconds.
	KarpenterNodesTerminationDuration = karpenterSummary("nodes", "termination_duration_seconds",
		"The time taken between a node's deletion request and the removal of its finalizer, by the owning nodepool.", LabelNodePool)
	// KarpenterNodesDrained is karpenter_nodes_drained_total.
	KarpenterNodesDrained = karpenterCounter("nodes", "drained_total",
		"The total number of nodes drained, by the owning nodepool.", LabelNodePool)
	// KarpenterPodsStartupDuration is karpenter_pods_startup_duration_seconds.
	KarpenterPodsStartupDuration = karpenterSummary("pods", "startup_duration_seconds",
		"The time from pod creation until the pod is running.")
	// KarpenterPodsBoundDuration is karpenter_pods_bound_duration_seconds.
	KarpenterPodsBoundDuration = karpenterHistogram("pods", "bound_duration_seconds",
		"The time from pod creation until the pod is bound.")
	// KarpenterSchedulingDuration is karpenter_scheduler_scheduling_duration_seconds.
	KarpenterSchedulingDuration = karpenterHistogram("scheduler", "scheduling_duration_seconds",
		"Duration of scheduling simulations used for deprovisioning and provisioning in seconds, by controller.", LabelController)
	// KarpenterSchedulerQueueDepth is karpenter_scheduler_queue_depth.
	KarpenterSchedulerQueueDepth = karpenterGauge("scheduler", "queue_depth",
		"The number of pods currently waiting to be scheduled, by controller.", LabelController)
	// KarpenterCloudProviderDuration is karpenter_cloudprovider_duration_seconds.
	KarpenterCloudProviderDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: karpenterNamespace, Subsystem: "cloudprovider", Name: "duration_seconds",
		Help: "Duration of cloud provider method calls, by the controller, method name and provider.",
	}, []string{LabelController, LabelMethod, LabelProvider})
	// KarpenterCloudProviderErrors is karpenter_cloudprovider_errors_total.
	KarpenterCloudProviderErrors = karpenterCounter("cloudprovider", "errors_total",
		"Total number of errors returned from CloudProvider calls, by controller, method, provider and error type.",
		LabelController, LabelMethod, LabelProvider, LabelError)
	// KarpenterDisruptionDecisions is karpenter_voluntary_disruption_decisions_total.
	KarpenterDisruptionDecisions = karpenterCounter("voluntary_disruption", "decisions_total",
		"Number of disruption decisions performed, by decision (delete, replace), reason and consolidation type.",
		LabelDecision, LabelReason, LabelConsolidationType)
	// KarpenterDisruptionEligibleNodes is karpenter_voluntary_disruption_eligible_nodes.
	KarpenterDisruptionEligibleNodes = karpenterGauge("voluntary_disruption", "eligible_nodes",
		"Number of nodes eligible for disruption, by disruption reason.", LabelReason)
	// KarpenterDisruptionEvaluationDuration is
	// karpenter_voluntary_disruption_decision_evaluation_duration_seconds.
	KarpenterDisruptionEvaluationDuration = karpenterHistogram("voluntary_disruption", "decision_evaluation_duration_seconds",
		"Duration of the disruption decision evaluation process in seconds, by reason and consolidation type.",
		LabelReason, LabelConsolidationType)
	// KarpenterAllowedDisruptions is karpenter_nodepools_allowed_disruptions.
	KarpenterAllowedDisruptions = karpenterGauge("nodepools", "allowed_disruptions",
		"The number of nodes of a NodePool that can be disrupting at once now, by nodepool and reason.", LabelNodePool, LabelReason)
	// KarpenterInterruptionReceived is karpenter_interruption_received_messages_total.
	KarpenterInterruptionReceived = karpenterCounter("interruption", "received_messages_total",
		"Count of messages received from the SQS queue, by message type and whether the message was actionable.",
		LabelMessageType, LabelActionable)
	// KarpenterInterruptionDeleted is karpenter_interruption_deleted_messages_total.
	KarpenterInterruptionDeleted = karpenterCounter("interruption", "deleted_messages_total",
		"Count of messages deleted from the SQS queue, by message type.", LabelMessageType)
	// KarpenterInterruptionQueueDuration is karpenter_interruption_message_queue_duration_seconds.
	KarpenterInterruptionQueueDuration = karpenterHistogram("interruption", "message_queue_duration_seconds",
		"Amount of time an interruption message is on the queue before it is processed, by message type.", LabelMessageType)
)

// karpenterCollectors are the metrics under Karpenter's names (see Collectors).
func karpenterCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		KarpenterNodeClaimsCreated, KarpenterNodeClaimsTerminated, KarpenterNodeClaimsDisrupted,
		KarpenterNodesCreated, KarpenterNodesTerminated, KarpenterNodesTerminationDuration, KarpenterNodesDrained,
		KarpenterPodsStartupDuration, KarpenterPodsBoundDuration,
		KarpenterSchedulingDuration, KarpenterSchedulerQueueDepth,
		KarpenterCloudProviderDuration, KarpenterCloudProviderErrors,
		KarpenterDisruptionDecisions, KarpenterDisruptionEligibleNodes, KarpenterDisruptionEvaluationDuration, KarpenterAllowedDisruptions,
		KarpenterInterruptionReceived, KarpenterInterruptionDeleted, KarpenterInterruptionQueueDuration,
	}
}

// NodeClaimCreated counts a NodeClaim just created, under Tailor's and Karpenter's names;
// reason is ReasonProvisioned or the disruption reason of the node it replaces.
func NodeClaimCreated(nc *karpv1.NodeClaim, reason string) {
	pool := nc.Labels[karpv1.NodePoolLabelKey]
	NodeClaimsCreated.WithLabelValues(pool).Inc()
	relaxed := nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]
	if relaxed == "" {
		relaxed = "false"
	}
	KarpenterNodeClaimsCreated.WithLabelValues(SnakeCase(reason), pool, relaxed).Inc()
}

// NodeClaimDisrupted counts a NodeClaim deleted to replace or remove its node, under
// Tailor's name (reason as Tailor spells it) and Karpenter's (reason in snake case, with
// the consolidation policy for consolidation and the termination mode).
func NodeClaimDisrupted(nc *karpv1.NodeClaim, reason string, consolidationPolicy karpv1.ConsolidationPolicy) {
	NodeClaimsDisrupted.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], reason).Inc()
	KarpenterNodeClaimDisrupted(nc, reason, consolidationPolicy)
}

// KarpenterNodeClaimDisrupted counts a NodeClaim deleted under Karpenter's name only: for
// the deletions Karpenter counts as disruptions and Tailor does not, such as a NodeClaim
// given up for want of capacity.
func KarpenterNodeClaimDisrupted(nc *karpv1.NodeClaim, reason string, consolidationPolicy karpv1.ConsolidationPolicy) {
	KarpenterNodeClaimsDisrupted.WithLabelValues(SnakeCase(reason), nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey],
		SnakeCase(string(consolidationPolicy)), TerminationMode(nc)).Inc()
}

// SetPodsQueued sets the number of pods that wait for the next plan, under Tailor's and
// Karpenter's names.
func SetPodsQueued(n int) {
	PodsQueued.Set(float64(n))
	KarpenterSchedulerQueueDepth.WithLabelValues(ControllerProvisioner).Set(float64(n))
}

// ObservePlan records how long a plan of controller took: Tailor's plan duration for the
// provisioner, and Karpenter's scheduling duration for both.
func ObservePlan(controller string, d time.Duration) {
	if controller == ControllerProvisioner {
		PlanSeconds.Observe(d.Seconds())
	}
	KarpenterSchedulingDuration.WithLabelValues(controller).Observe(d.Seconds())
}

// TerminationMode is how a NodeClaim's node is drained when it is disrupted: graceful
// without a terminationGracePeriod, forceful with a zero one, eventual otherwise.
func TerminationMode(nc *karpv1.NodeClaim) string {
	switch g := nc.Spec.TerminationGracePeriod; {
	case g == nil:
		return TerminationModeGraceful
	case g.Duration <= 0:
		return TerminationModeForceful
	default:
		return TerminationModeEventual
	}
}

// SnakeCase spells a CamelCase name as Karpenter's label values do: "Underutilized" is
// "underutilized", "WhenEmptyOrUnderutilized" is "when_empty_or_underutilized".
func SnakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 && s[i-1] != '_' {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
