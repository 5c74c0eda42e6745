package disruption

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Candidate is a node voluntary disruption may take away.
type Candidate struct {
	// Node is the node name; NodeClaim and NodePool name what it belongs to.
	Node, NodeClaim, NodePool string
	// Price is its offering's hourly price; CapacityType is spot or on-demand.
	Price        float64
	CapacityType string
	// Pods must move elsewhere when the node goes: the node's pods but DaemonSet, mirror
	// and finished ones.
	Pods []*corev1.Pod
	// Drifted is set when the node no longer matches its NodePool or node class.
	Drifted bool
	// MayRemoveEmpty and MayConsolidate say what the NodePool's consolidation policy and
	// consolidateAfter allow now: removing the node once empty (WhenEmpty and
	// WhenEmptyOrUnderutilized), and consolidating it while pods run on it
	// (WhenEmptyOrUnderutilized).
	MayRemoveEmpty, MayConsolidate bool
	// Planned marks a node a consolidation under way takes away in a later pass: pods that
	// move keep off it.
	Planned bool
}

// Cluster is what a decision is made on.
type Cluster struct {
	// Nodes are every node and NodeClaim, candidates included, each with all its pods;
	// those Schedulable may take the pods of nodes taken away.
	Nodes []packing.Node
	// NodePools may launch replacements, whose capacity the DaemonSets share.
	NodePools  []packing.NodePool
	DaemonSets []*appsv1.DaemonSet
	Volumes    packing.Volumes
	// MinValuesPolicy is the planner's for replacements (packing.Input.MinValuesPolicy).
	MinValuesPolicy packing.MinValuesPolicy
	// Candidates in no particular order.
	Candidates []Candidate

	// pins are what the candidates' pods must keep of their zones when they move (see
	// zonePins); zoneOf is every node's zone.
	pins   map[types.NamespacedName]zonePin
	zoneOf map[string]string
	// whatIfs plans the pods of nodes taken away, for one decision; spare, on machines
	// with two CPUs or more, plans others at the same time.
	whatIfs, spare *whatIfs
	// pace, when set, bounds the pass's planning time.
	pace *pacer
}

// Decision is one disruption to carry out.
type Decision struct {
	Reason karpv1.DisruptionReason
	// Originals are the nodes to take away; Replacements are launched (and initialized)
	// first.
	Originals    []Candidate
	Replacements []packing.NewNodeClaim
	// Placements are where the plan expects the originals' pods on remaining nodes.
	Placements []packing.Placement
	// Savings is the hourly price saved: the originals' less the replacements'.
	Savings float64
	// Rest are the nodes the consolidation plan takes away in later passes.
	Rest []string

	// from is the course the decision follows, if any; replacing are the indices, in its
	// plan, of the replacements the decision launches (see Planner.Launched).
	from      *course
	replacing []int
}

// Options tune decisions.
type Options struct {
	// SpotToSpotSavings is the least fraction of price a spot replacement of spot nodes
	// must save, so that consolidation does not churn spot capacity for pennies.
	SpotToSpotSavings float64
	// NoSpotToSpot refuses every spot replacement of spot nodes (Karpenter's
	// SpotToSpotConsolidation feature gate off).
	NoSpotToSpot bool
	// MinSavingsPerPod is the least hourly saving per pod a consolidation evicts: one that
	// saves less for the pods it moves is not made. Zero takes any saving. Empty nodes and
	// drift are not weighed by it.
	MinSavingsPerPod float64
	// MaxMultiNode caps the nodes one consolidation takes away together.
	MaxMultiNode int
	// MaxCandidates caps the nodes a consolidation plan considers, those spending the most
	// on room no pod uses first.
	MaxCandidates int
	// PassTime bounds how long one pass of a Planner plans consolidation; a plan that
	// takes longer is carried on in the next passes. Zero plans to the end. A pass takes a
	// little longer: it prepares the cluster, and its last step may take longer than the
	// one before, by which it judged that the step would end in time.
	PassTime time.Duration
}

// DefaultOptions are the defaults of the sidecar's flags: passes of at most about a second.
var DefaultOptions = Options{SpotToSpotSavings: 0.2, MaxMultiNode: 100, MaxCandidates: 2000, PassTime: 800 * time.Millisecond}

// Budget says how many more nodes of a NodePool may be disrupted for a reason.
type Budget func(nodePool string, reason karpv1.DisruptionReason) int

// Decide returns the next disruption: a drifted node replaced, empty nodes deleted, or an
// underutilized set of nodes consolidated, in that order; false when there is none. It
// plans consolidation to the end, however long that takes (Planner plans a pass at a time).
func Decide(c Cluster, budget Budget, opts Options) (Decision, bool) {
	opts.PassTime = 0
	var p Planner
	return p.Decide(c, budget, opts)
}

// Decide returns the next disruption as the package's Decide does, but plans consolidation
// for opts.PassTime at most: when that is up before the plan is made, it returns false
// and Planning reports true, and the next call carries on.
func (p *Planner) Decide(c Cluster, budget Budget, opts Options) (Decision, bool) {
	if opts.PassTime > 0 {
		c.pace = &pacer{deadline: time.Now().Add(opts.PassTime)}
	}
	c.whatIfs = newWhatIfs()
	if d, ok := drift(c, budget); ok {
		return d, true
	}
	if d, ok := empty(c, budget); ok {
		return d, true
	}
	return p.consolidation(c, budget, opts)
}

// savingsEpsilon is the least saving that counts: below it prices only differ by rounding.
const savingsEpsilon = 1e-9

func price(ncs []packing.NewNodeClaim) float64 {
	total := 0.0
	for _, nc := range ncs {
		total += nc.Cheapest.Price
	}
	return total
}

// priceOf is what the nodes cost together per hour.
func priceOf(cands []Candidate) float64 {
	total := 0.0
	for _, cand := range cands {
		total += cand.Price
	}
	return total
}
