package packing

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// plan turns the solver's nodes into the plan's placements and NodeClaims.
func (s *solver) plan() Plan {
	var plan Plan
	// In the nodes' order.
	touched := slices.Clone(s.touched)
	slices.SortFunc(touched, func(a, b *node) int { return cmp.Compare(a.id, b.id) })
	for _, n := range touched {
		if pods := n.pods(); len(pods) > 0 {
			plan.Existing = append(plan.Existing, Placement{Node: n.input, Pods: pods})
		}
	}
	for _, n := range s.planned {
		if s.priceOnly {
			plan.NewNodeClaims = append(plan.NewNodeClaims, s.priced(n))
			continue
		}
		plan.NewNodeClaims = append(plan.NewNodeClaims, s.finalize(n))
	}
	for _, pod := range s.pods {
		if reason, ok := s.unplaced[pod]; ok {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: pod, Reason: reason})
		}
	}
	return plan
}

func (n *node) pods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range n.placed {
		out = append(out, p.g.pods[p.start:p.start+p.k]...)
	}
	return out
}

// finalize widens a planned node to every offering that can take its pods, so the launch
// can fall back when the chosen one has no capacity: same NodePool, compatible with each
// of its pods, the same value for every label its pods rely on, room for the pods and the
// DaemonSets, and within the NodePool's limits.
func (s *solver) finalize(n *node) NewNodeClaim {
	p := n.pool
	used := n.offer.alloc.minus(n.free)
	pinned := n.pinnedValues()
	valid := s.validOffer(n)
	// Offers by price: the first valid offer of a type is its cheapest, and the first
	// MaxInstanceTypes types found are the cheapest types.
	var types []*offer
	taken := map[*typeInfo]bool{}
	for _, o := range p.byPrice() {
		if taken[o.typ] || !valid(o) {
			continue
		}
		taken[o.typ] = true
		types = append(types, o)
		if len(types) == MaxInstanceTypes {
			break
		}
	}
	var reached map[string]int
	if len(p.minValues) > 0 {
		types, reached = widen(p, types, valid)
	}
	var kept []*offer
	for _, t := range types {
		for _, o := range t.typ.offers {
			if valid(o) {
				kept = append(kept, o)
			}
		}
	}
	allowed := map[string]bool{}
	claim := NewNodeClaim{NodePool: p.nodePool, Pods: n.pods()}
	for _, o := range types {
		claim.InstanceTypes = append(claim.InstanceTypes, o.typ.it)
		allowed[o.typ.it.Name] = true
	}
	zones, capacityTypes := map[string]bool{}, map[string]bool{}
	for _, o := range kept {
		if allowed[o.typ.it.Name] {
			zones[o.offering.Zone] = true
			capacityTypes[o.offering.CapacityType] = true
		}
	}
	cheapest := types[0]
	claim.Cheapest = cheapest.choice()
	claim.Requests = s.dims.list(used.plus(cheapest.ds))
	claim.Requirements = append(slices.Clone(p.nodePool.Spec.Template.Spec.Requirements),
		inRequirement(corev1.LabelInstanceTypeStable, allowed),
		inRequirement(corev1.LabelTopologyZone, zones),
		inRequirement(karpv1.CapacityTypeLabelKey, capacityTypes),
	)
	if len(reached) > 0 {
		relaxRequirements(claim.Requirements, reached)
		claim.MinValuesRelaxed = true
	}
	for _, pin := range pinned {
		switch pin.key {
		case corev1.LabelTopologyZone, karpv1.CapacityTypeLabelKey, corev1.LabelInstanceTypeStable:
			continue
		}
		if pin.ok {
			claim.Requirements = append(claim.Requirements, inRequirement(pin.key, map[string]bool{pin.value: true}))
		}
	}
	return claim
}

// priced is a planned node as a NodeClaim with its pods and cheapest offering only: the
// first offering finalize would list.
func (s *solver) priced(n *node) NewNodeClaim {
	cheapest := n.offer
	valid := s.validOffer(n)
	for _, o := range n.pool.byPrice() {
		if valid(o) {
			cheapest = o
			break
		}
	}
	return NewNodeClaim{NodePool: n.pool.nodePool, Pods: n.pods(),
		Cheapest: cheapest.choice()}
}

// validOffer reports whether an offering of the node's pool can take the node's place: it
// holds the node's pods and DaemonSets, accepts each of its pods, keeps every label they
// rely on, stays within the pool's limits, and takes no capacity reservation but its own.
func (s *solver) validOffer(n *node) func(*offer) bool {
	p := n.pool
	used := n.offer.alloc.minus(n.free)
	var compats []*compat
	seen := map[string]bool{}
	for _, pl := range n.placed {
		if !seen[pl.g.nodeKey] {
			seen[pl.g.nodeKey] = true
			compats = append(compats, p.compatibleOffers(pl.g))
		}
	}
	var limit vec
	if p.remaining != nil {
		limit = p.remaining.plus(n.offer.typ.capacity)
	}
	pinned := n.pinnedValues()
	return func(o *offer) bool {
		// A node takes one instance of its own reservation only: the others' instances are
		// counted for the nodes planned into them.
		if o.offering.ReservationID != "" && o.offering.ReservationID != n.offer.offering.ReservationID {
			return false
		}
		return used.fits(o.alloc) && (limit == nil || withinLimit(o.typ.capacity, limit, p.limited)) &&
			allCompatible(compats, o) && samePinned(pinned, o)
	}
}

func withinLimit(capacity, limit vec, limited []bool) bool {
	for i, l := range limited {
		if l && capacity[i] > limit[i] {
			return false
		}
	}
	return true
}

func allCompatible(compats []*compat, o *offer) bool {
	for _, c := range compats {
		if !c.ok[o.index] {
			return false
		}
	}
	return true
}

// pin is a label a planned node's pods rely on, with the node's value.
type pin struct {
	key, value string
	ok         bool
}

func (n *node) pinnedValues() []pin {
	out := make([]pin, 0, len(n.pinned))
	for key := range n.pinned {
		v, ok := n.offer.label(key)
		out = append(out, pin{key: key, value: v, ok: ok})
	}
	slices.SortFunc(out, func(a, b pin) int { return cmp.Compare(a.key, b.key) })
	return out
}

// samePinned reports whether the offering has the node's value for every pinned label.
func samePinned(pins []pin, o *offer) bool {
	for _, p := range pins {
		v, ok := o.label(p.key)
		if v != p.value || ok != p.ok {
			return false
		}
	}
	return true
}

func inRequirement(key string, values map[string]bool) karpv1.NodeSelectorRequirementWithMinValues {
	list := make([]string, 0, len(values))
	for v := range values {
		list = append(list, v)
	}
	sort.Strings(list)
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: list}
}

// explain says, per NodePool, why none can launch a node for the group's next pod.
func (s *solver) explain(g *group) string {
	if len(s.pools) == 0 {
		return "no NodePool is available to this pod's scheduler profile"
	}
	reasons := make([]string, 0, len(s.pools))
	for _, p := range s.pools {
		reasons = append(reasons, fmt.Sprintf("NodePool %q: %s", p.nodePool.Name, s.explainPool(g, p)))
	}
	out := strings.Join(reasons, "; ")
	if g.relaxed > 0 {
		given := make([]string, g.relaxed)
		for i, p := range g.preferences[:g.relaxed] {
			given[i] = p.String()
		}
		out += " (even without its preferences: " + strings.Join(given, ", ") + ")"
	}
	return out
}

func (s *solver) explainPool(g *group, p *pool) string {
	if taint, ok := untoleratedTaint(g.tolerations, p.taints); ok {
		return fmt.Sprintf("the pod does not tolerate taint %s", taint.ToString())
	}
	if len(p.offers) == 0 {
		return "no instance type is available (check the NodePool requirements and its EC2NodeClass)"
	}
	if g.onNodes != nil {
		return fmt.Sprintf("the pod's node affinity names its nodes (metadata.name in %s), which a new node is not; none of those has room", strings.Join(g.onNodes, ", "))
	}
	c := p.compatibleOffers(g)
	if !c.any {
		return fmt.Sprintf("no instance type satisfies both the NodePool requirements (%s) and the pod's node selector and affinity (%s)", describeRequirements(p), describeSelector(g))
	}
	var closest *offer
	var fitting []*offer
	for _, o := range p.offers {
		if !c.ok[o.index] {
			continue
		}
		if g.need.fits(o.alloc) {
			fitting = append(fitting, o)
		} else if closest == nil || s.closer(g.need, o, closest) {
			closest = o
		}
	}
	if len(fitting) == 0 {
		return fmt.Sprintf("no instance type has room for the pod's requests (%s): closest is %s with %s allocatable after DaemonSets, short of %s",
			s.dims.format(g.need), closest.typ.it.Name, s.dims.format(closest.alloc), strings.Join(s.dims.exceeding(g.need, closest.alloc), ", "))
	}
	var withinLimits []*offer
	for _, o := range fitting {
		if p.withinLimits(o.typ.capacity) {
			withinLimits = append(withinLimits, o)
		}
	}
	if len(withinLimits) == 0 {
		return fmt.Sprintf("its limits leave no room for a node that fits the pod (remaining: %s)", s.describeRemaining(p))
	}
	if reason := s.explainMinValues(g, p, withinLimits); reason != "" {
		return reason
	}
	for _, con := range g.topology {
		if con.t.key == corev1.LabelHostname {
			if con.kind == kindAffinity && con.allows("", false) == 0 {
				return fmt.Sprintf("its %s needs a node already running matching pods, and none can take the pod", con)
			}
			continue
		}
		if !slices.ContainsFunc(withinLimits, func(o *offer) bool { v, ok := o.label(con.t.key); return con.allows(v, ok) > 0 }) {
			return fmt.Sprintf("the pod's %s allows none of the %s values this NodePool can launch (%s)", con, con.t.key, describeValues(withinLimits, con.t.key))
		}
	}
	if len(g.reverse) > 0 {
		return "existing pods' anti-affinity excludes every domain this NodePool can launch in"
	}
	if portsConflict(g.ports, p.dsPorts) {
		return "a DaemonSet on this NodePool's nodes takes the pod's host port"
	}
	return "no new node can take the pod next to the pods already planned"
}

// closer reports whether a leaves fewer of the pod's resources short than b, then more room.
func (s *solver) closer(need vec, a, b *offer) bool {
	sa, sb := len(s.dims.exceeding(need, a.alloc)), len(s.dims.exceeding(need, b.alloc))
	if sa != sb {
		return sa < sb
	}
	return a.alloc[dimCPU]+a.alloc[dimMemory]>>20 > b.alloc[dimCPU]+b.alloc[dimMemory]>>20
}

// describeRemaining lists what the pool's limits still allow, zeros included.
func (s *solver) describeRemaining(p *pool) string {
	var parts []string
	for i, l := range p.limited {
		if !l {
			continue
		}
		one := make(vec, len(p.remaining))
		one[i] = max(p.remaining[i], 0)
		text := s.dims.format(one)
		if text == "" {
			text = string(s.dims.names[i]) + "=0"
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, ", ")
}

func describeValues(offers []*offer, key string) string {
	seen := map[string]bool{}
	for _, o := range offers {
		if v, ok := o.label(key); ok {
			seen[v] = true
		}
	}
	list := make([]string, 0, len(seen))
	for v := range seen {
		list = append(list, v)
	}
	sort.Strings(list)
	return strings.Join(list, ", ")
}

func describeRequirements(p *pool) string {
	reqs := p.nodePool.Spec.Template.Spec.Requirements
	if len(reqs) == 0 {
		return "none"
	}
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = requirements.Describe(r)
	}
	return strings.Join(parts, ", ")
}

func describeSelector(g *group) string {
	pod := g.rep
	var parts []string
	for k, v := range pod.Spec.NodeSelector {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	for _, term := range requiredTerms(pod) {
		for _, e := range term.MatchExpressions {
			parts = append(parts, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
		}
	}
	for _, p := range g.preferences[g.relaxed:] {
		if p.nodeTerm != nil {
			for _, e := range p.nodeTerm.MatchExpressions {
				parts = append(parts, fmt.Sprintf("preferred %s %s %v", e.Key, e.Operator, e.Values))
			}
		}
	}
	if g.volumeTopology {
		parts = append(parts, "its volumes' topology")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
