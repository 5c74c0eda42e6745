// Package packing decides what capacity to launch for pending pods: which pods go onto
// nodes and NodeClaims that already exist, and which new NodeClaims (NodePool, instance
// types, zones, capacity types) to create for the rest, at the lowest hourly price.
//
// It simulates kube-scheduler: a pod is planned onto a node only when the scheduler's
// Filter plugins will accept it there once the node has registered (resources, node
// affinity, taints, host ports, pod affinity and anti-affinity, topology spread, volume
// zones). It is pure: it reads its input and needs no API server, so the running
// provisioner and `tailor-provisioner simulate` share it.
package packing

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// MaxInstanceTypes caps the instance types a NodeClaim allows, cheapest first: enough
// choice for the fleet to find capacity, few enough to keep launch requests small.
const MaxInstanceTypes = 60

// Input is what one planning round works on.
type Input struct {
	// Pods to place. Pods already bound or planned belong to Nodes instead.
	Pods []*corev1.Pod
	// NodePools to launch from.
	NodePools []NodePool
	// Nodes of the cluster and NodeClaims in flight. All of them count as topology domains;
	// those marked Schedulable may also take pods of this round.
	Nodes []Node
	// DaemonSets whose pods will run on new nodes: their requests are reserved in a new
	// node's capacity and their host ports are taken.
	DaemonSets []*appsv1.DaemonSet
	// Volumes the pods' PersistentVolumeClaims refer to, for volume topology.
	Volumes Volumes
	// MinValuesPolicy is what to do when a NodePool's minValues cannot be met; empty means
	// MinValuesStrict.
	MinValuesPolicy MinValuesPolicy
	// WholePriceRankingOnly plans with offerings ranked by whole node prices alone, without
	// the second ranking by instance prices (see Solve): for callers that use the plan's
	// placements on existing nodes (made before any node is opened) and not its new NodeClaims.
	WholePriceRankingOnly bool
}

// NodePool is a NodePool with what the planner knows about it.
type NodePool struct {
	NodePool *karpv1.NodePool
	// InstanceTypes the NodePool's node class can launch.
	InstanceTypes []*cloudprovider.InstanceType
	// Remaining is how much of each limited resource may still be launched. Resources it does
	// not list are unlimited; nil means the NodePool has no limits.
	Remaining corev1.ResourceList
}

// Node is a node of the cluster, or a NodeClaim whose node has not registered yet.
type Node struct {
	// Node carries the name, labels, taints and allocatable resources. For a NodeClaim not
	// registered yet, it is what the node will be: the NodeClaim's labels and taints (startup
	// taints left out) and allocatable.
	Node *corev1.Node
	// NodeClaim is the NodeClaim the node belongs to, nil for nodes Tailor does not manage.
	NodeClaim *karpv1.NodeClaim
	// Pods bound to the node or planned onto it. They take resources and host ports and
	// count for pod affinity, anti-affinity and topology spread.
	Pods []*corev1.Pod
	// Schedulable nodes may take pods of this round; the others only count as domains.
	Schedulable bool
}

// Volumes are the storage objects pods may refer to.
type Volumes struct {
	Claims         []*corev1.PersistentVolumeClaim
	PersistentVols []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
}

// Plan is the outcome of a planning round.
type Plan struct {
	// NewNodeClaims to create.
	NewNodeClaims []NewNodeClaim
	// Existing placements: pods planned onto nodes and NodeClaims of the input.
	Existing []Placement
	// Unschedulable pods, with the reason.
	Unschedulable []Unschedulable
	// RankedByInstancePrices says the plan ranked offerings by their instances' prices
	// rather than by what their nodes cost, and kept that plan because it costs less by
	// what nodes cost (see Solve).
	RankedByInstancePrices bool
}

// NewNodeClaim is a NodeClaim to create and the pods planned onto it.
type NewNodeClaim struct {
	NodePool *karpv1.NodePool
	Pods     []*corev1.Pod
	// Requests is what the node must hold: the pods' requests (one pod slot each) plus the
	// DaemonSet pods that will run on it.
	Requests corev1.ResourceList
	// InstanceTypes that can take all the pods, cheapest first: the MaxInstanceTypes
	// cheapest, and more when the NodePool's minValues need them.
	InstanceTypes []*cloudprovider.InstanceType
	// Requirements of the NodeClaim: the NodePool's (with their minValues) plus the
	// instance types, zones and capacity types that remain, and any topology value the plan
	// relies on.
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	// MinValuesRelaxed says that, under MinValuesBestEffort, the types that can take the
	// pods fall short of a minValues and Requirements carry the lowered value.
	MinValuesRelaxed bool
	// Cheapest is the offering the plan expects to be launched, and its price.
	Cheapest Choice
}

// Choice is one offering of one instance type.
type Choice struct {
	InstanceType string
	Zone         string
	CapacityType string
	// ReservationID and ReservationType name the capacity reservation of a reserved
	// offering.
	ReservationID, ReservationType string
	// Price is what a node of the offering costs per hour: its instance and the node costs
	// of the offering (volumes, public IPv4, monitoring), the sum of Parts.
	Price float64
	// Parts split Price; the DaemonSets' share is taken out of the instance's.
	Parts cloudprovider.PriceParts
}

// Placement is a set of pods planned onto a node or NodeClaim of the input.
type Placement struct {
	Node *Node
	Pods []*corev1.Pod
}

// Unschedulable is a pod that no node and no NodePool can take, and why.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
}

// Remaining is what a NodePool's limits leave after the capacity already launched from it:
// limits minus each of used, for the resources the limits name. Nil when there are no
// limits.
func Remaining(limits corev1.ResourceList, used []corev1.ResourceList) corev1.ResourceList {
	if len(limits) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range limits {
		out[k] = v.DeepCopy()
	}
	for _, u := range used {
		for k, r := range out {
			if q, ok := u[k]; ok {
				r.Sub(q)
				out[k] = r
			}
		}
	}
	return out
}

// ClaimedCapacity is what a NodeClaim counts against its NodePool's limits: the capacity of
// what was launched, or what it requests before that is known.
func ClaimedCapacity(nc *karpv1.NodeClaim) corev1.ResourceList {
	if len(nc.Status.Capacity) > 0 {
		return nc.Status.Capacity
	}
	return nc.Spec.Resources.Requests
}

// PricePerHour is the expected hourly price of the plan's new NodeClaims.
func (p Plan) PricePerHour() float64 {
	total := 0.0
	for _, nc := range p.NewNodeClaims {
		total += nc.Cheapest.Price
	}
	return total
}

// better reports whether the plan is better than other: it places more pods, or as many
// for less.
func (p Plan) better(other Plan) bool {
	if len(p.Unschedulable) != len(other.Unschedulable) {
		return len(p.Unschedulable) < len(other.Unschedulable)
	}
	return p.PricePerHour() < other.PricePerHour()*(1-1e-9)
}
