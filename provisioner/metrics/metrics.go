// Package metrics holds the provisioner's Prometheus metrics, registered on
// controller-runtime's registry and served on the sidecar's metrics endpoint. Every metric
// is listed, with its labels, in docs/reference/metrics.md, which hack/docgen writes from
// the collectors registered here.
package metrics

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const namespace = "tailor"

// Label names.
const (
	LabelNodePool     = "nodepool"
	LabelInstanceType = "instance_type"
	LabelZone         = "zone"
	LabelCapacityType = "capacity_type"
	LabelReason       = "reason"
	LabelResult       = "result"
	LabelResource     = "resource"
	LabelPlugin       = "plugin"
	LabelState        = "state"
)

// States of pods held back by the launch limit.
const (
	HeldBackingOff = "backing_off"
	HeldLimited    = "limit_reached"
)

// Results of planning a pod.
const (
	ResultNewNodeClaim  = "new_nodeclaim"
	ResultExisting      = "existing"
	ResultUnschedulable = "unschedulable"
)

var (
	// PodsQueued counts pods handed over by the scheduler that wait for the next plan.
	PodsQueued = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "provisioner", Name: "pods_queued",
		Help: "Pods handed over by the scheduler that wait for the next plan.",
	})
	// PodBoundSeconds is how long pods Tailor planned waited, from creation to binding.
	PodBoundSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "provisioner", Name: "pod_bound_seconds",
		Help:    "Time from a pod's creation to its binding, for pods Tailor planned capacity for.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600},
	})
	// PodFirstNodeClaimSeconds is how long pods waited for the first NodeClaim planned for
	// them, once per pod.
	PodFirstNodeClaimSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "provisioner", Name: "pod_first_nodeclaim_seconds",
		Help:    "Time from a pod's creation to the first NodeClaim planned for it, new or in flight, observed once per pod when that NodeClaim is written.",
		Buckets: []float64{0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800},
	})
	// PlanSeconds is how long one plan takes, planning alone.
	PlanSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "provisioner", Name: "plan_duration_seconds",
		Help:    "Wall time of planning one batch, without reading the cluster or creating NodeClaims.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
	// PlannedPods counts planned pods by where the plan put them.
	PlannedPods = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "provisioner", Name: "planned_pods_total",
		Help: "Pods planned, by result: onto a new NodeClaim, onto an existing or in-flight one, or unschedulable.",
	}, []string{LabelResult})
	// NodeClaimsCreated counts the NodeClaims plans created.
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodeclaims", Name: "created_total",
		Help: "NodeClaims created by plans.",
	}, []string{LabelNodePool})
	// NodeClaimsReplanned counts the NodeClaims a later batch took back to plan their pods
	// again, with its own, onto cheaper capacity.
	NodeClaimsReplanned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodeclaims", Name: "replanned_total",
		Help: "NodeClaims a later provisioning batch took back, before their node registered, to plan their pods again with its own onto cheaper capacity.",
	}, []string{LabelNodePool})
	// NodeClaimsLaunched counts launched instances by what was launched.
	NodeClaimsLaunched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodeclaims", Name: "launched_total",
		Help: "NodeClaims whose instance was launched, by instance type, zone and capacity type.",
	}, []string{LabelNodePool, LabelInstanceType, LabelZone, LabelCapacityType})
	// NodeClaimsRegistered counts NodeClaims whose node joined the cluster.
	NodeClaimsRegistered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodeclaims", Name: "registered_total",
		Help: "NodeClaims whose node joined the cluster.",
	}, []string{LabelNodePool})
	// NodeClaimsInitialized counts NodeClaims whose node became ready for pods.
	NodeClaimsInitialized = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodeclaims", Name: "initialized_total",
		Help: "NodeClaims whose node became Ready with its startup and ephemeral taints gone.",
	}, []string{LabelNodePool})
	// LaunchErrors counts failed launches by reason.
	LaunchErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodeclaims", Name: "launch_errors_total",
		Help: "Failed launches, by reason: InsufficientCapacity, NodeClassNotReady or LaunchFailed.",
	}, []string{LabelNodePool, LabelReason})
	// NodeClaimsDisrupted counts NodeClaims deleted to replace or remove their node, by reason.
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodeclaims", Name: "disrupted_total",
		Help: "NodeClaims deleted to replace or remove their node, by reason (expired, ...).",
	}, []string{LabelNodePool, LabelReason})
	// NodeRepairs counts nodes replaced by node repair, by NodePool and the condition that
	// stayed unhealthy past its toleration (Ready=False, AcceleratedHardwareReady=False, ...).
	NodeRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodes", Name: "repaired_total",
		Help: "Nodes replaced because a condition stayed unhealthy past its toleration, by NodePool and condition (Type=Status).",
	}, []string{LabelNodePool, "condition"})
	// PlannedCapacityRejections counts pods the scheduler rejected on the node planned for
	// them, by the filter plugin that rejected them.
	PlannedCapacityRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "provisioner", Name: "planned_capacity_rejections_total",
		Help: "Pods the scheduler rejected on the node planned for them, by the filter plugin that rejected them.",
	}, []string{LabelPlugin})
	// PodsHeldBack counts the pods the launch limit holds back, by state: backing off before
	// they are planned again, or at their limit until they change.
	PodsHeldBack = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "provisioner", Name: "pods_held_back",
		Help: "Pods the scheduler rejected on capacity planned for them that get no new capacity for now, by state: backing_off (planned again once their wait has passed) or limit_reached (nothing more is launched for them until they, their NodePools or their claims change).",
	}, []string{LabelState})
	// GRPC measures the gRPC API the scheduler plugin calls: requests, codes, latency.
	GRPC = grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0005, 2, 14)),
	))
)

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics this package registers, under Tailor's names and Karpenter's:
// what init registers, and what the metrics reference lists.
func Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{
		PodsQueued, PodBoundSeconds, PodFirstNodeClaimSeconds, PlanSeconds, PlannedPods,
		NodeClaimsCreated, NodeClaimsReplanned, NodeClaimsLaunched, NodeClaimsRegistered, NodeClaimsInitialized, LaunchErrors, NodeClaimsDisrupted, NodeRepairs,
		PlannedCapacityRejections, PodsHeldBack, GRPC,
	}, karpenterCollectors()...)
}
