package packing

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tailor-autoscaler/tailor/provisioner/packing/lowerbound"
)

// Solve plans the pods of in.
//
// Pods are grouped (replicas of one Deployment are identical) and placed group by group,
// largest first: onto schedulable existing nodes, then onto new nodes. A new node is
// opened for the next unplaced pod by trying, per size class, the instance type with the
// lowest price per unit of resources (priced by the LP dual of the whole batch), filling it
// with every pending pod that fits it, and keeping the offering with the lowest price per
// unit of pods it holds. Constraints the scheduler filters on are checked at every
// placement; preferences are honoured as constraints and given up one at a time, only for
// pods that cannot be placed otherwise.
//
// When nodes cost more than their instances (volumes, a public address), the greedy is run
// twice, ranking offerings by whole node prices and by instance prices, and the plan that
// places more pods, then costs less by whole node prices, is kept. The fixed cost of a node
// favours larger ones, but which choices pay off depends on how the batch's pods fill the
// nodes opened last; neither ranking is better on every batch. The second run shares the
// first's preparation (nodes, offerings, topology counts).
func Solve(in Input) Plan {
	requests := requestsOf(in.Pods)
	return newBase(in, requests, false).plan(in.Pods, requests, nil, nil, false)
}

// plan plans the pods against the base less the nodes away, keeping them off those held,
// and leaves the base as it was. A plan that is only priced (priceOnly, see
// Snapshot.Estimate) is guided by whole node prices alone.
func (b *base) plan(pods []*corev1.Pod, requests []corev1.ResourceList, away, held map[string]bool, priceOnly bool) Plan {
	plan := b.solve(pods, requests, away, held, wholeNode, priceOnly)
	if priceOnly || b.in.WholePriceRankingOnly || !b.nodeCostsCount() {
		return plan
	}
	if other := b.solve(pods, requests, away, held, instanceOnly, false); other.better(plan) {
		other.RankedByInstancePrices = true
		return other
	}
	return plan
}

// solve plans one round guided by the price given, and undoes it.
func (b *base) solve(pods []*corev1.Pod, requests []corev1.ResourceList, away, held map[string]bool, by guide, priceOnly bool) Plan {
	b.guide = by
	s := b.newRound(pods, requests, away, held)
	s.priceOnly = priceOnly
	s.placeOnExisting()
	s.launch()
	plan := s.plan()
	s.undo(away)
	return plan
}

// nodeCostsCount reports whether some offering's node costs more than its instance.
func (b *base) nodeCostsCount() bool {
	for _, p := range b.pools {
		for _, o := range p.offers {
			if o.price != o.offering.Price {
				return true
			}
		}
	}
	return false
}

type solver struct {
	*base
	// pods are the round's pods to place.
	pods   []*corev1.Pod
	groups []*group
	// touched are the existing nodes the round placed pods on, in the order of the first.
	touched []*node
	planned []*node
	// unplaced pods and why, in the order they failed.
	unplaced map[*corev1.Pod]string
	// priceOnly leaves out of the plan's new NodeClaims all but their pods and cheapest
	// offering.
	priceOnly bool
}

// node is an existing node or NodeClaim, or a node the plan launches.
type node struct {
	id   int
	name string
	// input is set for existing nodes.
	input *Node
	// away says whether the round takes an existing node away; schedulable whether it may
	// place pods on it.
	away, schedulable bool
	// pool and offer are set for planned nodes: the NodePool and the offering it is sized
	// and priced by.
	pool  *pool
	offer *offer
	// free is the room left; baseFree, for an existing node, the room its own pods leave.
	free, baseFree vec
	ports          []hostPort
	// pinned keys are labels the node's pods rely on: the node must keep the offer's
	// value for them.
	pinned map[string]bool
	placed []placement
	// compat caches, for existing nodes, whether the node constraints of groups accept it,
	// by the constraints' number (group.nodeID).
	compat []answer
	// sets counts an existing node's pods by label set; anti lists the required
	// anti-affinity terms they carry, once a pod and term.
	sets []setCount
	anti []*antiTerm
	// domains caches an existing node's topology labels by key number (see domainAt).
	domains []cachedLabel
}

type placement struct {
	g *group
	// start is the index in the group's pods of the first of the k pods placed.
	start, k int
}

// domainAt is domain of a key numbered id (see topologyIndex.keys), cached for existing
// nodes, whose labels the planner reads over and over.
func (n *node) domainAt(id int, key string) (string, bool) {
	if n.offer != nil {
		return n.domain(key)
	}
	for len(n.domains) <= id {
		n.domains = append(n.domains, cachedLabel{})
	}
	c := &n.domains[id]
	if !c.known {
		c.value, c.ok = n.domain(key)
		c.known = true
	}
	return c.value, c.ok
}

// cachedLabel is a node's value of a label, once looked up.
type cachedLabel struct {
	value     string
	ok, known bool
}

func (n *node) domain(key string) (string, bool) {
	if n.offer != nil {
		if key == corev1.LabelHostname {
			return n.name, true
		}
		return n.offer.label(key)
	}
	v, ok := n.input.Node.Labels[key]
	if !ok && key == corev1.LabelHostname {
		return n.input.Node.Name, true
	}
	return v, ok
}

// compatible reports whether an existing node's taints and labels accept the group.
func (n *node) compatible(g *group) bool {
	for len(n.compat) <= g.nodeID {
		n.compat = append(n.compat, unknown)
	}
	if n.compat[g.nodeID] == unknown {
		n.compat[g.nodeID] = no
		if tolerates(g.tolerations, n.input.Node.Spec.Taints) && g.matchesNode(n.input.Node) {
			n.compat[g.nodeID] = yes
		}
	}
	return n.compat[g.nodeID] == yes
}

// answer is a cached yes or no.
type answer uint8

const (
	unknown answer = iota
	yes
	no
)

func newSolver(in Input) *solver {
	requests := requestsOf(in.Pods)
	return newBase(in, requests, false).newRound(in.Pods, requests, nil, nil)
}

// newRound prepares a round placing the pods (whose requests are given) on the base's
// nodes but those away, keeping them off those held.
func (b *base) newRound(pods []*corev1.Pod, requests []corev1.ResourceList, away, held map[string]bool) *solver {
	b.beginRound()
	s := &solver{base: b, pods: pods, unplaced: map[*corev1.Pod]string{}}
	for _, n := range b.nodes {
		n.away = away[n.name]
		n.schedulable = !n.away && n.input.Schedulable && !held[n.name]
	}
	s.buildGroups(pods, requests)
	for _, n := range b.nodes {
		if away[n.name] {
			s.takeAway(n, -1)
		}
	}
	for _, g := range s.groups {
		s.matchGroup(g)
	}
	s.priceResources()
	s.computeQuotas()
	return s
}

// takeAway removes (sign -1) a node's pods from the round's topology counts, or puts them
// back (sign 1).
func (s *solver) takeAway(n *node, sign int) {
	for _, sc := range n.sets {
		for _, t := range sc.set.matching(s.topo) {
			if t.round != s.round {
				continue
			}
			if v, ok := n.domainAt(t.keyID, t.key); ok && t.countsOn(n) {
				addCount(t.counts, v, sign*sc.n)
				t.total += sign * sc.n
			}
		}
	}
	s.countAnti(n, sign)
}

func (s *solver) newID() int { return s.base.newID() }

// buildGroups sorts pods into groups, largest first, with pods other groups' affinity
// needs placed before those groups.
func (s *solver) buildGroups(pods []*corev1.Pod, requests []corev1.ResourceList) {
	byKey := map[uint64]*group{}
	for i, pod := range pods {
		need, k := s.shape(pod, requests[i])
		if g, ok := byKey[k]; ok {
			g.pods = append(g.pods, pod)
			continue
		}
		g := s.group(pod, need, k, 0)
		byKey[k] = g
		s.groups = append(s.groups, g)
	}
	targets := map[*group]bool{}
	for _, g := range s.groups {
		for _, c := range g.allConstraints() {
			if c.kind != kindAffinity {
				continue
			}
			for _, h := range s.groups {
				if h != g && c.t.matches(h.rep.Namespace, h.rep.Labels) {
					targets[h] = true
				}
			}
		}
	}
	slices.SortStableFunc(s.groups, func(a, b *group) int {
		if targets[a] != targets[b] {
			if targets[a] {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.size, a.size); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
}

// shape is what the pod requests, as a vector, and the key of the pods the planner treats
// alike, computed once per pod.
func (s *solver) shape(pod *corev1.Pod, requests corev1.ResourceList) (vec, uint64) {
	if sh, ok := s.shapes[pod]; ok {
		return sh.need, sh.key
	}
	need := s.dims.of(requests)
	k := s.keyer.key(pod, need)
	s.shapes[pod] = podShape{need: need, key: k}
	return need, k
}

// group returns a new group for the round's pods like pod (whose key is k), honouring its
// preferences from the relaxed-th on: a copy of the first such group the base built, as
// groups differ only by their pods.
func (s *solver) group(pod *corev1.Pod, need vec, k uint64, relaxed int) *group {
	proto, ok := s.protos[protoKey{key: k, relaxed: relaxed}]
	if !ok {
		proto = s.newGroup(pod, need, relaxed)
		proto.key = k
		s.protos[protoKey{key: k, relaxed: relaxed}] = proto
	}
	g := *proto
	g.id = s.newID()
	g.pods = []*corev1.Pod{pod}
	for _, c := range g.all {
		c.t.round = s.round
	}
	for _, a := range g.owned {
		a.round = s.round
	}
	return &g
}

// newGroup builds a group for pods like pod, honouring its preferences from the
// relaxed-th on.
func (s *solver) newGroup(pod *corev1.Pod, need vec, relaxed int) *group {
	g := &group{id: s.newID(), pods: []*corev1.Pod{pod}, rep: pod, need: need, relaxed: relaxed}
	g.size = float64(need[dimCPU])/1000 + float64(need[dimMemory])/float64(4<<30)
	for i := dimEphemeralStorage + 1; i < len(need); i++ {
		g.size += 10 * float64(need[i])
	}
	g.affinity = nodeaffinity.GetRequiredNodeAffinity(pod)
	g.tolerations = pod.Spec.Tolerations
	g.ports = podHostPorts(pod)
	extra, reason := s.volumes.constraints(pod)
	g.unschedulable = reason
	g.volumeTopology = len(extra) > 0
	g.preferences = preferences(pod)
	honoured := g.preferences[relaxed:]
	terms := requiredTerms(pod)
	g.onNodes = namedNodes(terms)
	for _, sel := range extra {
		g.extra = append(g.extra, nodeaffinity.NewLazyErrorNodeSelector(sel))
		terms = append(terms, sel.NodeSelectorTerms...)
	}
	for _, p := range honoured {
		if p.nodeTerm != nil {
			g.extra = append(g.extra, nodeaffinity.NewLazyErrorNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{*p.nodeTerm}}))
			terms = append(terms, *p.nodeTerm)
		}
	}
	g.offerKeys = referencesOfferKeys(pod.Spec.NodeSelector, terms)
	g.nodeKey = nodeKeyOf(pod, extra, honoured)
	g.nodeID = s.nodeKeys.of(g.nodeKey)

	for i := range pod.Spec.TopologySpreadConstraints {
		c := &pod.Spec.TopologySpreadConstraints[i]
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			g.topology = append(g.topology, s.spreadConstraint(g, c, false))
		}
	}
	for _, term := range requiredAffinityTerms(pod) {
		g.topology = append(g.topology, s.termConstraint(g, &term, kindAffinity, false))
	}
	for _, term := range requiredAntiTerms(pod) {
		g.topology = append(g.topology, s.termConstraint(g, &term, kindAnti, false))
		g.owned = append(g.owned, s.topo.antiTermOf(pod, &term))
	}
	g.all = slices.Clone(g.topology)
	for i, p := range g.preferences {
		var c *constraint
		switch {
		case p.spread != nil:
			c = s.spreadConstraint(g, p.spread, true)
		case p.podTerm != nil && p.anti:
			c = s.termConstraint(g, p.podTerm, kindAnti, true)
		case p.podTerm != nil:
			c = s.termConstraint(g, p.podTerm, kindAffinity, true)
		default:
			continue
		}
		g.all = append(g.all, c)
		if i >= relaxed {
			g.topology = append(g.topology, c)
		}
	}
	return g
}

func (s *solver) spreadConstraint(g *group, c *corev1.TopologySpreadConstraint, preferred bool) *constraint {
	t := s.topo.spreadTracker(g, c)
	return &constraint{kind: kindSpread, t: t, self: t.matches(g.rep.Namespace, g.rep.Labels), preferred: preferred}
}

func (s *solver) termConstraint(g *group, term *corev1.PodAffinityTerm, kind constraintKind, preferred bool) *constraint {
	t := s.topo.termTracker(g.rep, term)
	return &constraint{kind: kind, t: t, self: t.matches(g.rep.Namespace, g.rep.Labels), preferred: preferred}
}

// matchGroup finds the round's trackers counting the group's pods and the anti-affinity
// terms keeping them away: those of pods on the round's nodes and of its groups.
func (s *solver) matchGroup(g *group) {
	g.matched, g.reverse = nil, nil
	s.topo.matchingTrackers(g.rep.Namespace, g.rep.Labels, func(t *tracker) {
		if t.round == s.round {
			g.matched = append(g.matched, t)
		}
	})
	s.topo.matchingAntiTerms(g.rep.Namespace, g.rep.Labels, func(a *antiTerm) {
		if a.refs > 0 || a.round == s.round {
			g.reverse = append(g.reverse, a)
		}
	})
}

// priceResources sets each pool's resource prices: the duals of the LP that buys the
// whole batch's requests from the pool's offerings.
func (s *solver) priceResources() {
	demand := make([]float64, len(s.dims.names))
	for _, g := range s.groups {
		for i, x := range g.need {
			demand[i] += float64(x) * float64(len(g.pods))
		}
	}
	for _, p := range s.pools {
		prices := make([]float64, len(s.dims.names))
		cols := p.columns()
		// Price only what the pool's offerings provide: a dimension none of them has
		// (a GPU in a CPU pool) would make the LP infeasible.
		amount := make([]float64, len(demand))
		for i := range demand {
			for _, c := range cols {
				if c.Capacity[i] > 0 {
					amount[i] = demand[i]
					break
				}
			}
		}
		if lp, err := lowerbound.ResourcePrices(cols, amount); err == nil {
			prices = lp
		}
		if slices.Max(append([]float64{0}, prices...)) == 0 {
			// No batch demand to learn from: value cpu and memory equally by the pool's
			// average prices, so ranking still works.
			prices[dimCPU], prices[dimMemory] = 1.0/1000, 1.0/float64(4<<30)
		}
		p.setPrices(prices)
	}
}

func toFloats(v vec) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(max(x, 0))
	}
	return out
}

// placeOnExisting fills schedulable existing nodes and NodeClaims first.
func (s *solver) placeOnExisting() {
	for _, g := range s.groups {
		if g.unschedulable != "" {
			continue
		}
		s.placeOnNodes(g)
	}
}

// placeOnNodes puts the group's pods on the round's schedulable existing nodes, in order.
func (s *solver) placeOnNodes(g *group) {
	for _, n := range s.fitting(g) {
		if g.remaining() == 0 {
			return
		}
		if n.away || !n.schedulable {
			continue
		}
		if k := s.howMany(g, n); k > 0 {
			s.place(g, n, k)
		}
	}
}

// launch opens new nodes until every group is placed or known unplaceable.
func (s *solver) launch() {
	for i := 0; i < len(s.groups); i++ {
		g := s.groups[i]
		if g.unschedulable != "" {
			for _, pod := range g.pods[g.next:] {
				s.unplaced[pod] = g.unschedulable
			}
			g.next = len(g.pods)
			continue
		}
		if g.relaxed > 0 {
			s.placeOnOpen(g)
		}
		for g.remaining() > 0 {
			if s.open(g) != nil {
				continue
			}
			if g.relaxed < len(g.preferences) {
				// Give up the next preference for the pods left.
				r := s.group(g.rep, g.need, g.key, g.relaxed+1)
				r.pods = g.pods[g.next:]
				g.pods = g.pods[:g.next]
				s.matchGroup(r)
				s.groups = slices.Insert(s.groups, i+1, r)
				break
			}
			reason := s.explain(g)
			for _, pod := range g.pods[g.next:] {
				s.unplaced[pod] = reason
			}
			g.next = len(g.pods)
		}
	}
}

// placeOnOpen puts a relaxed group's pods onto nodes already in the plan or existing.
func (s *solver) placeOnOpen(g *group) {
	s.placeOnNodes(g)
	for _, n := range s.planned {
		if g.remaining() == 0 {
			return
		}
		if k := s.howMany(g, n); k > 0 {
			s.place(g, n, k)
			if !s.meetsMinValues(n) {
				s.unplace(g, n, k)
				n.placed = n.placed[:len(n.placed)-1]
			}
		}
	}
}

// maxCandidates bounds the instance types tried for one new node: the most cost-efficient
// of each size class.
const maxCandidates = 12

// open launches a node for the group's next pod: in the highest-weight NodePools that can
// take it, the candidate offering whose node, filled with pending pods, costs least per
// unit of what it holds. It returns nil when no NodePool can take the pod.
func (s *solver) open(g *group) *node {
	for _, level := range s.weightLevels() {
		if n := s.openIn(g, level); n != nil {
			return n
		}
	}
	return nil
}

func (s *solver) weightLevels() [][]*pool {
	var levels [][]*pool
	for i, p := range s.pools {
		if i == 0 || p.weight != s.pools[i-1].weight {
			levels = append(levels, nil)
		}
		levels[len(levels)-1] = append(levels[len(levels)-1], p)
	}
	return levels
}

func (s *solver) openIn(g *group, pools []*pool) *node {
	if o := g.lastChoice; o != nil && slices.Contains(pools, o.typ.pool) && s.canSeed(g, o) {
		if n, v := s.tryNode(o, g); n != nil {
			if v >= 0.999*g.lastValue {
				s.planned = append(s.planned, n)
				return n
			}
			s.rollback(n)
		}
	}
	var best *offer
	bestScore, bestValue := math.Inf(1), 0.0
	for _, p := range pools {
		for _, o := range s.candidates(g, p) {
			n, v := s.tryNode(o, g)
			if n == nil {
				continue
			}
			s.rollback(n)
			price := p.guidePrice(o)
			score := price / max(v, 1e-12)
			// On a tie, the node holding more wins: fewer nodes for the same price.
			if score < bestScore*(1-1e-9) || (score <= bestScore*(1+1e-9) && (v > bestValue || (v == bestValue && price < p.guidePrice(best)))) {
				best, bestScore, bestValue = o, score, v
			}
		}
	}
	if best == nil {
		return nil
	}
	n, _ := s.tryNode(best, g)
	s.planned = append(s.planned, n)
	g.lastChoice, g.lastValue = best, bestValue
	return n
}

// tryNode plans a node of the offering filled with pending pods, the group's first, and
// returns it with the value of what it holds. When the NodePool's minValues are Strict and
// the filled node leaves too few instance types, it holds the group's next pod alone; nil
// when even then it does.
func (s *solver) tryNode(o *offer, g *group) (*node, float64) {
	n := s.newPlanned(o)
	v := s.fill(n, g)
	if s.meetsMinValues(n) {
		return n, v
	}
	s.rollback(n)
	n = s.newPlanned(o)
	if s.howMany(g, n) > 0 {
		s.place(g, n, 1)
		if s.meetsMinValues(n) {
			return n, g.need.value(n.pool.prices)
		}
	}
	s.rollback(n)
	return nil, 0
}

// canSeed reports whether a new node of the offering can take the group's next pod.
func (s *solver) canSeed(g *group, o *offer) bool {
	p := o.typ.pool
	c := p.compatibleOffers(g)
	return c.ok[o.index] && g.need.fits(o.alloc) && p.withinLimits(o.typ.capacity) && s.reservationLeft(o) && s.offerAllows(g, o)
}

// candidates are the offerings to try for a new node seeded by the group: per size class
// (powers of two of the group's request value), the most cost-efficient instance type,
// at its cheapest offering that can take the group's next pod.
func (s *solver) candidates(g *group, p *pool) []*offer {
	c := p.compatibleOffers(g)
	if !c.any {
		return nil
	}
	needValue := max(g.need.value(p.prices), 1e-12)
	// seen has bit k set once size class k has its candidate.
	var seen uint64
	var out []*offer
	for _, rt := range p.rank(c) {
		// The size class is floor(log2(value / need)), read off the exponent; no type holds
		// 2^63 times a pod.
		_, exp := math.Frexp(max(rt.value/needValue, 1))
		bit := uint64(1) << min(exp-1, 63)
		if seen&bit != 0 || !g.need.fits(rt.t.alloc) {
			continue
		}
		for _, o := range rt.offers {
			if g.need.fits(o.alloc) && p.withinLimits(o.typ.capacity) && s.reservationLeft(o) && s.offerAllows(g, o) {
				seen |= bit
				out = append(out, o)
				break
			}
		}
		if len(out) == maxCandidates {
			break
		}
	}
	return out
}

// offerAllows checks the group's topology constraints on keys an offering decides (zone,
// capacity type, instance type labels) for a new node of the offering.
func (s *solver) offerAllows(g *group, o *offer) bool {
	for _, c := range g.topology {
		if c.t.key == corev1.LabelHostname {
			continue
		}
		v, ok := o.label(c.t.key)
		if c.allows(v, ok) == 0 {
			return false
		}
	}
	for _, a := range g.reverse {
		if a.key == corev1.LabelHostname {
			continue
		}
		if v, ok := o.label(a.key); ok && a.owners[v] > 0 {
			return false
		}
	}
	return true
}

// reservationLeft reports whether a new node may be planned into the offering: a reserved
// offering's reservation must have an instance left that no planned node takes.
func (s *solver) reservationLeft(o *offer) bool {
	return o.offering.ReservationID == "" || s.reservedLeft[o.offering.ReservationID] > 0
}

func (s *solver) newPlanned(o *offer) *node {
	p := o.typ.pool
	n := &node{id: s.newID(), pool: p, offer: o, free: slices.Clone(o.alloc), pinned: map[string]bool{}}
	n.name = fmt.Sprintf("%s-new-%d", p.nodePool.Name, n.id)
	n.ports = slices.Clone(p.dsPorts)
	if p.remaining != nil {
		p.remaining.sub(o.typ.capacity)
	}
	if o.offering.ReservationID != "" {
		s.reservedLeft[o.offering.ReservationID]--
	}
	return n
}

// fill places the seed group's pods and then every other pending group's that fit, in
// group order, and returns the value of what it placed at the pool's resource prices.
func (s *solver) fill(n *node, seed *group) float64 {
	value := 0.0
	if k := s.howMany(seed, n); k > 0 {
		s.place(seed, n, k)
		value += float64(k) * seed.need.value(n.pool.prices)
	}
	for _, g := range s.groups {
		if g == seed || g.remaining() == 0 || g.unschedulable != "" {
			continue
		}
		if !n.pool.compatibleOffers(g).ok[n.offer.index] {
			continue
		}
		if k := s.howMany(g, n); k > 0 {
			s.place(g, n, k)
			value += float64(k) * g.need.value(n.pool.prices)
		}
	}
	return value
}

// rollback undoes a node's placements and gives its capacity back to the pool's limits.
func (s *solver) rollback(n *node) {
	for i := len(n.placed) - 1; i >= 0; i-- {
		s.unplace(n.placed[i].g, n, n.placed[i].k)
	}
	n.placed = nil
	if n.pool.remaining != nil {
		n.pool.remaining.add(n.offer.typ.capacity)
	}
	if n.offer.offering.ReservationID != "" {
		s.reservedLeft[n.offer.offering.ReservationID]++
	}
}

// howMany is how many of the group's pending pods the node takes, as the scheduler's
// filters would accept them one after the other.
func (s *solver) howMany(g *group, n *node) int {
	k := g.remaining()
	if k == 0 {
		return 0
	}
	if n.offer != nil {
		if !n.pool.compatibleOffers(g).ok[n.offer.index] {
			return 0
		}
	} else if !n.compatible(g) {
		return 0
	}
	if r := g.need.times(n.free); r < int64(k) {
		k = int(r)
	}
	if len(g.ports) > 0 {
		if portsConflict(g.ports, n.ports) {
			return 0
		}
		k = min(k, 1)
	}
	for _, c := range g.topology {
		if k == 0 {
			return 0
		}
		v, ok := n.domainAt(c.t.keyID, c.t.key)
		if c.kind == kindSpread && ok && !c.t.countsOn(n) {
			// PodTopologySpread skips nodes its inclusion policies leave out for
			// counting, but the pod itself must still go to an eligible node.
			return 0
		}
		k = min(k, c.allows(v, ok))
	}
	for _, a := range g.reverse {
		if v, ok := n.domainAt(a.keyID, a.key); ok && a.owners[v] > 0 {
			return 0
		}
	}
	return k
}

// place puts k pods of the group onto the node.
func (s *solver) place(g *group, n *node, k int) {
	if n.input != nil && len(n.placed) == 0 {
		s.touched = append(s.touched, n)
	}
	s.account(g, n, k)
	n.free.addTimes(g.need, -int64(k))
	if len(g.ports) > 0 {
		n.ports = append(n.ports, g.ports...)
	}
	n.placed = append(n.placed, placement{g: g, start: g.next, k: k})
	g.next += k
}

func (s *solver) unplace(g *group, n *node, k int) {
	s.account(g, n, -k)
	n.free.addTimes(g.need, int64(k))
	if len(g.ports) > 0 {
		n.ports = n.ports[:len(n.ports)-len(g.ports)]
	}
	g.next -= k
}

// account adds k pods of the group (removes them when k < 0) to the topology counts of
// the node's domains, pinning the labels they rely on.
func (s *solver) account(g *group, n *node, k int) {
	pin := func(key string) {
		if n.offer != nil && key != corev1.LabelHostname {
			n.pinned[key] = true
		}
	}
	for _, t := range g.matched {
		if v, ok := n.domainAt(t.keyID, t.key); ok && t.countsOn(n) {
			addCount(t.counts, v, k)
			t.total += k
			pin(t.key)
		}
	}
	for _, a := range g.owned {
		if v, ok := n.domainAt(a.keyID, a.key); ok {
			addCount(a.owners, v, k)
			pin(a.key)
		}
	}
	for _, a := range g.reverse {
		pin(a.key)
	}
	for _, c := range g.topology {
		pin(c.t.key)
		if c.kind == kindSpread && c.t.spread.quota != nil {
			if v, ok := n.domainAt(c.t.keyID, c.t.key); ok {
				c.t.spread.quota[v] -= k
			}
		}
	}
}

// addCount adds k to a domain's count, dropping counts back to zero: a Snapshot's rounds
// would otherwise leave an entry for every node they planned.
func addCount(counts map[string]int, domain string, k int) {
	if counts[domain] += k; counts[domain] == 0 {
		delete(counts, domain)
	}
}
