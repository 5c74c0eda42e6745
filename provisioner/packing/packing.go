package packing

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// Solve plans the pods of in.
func Solve(in Input) Plan {
	s := newSolver(in)
	pods := slices.Clone(in.Pods)
	// Largest first, so small pods fill the gaps big ones leave.
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		ra, rb := s.requests(a), s.requests(b)
		if c := cmp.Compare(rb[corev1.ResourceCPU], ra[corev1.ResourceCPU]); c != 0 {
			return c
		}
		return cmp.Compare(rb[corev1.ResourceMemory], ra[corev1.ResourceMemory])
	})
	var plan Plan
	unplaced := map[*corev1.Pod]string{}
	for _, pod := range pods {
		if s.placeInFlight(pod) || s.placeInBin(pod) {
			continue
		}
		unplaced[pod] = s.explainUnplaceable(pod)
	}
	for _, f := range s.inFlight {
		if len(f.added) > 0 {
			plan.Existing = append(plan.Existing, Placement{Node: f.source, Pods: f.added})
		}
	}
	for _, b := range s.bins {
		claim, ok := b.finalize()
		if !ok {
			for _, pod := range b.pods {
				unplaced[pod] = fmt.Sprintf("NodePool %q: its limits leave no room for a node that fits this pod", b.pool.nodePool.Name)
			}
			continue
		}
		plan.NewNodeClaims = append(plan.NewNodeClaims, claim)
	}
	for _, pod := range in.Pods {
		if reason, ok := unplaced[pod]; ok {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: pod, Reason: reason})
		}
	}
	return plan
}

type solver struct {
	pools     []*pool
	inFlight  []*inFlight
	bins      []*bin
	podAmount map[*corev1.Pod]amounts
}

// offer is an offering of an instance type in a NodePool, with the labels a node launched
// from it would have.
type offer struct {
	// index is the offer's position in its pool's offers.
	index       int
	it          *cloudprovider.InstanceType
	offering    cloudprovider.Offering
	labels      map[string]string
	allocatable amounts
	capacity    amounts
}

type pool struct {
	nodePool  *karpv1.NodePool
	offers    []*offer
	remaining amounts // nil: unlimited
	// compatible caches, per scheduling-constraint group, which offers the group's pods
	// may run on.
	compatible map[string][]bool
}

type inFlight struct {
	source    *Node
	node      *corev1.Node
	available amounts
	added     []*corev1.Pod
}

type bin struct {
	pool       *pool
	pods       []*corev1.Pod
	requests   amounts
	candidates []*offer
}

func newSolver(in Input) *solver {
	s := &solver{podAmount: map[*corev1.Pod]amounts{}}
	pools := slices.Clone(in.NodePools)
	slices.SortStableFunc(pools, func(a, b NodePool) int {
		if c := cmp.Compare(weight(b.NodePool), weight(a.NodePool)); c != 0 {
			return c
		}
		return cmp.Compare(a.NodePool.Name, b.NodePool.Name)
	})
	for _, np := range pools {
		s.pools = append(s.pools, newPool(np))
	}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if !n.Schedulable {
			continue
		}
		used := amounts{}
		for _, p := range n.Pods {
			used = used.plus(podAmounts(p))
		}
		s.inFlight = append(s.inFlight, &inFlight{
			source:    n,
			node:      n.Node,
			available: subtract(toAmounts(n.Node.Status.Allocatable), used),
		})
	}
	return s
}

func weight(np *karpv1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func newPool(np NodePool) *pool {
	p := &pool{nodePool: np.NodePool, compatible: map[string][]bool{}}
	if np.Remaining != nil {
		p.remaining = toAmounts(np.Remaining)
	}
	tmpl := np.NodePool.Spec.Template
	base := map[string]string{}
	for k, v := range requirements.SingleValueLabels(tmpl.Spec.Requirements) {
		base[k] = v
	}
	for k, v := range tmpl.ObjectMeta.Labels {
		base[k] = v
	}
	base[karpv1.NodePoolLabelKey] = np.NodePool.Name
	for _, it := range np.InstanceTypes {
		alloc, capacity := toAmounts(it.Allocatable()), toAmounts(it.Capacity)
		for _, o := range it.Offerings {
			if !o.Available {
				continue
			}
			labels := make(map[string]string, len(base)+len(it.Labels)+2)
			for k, v := range base {
				labels[k] = v
			}
			for k, v := range it.Labels {
				labels[k] = v
			}
			labels[corev1.LabelTopologyZone] = o.Zone
			labels[karpv1.CapacityTypeLabelKey] = o.CapacityType
			if !requirements.Matches(tmpl.Spec.Requirements, labels) {
				continue
			}
			p.offers = append(p.offers, &offer{index: len(p.offers), it: it, offering: o, labels: labels, allocatable: alloc, capacity: capacity})
		}
	}
	return p
}

func (s *solver) requests(pod *corev1.Pod) amounts {
	a, ok := s.podAmount[pod]
	if !ok {
		a = podAmounts(pod)
		s.podAmount[pod] = a
	}
	return a
}

// placeInFlight puts the pod on the first in-flight NodeClaim it fits.
func (s *solver) placeInFlight(pod *corev1.Pod) bool {
	need := s.requests(pod)
	for _, f := range s.inFlight {
		if !need.fitsIn(f.available) || !tolerates(pod, f.node.Spec.Taints) || !matchesNode(pod, f.node) {
			continue
		}
		f.available = subtract(f.available, need)
		f.added = append(f.added, pod)
		return true
	}
	return false
}

// placeInBin puts the pod on a NodeClaim planned in this round, or opens one, in the
// highest-weight NodePool that can take it. It reports false when no NodePool can.
func (s *solver) placeInBin(pod *corev1.Pod) bool {
	need := s.requests(pod)
	for _, p := range s.pools {
		compatible := s.compatibleOffers(p, pod)
		if compatible == nil {
			continue
		}
		if !anyFitting(p.offers, compatible, need) {
			continue
		}
		for _, b := range s.bins {
			if b.pool == p && b.tryAdd(pod, need, compatible) {
				return true
			}
		}
		s.bins = append(s.bins, newBin(p, pod, need, compatible))
		return true
	}
	return false
}

// compatibleOffers returns which of the pool's offers the pod may run on by taints, node
// selector and required node affinity, or nil when the pod tolerates none of them.
func (s *solver) compatibleOffers(p *pool, pod *corev1.Pod) []bool {
	if !tolerates(pod, p.nodePool.Spec.Template.Spec.Taints) {
		return nil
	}
	key := constraintKey(pod)
	if c, ok := p.compatible[key]; ok {
		return c
	}
	c := make([]bool, len(p.offers))
	any := false
	affinity := requiredAffinity(pod)
	for i, o := range p.offers {
		if ok, _ := affinity.Match(nodeWith(o.labels, nil)); ok {
			c[i], any = true, true
		}
	}
	if !any {
		c = nil
	}
	p.compatible[key] = c
	return c
}

// explainUnplaceable says, per NodePool, why none can take the pod.
func (s *solver) explainUnplaceable(pod *corev1.Pod) string {
	if len(s.pools) == 0 {
		return "no NodePool is available to this pod's scheduler profile"
	}
	need := s.requests(pod)
	reasons := make([]string, 0, len(s.pools))
	for _, p := range s.pools {
		reasons = append(reasons, fmt.Sprintf("NodePool %q: %s", p.nodePool.Name, explain(p, pod, need)))
	}
	return strings.Join(reasons, "; ")
}

func newBin(p *pool, pod *corev1.Pod, need amounts, compatible []bool) *bin {
	b := &bin{pool: p, requests: need}
	for i, o := range p.offers {
		if compatible[i] && need.fitsIn(o.allocatable) {
			b.candidates = append(b.candidates, o)
		}
	}
	b.pods = append(b.pods, pod)
	return b
}

// tryAdd adds the pod when some candidate still fits everything in the bin.
func (b *bin) tryAdd(pod *corev1.Pod, need amounts, compatible []bool) bool {
	total := b.requests.plus(need)
	var kept []*offer
	for _, o := range b.candidates {
		if compatible[o.index] && total.fitsIn(o.allocatable) {
			kept = append(kept, o)
		}
	}
	if len(kept) == 0 {
		return false
	}
	b.candidates, b.requests = kept, total
	b.pods = append(b.pods, pod)
	return true
}

// finalize turns the bin into a NodeClaim, keeping only instance types the NodePool's
// limits still allow. It reports false when none is left.
func (b *bin) finalize() (NewNodeClaim, bool) {
	kept := b.candidates
	if b.pool.remaining != nil {
		kept = nil
		for _, o := range b.candidates {
			if withinLimits(o.capacity, b.pool.remaining) {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			return NewNodeClaim{}, false
		}
	}
	// One entry per instance type, at its cheapest remaining offering, cheapest first.
	best := map[string]*offer{}
	for _, o := range kept {
		if cur, ok := best[o.it.Name]; !ok || o.offering.Price < cur.offering.Price {
			best[o.it.Name] = o
		}
	}
	types := make([]*offer, 0, len(best))
	for _, o := range best {
		types = append(types, o)
	}
	sort.Slice(types, func(i, j int) bool {
		if types[i].offering.Price != types[j].offering.Price {
			return types[i].offering.Price < types[j].offering.Price
		}
		return types[i].it.Name < types[j].it.Name
	})
	if len(types) > MaxInstanceTypes {
		types = types[:MaxInstanceTypes]
	}
	allowed := map[string]bool{}
	claim := NewNodeClaim{NodePool: b.pool.nodePool, Pods: b.pods, Requests: b.requests.resourceList()}
	zones, capacityTypes := map[string]bool{}, map[string]bool{}
	for _, o := range types {
		claim.InstanceTypes = append(claim.InstanceTypes, o.it)
		allowed[o.it.Name] = true
	}
	for _, o := range kept {
		if allowed[o.it.Name] {
			zones[o.offering.Zone] = true
			capacityTypes[o.offering.CapacityType] = true
		}
	}
	if b.pool.remaining != nil {
		var largest amounts
		for _, o := range types {
			largest = maxAmounts(largest, o.capacity)
		}
		b.pool.remaining = subtract(b.pool.remaining, largest)
	}
	c := types[0]
	claim.Cheapest = Choice{InstanceType: c.it.Name, Zone: c.offering.Zone, CapacityType: c.offering.CapacityType, Price: c.offering.Price}
	claim.Requirements = append(slices.Clone(b.pool.nodePool.Spec.Template.Spec.Requirements),
		inRequirement(corev1.LabelInstanceTypeStable, allowed),
		inRequirement(corev1.LabelTopologyZone, zones),
		inRequirement(karpv1.CapacityTypeLabelKey, capacityTypes),
	)
	return claim, true
}

func inRequirement(key string, values map[string]bool) karpv1.NodeSelectorRequirementWithMinValues {
	list := make([]string, 0, len(values))
	for v := range values {
		list = append(list, v)
	}
	sort.Strings(list)
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: list}
}

func anyFitting(offers []*offer, compatible []bool, need amounts) bool {
	for i, o := range offers {
		if compatible[i] && need.fitsIn(o.allocatable) {
			return true
		}
	}
	return false
}

func withinLimits(capacity, remaining amounts) bool {
	for k, limit := range remaining {
		if capacity[k] > limit {
			return false
		}
	}
	return true
}

func subtract(a, b amounts) amounts {
	out := make(amounts, len(a))
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

func maxAmounts(a, b amounts) amounts {
	out := make(amounts, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if v > out[k] {
			out[k] = v
		}
	}
	return out
}
