// Package disruption takes capacity away, voluntarily and safely: it replaces drifted
// nodes, removes empty ones and consolidates underutilized ones, deleting a node whose pods
// fit elsewhere or replacing several nodes by a cheaper one. Decisions are made with the
// planner that provisions (package packing), so pods really fit where a decision says, and
// within the NodePools' disruption budgets.
package disruption

import (
	"runtime"
	"slices"
	"sort"
	"strings"
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

// whatIfs plans what-ifs of one decision against one packing.Snapshot of the cluster,
// prepared on first use, with the pods that move copied once per zones they may move to.
type whatIfs struct {
	snap    *packing.Snapshot
	pending map[pendingKey]*corev1.Pod
	// fixed are the copies of pods whose zones do not depend on the nodes taken away.
	fixed map[*corev1.Pod]*corev1.Pod
}

func newWhatIfs() *whatIfs {
	return &whatIfs{pending: map[pendingKey]*corev1.Pod{}, fixed: map[*corev1.Pod]*corev1.Pod{}}
}

type pendingKey struct {
	pod   types.NamespacedName
	zones string
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

// forConsolidation prepares the cluster for consolidation's what-ifs, and returns it with
// the candidates in the order a plan weighs them.
func forConsolidation(c Cluster) (Cluster, []Candidate) {
	// Drift replaces a node whatever it takes; consolidation only moves what moves safely.
	c.zoneOf = zonesOf(c.Nodes)
	c.pins = zonePins(c)
	var candidates []Candidate
	for _, cand := range c.Candidates {
		if cand.MayConsolidate && !cand.Drifted && len(cand.Pods) > 0 {
			candidates = append(candidates, cand)
		}
	}
	// The most spent on room no pod uses first (the most taking the node away may save),
	// then the dearest node.
	idle := idleSpend(c, candidates)
	sort.SliceStable(candidates, func(i, j int) bool {
		ii, ij := idle[candidates[i].Node], idle[candidates[j].Node]
		if ii != ij {
			return ii > ij
		}
		if candidates[i].Price != candidates[j].Price {
			return candidates[i].Price > candidates[j].Price
		}
		return candidates[i].Node < candidates[j].Node
	})
	c.Nodes = fullestFirst(c)
	// Nodes in a new order: a new snapshot.
	c.whatIfs = newWhatIfs()
	if runtime.GOMAXPROCS(0) > 1 {
		c.spare = newWhatIfs()
	}
	return c, candidates
}

// fullestFirst orders the nodes by how much of them their pods use, most first: pods that
// move fill the fullest nodes that take them, which are the last to be consolidated.
func fullestFirst(c Cluster) []packing.Node {
	all := make([]Candidate, len(c.Nodes))
	for i, n := range c.Nodes {
		all[i] = Candidate{Node: n.Node.Name, Pods: n.Pods}
	}
	used := utilizations(c, all)
	nodes := slices.Clone(c.Nodes)
	sort.SliceStable(nodes, func(i, j int) bool { return used[nodes[i].Node.Name] > used[nodes[j].Node.Name] })
	return nodes
}

// drift replaces the first drifted node the budget allows: its pods go to other nodes or to
// replacements, whatever they cost.
func drift(c Cluster, budget Budget) (Decision, bool) {
	var drifted []Candidate
	for _, cand := range c.Candidates {
		if cand.Drifted {
			drifted = append(drifted, cand)
		}
	}
	sort.Slice(drifted, func(i, j int) bool { return drifted[i].Node < drifted[j].Node })
	for _, cand := range withinBudget(drifted, karpv1.DisruptionReasonDrifted, budget, 1) {
		plan, ok := simulate(c, []Candidate{cand}, nil)
		if !ok {
			continue
		}
		return Decision{
			Reason: karpv1.DisruptionReasonDrifted, Originals: []Candidate{cand},
			Replacements: plan.NewNodeClaims, Placements: plan.Existing,
			Savings: cand.Price - price(plan.NewNodeClaims),
		}, true
	}
	return Decision{}, false
}

// empty deletes every empty consolidatable node the budgets allow.
func empty(c Cluster, budget Budget) (Decision, bool) {
	var empties []Candidate
	for _, cand := range c.Candidates {
		if cand.MayRemoveEmpty && !cand.Drifted && len(cand.Pods) == 0 {
			empties = append(empties, cand)
		}
	}
	sort.Slice(empties, func(i, j int) bool { return empties[i].Node < empties[j].Node })
	empties = withinBudget(empties, karpv1.DisruptionReasonEmpty, budget, len(empties))
	if len(empties) == 0 {
		return Decision{}, false
	}
	d := Decision{Reason: karpv1.DisruptionReasonEmpty, Originals: empties}
	for _, e := range empties {
		d.Savings += e.Price
	}
	return d, true
}

// withinBudget keeps candidates, in order, while their NodePool's budget lasts, at most limit.
func withinBudget(candidates []Candidate, reason karpv1.DisruptionReason, budget Budget, limit int) []Candidate {
	left := map[string]int{}
	var out []Candidate
	for _, cand := range candidates {
		if len(out) == limit {
			break
		}
		n, seen := left[cand.NodePool]
		if !seen {
			n = budget(cand.NodePool, reason)
		}
		if n <= 0 {
			left[cand.NodePool] = 0
			continue
		}
		left[cand.NodePool] = n - 1
		out = append(out, cand)
	}
	return out
}

// consolidation carries out a plan of which underutilized nodes the cluster can do
// without: the plan under way (the candidates marked Planned), or a new one, which may take
// passes to make (see Planner). It takes away now what the budgets allow and moves their
// pods only onto nodes outside the plan, so no pod moves again as the rest of the plan goes
// in later passes.
func (p *Planner) consolidation(c Cluster, budget Budget, opts Options) (Decision, bool) {
	begun := p.work == nil
	if begun {
		now, candidates := forConsolidation(c)
		var planned []Candidate
		for _, cand := range candidates {
			if cand.Planned {
				planned = append(planned, cand)
			}
		}
		if len(planned) > 0 {
			if d, ok := p.takeNow(now, planned, budget, opts); ok {
				return d, true
			}
		}
		p.start(now, candidates, opts)
	}
	w := p.work
	w.c.pace = c.pace
	madeBefore := w.made
	if !w.carryOn() {
		return Decision{}, false
	}
	w.made = true
	if w.saved <= savingsEpsilon {
		p.work = nil
		return Decision{}, false
	}
	if !madeBefore && c.pace.over() {
		// Made as the pass's time ran out: the next pass carries it out, on its view.
		return Decision{}, false
	}
	p.work = nil
	now, candidates := w.c, w.candidates
	if !begun {
		// The plan was weighed on the view it began on: the nodes go as this pass sees
		// them, those that are still candidates.
		now, candidates = forConsolidation(c)
	}
	return p.takeNow(now, w.members(candidates), budget, opts)
}

// joinPools lets in together, per NodePool, the candidates left out of the set, when that
// saves more: nodes that only save many at a time (twenty nodes each running one GPU pod,
// whose pods two eight-GPU nodes take) do not join one by one where a few of them pack
// dearer than apart. They join as tied, so the last stage of a plan takes out those that add
// nothing.
func joinPools(c Cluster, candidates, set []Candidate, saved float64, tied map[string]bool) ([]Candidate, float64) {
	in := map[string]bool{}
	for _, cand := range set {
		in[cand.Node] = true
	}
	left := map[string][]Candidate{}
	var pools []string
	for _, cand := range candidates {
		if in[cand.Node] {
			continue
		}
		if _, ok := left[cand.NodePool]; !ok {
			pools = append(pools, cand.NodePool)
		}
		left[cand.NodePool] = append(left[cand.NodePool], cand)
	}
	for _, pool := range pools {
		next := append(slices.Clip(set), left[pool]...)
		if d, ok := estimate(c, next); ok && d.Savings > saved+savingsEpsilon {
			for _, cand := range left[pool] {
				tied[cand.Node] = true
			}
			set, saved = next, d.Savings
		}
	}
	return set, saved
}

// savingsEpsilon is the least saving that counts: below it prices only differ by rounding.
const savingsEpsilon = 1e-9

// takeNow consolidates the first nodes of the plan its budgets allow, as the course of the
// plan places their pods (see course): the course under way when the plan is what is left of
// it, else one planned for the whole plan on this view. When the course no longer holds (a
// node its pods go to is gone, pods came or went), the plan is planned anew; when that no
// longer consolidates whole, it takes the first nodes that still consolidate together,
// keeping pods off the rest of the plan.
func (p *Planner) takeNow(c Cluster, set []Candidate, budget Budget, opts Options) (Decision, bool) {
	if p.course != nil && p.course.follows(set) {
		if d, ok := p.course.next(c, set, budget, opts); ok {
			return d, true
		}
	}
	p.course = nil
	if cs, ok := newCourse(c, set); ok {
		if d, ok := cs.next(c, set, budget, opts); ok {
			p.course = cs
			return d, true
		}
	}
	return takeFirst(c, set, withinBudget(set, karpv1.DisruptionReasonUnderutilized, budget, opts.MaxMultiNode), opts)
}

// takeFirst consolidates the first nodes of now, in order, that still consolidate together,
// keeping pods off the rest of the plan: all of them when they do, else as many as a
// binary search over how many finds (a few plans where dropping one node at a time took
// as many plans as nodes: 1.75 s for the rest of a plan of 149 diverse nodes that no longer
// consolidated).
func takeFirst(c Cluster, set, now []Candidate, opts Options) (Decision, bool) {
	try := func(k int) (Decision, bool) {
		later := othersThan(set, now[:k])
		d, ok := consolidate(c, now[:k], later, opts)
		d.Rest = inPlanOrder(set, later)
		return d, ok
	}
	if len(now) == 0 {
		return Decision{}, false
	}
	if d, ok := try(len(now)); ok {
		return d, true
	}
	var best Decision
	found := false
	for lo, hi := 0, len(now); hi-lo > 1; {
		mid := (lo + hi) / 2
		if d, ok := try(mid); ok {
			best, found, lo = d, true, mid
		} else {
			hi = mid
		}
	}
	return best, found
}

// shareReplacements splits the plan's nodes into groups whose pods the plan puts on the
// same replacements, in plan order.
func shareReplacements(set []Candidate, plan packing.Plan) [][]Candidate {
	origin := map[types.NamespacedName]int{}
	for i, cand := range set {
		for _, p := range cand.Pods {
			origin[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = i
		}
	}
	// label[i] is the group of set[i]: the least index in it.
	label := make([]int, len(set))
	for i := range label {
		label[i] = i
	}
	for _, nc := range plan.NewNodeClaims {
		joined, to := map[int]bool{}, len(set)
		for _, p := range nc.Pods {
			if i, ok := origin[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]; ok {
				joined[label[i]] = true
				to = min(to, label[i])
			}
		}
		for i := range label {
			if joined[label[i]] {
				label[i] = to
			}
		}
	}
	index := map[int]int{}
	var groups [][]Candidate
	for i, cand := range set {
		g, ok := index[label[i]]
		if !ok {
			g = len(groups)
			index[label[i]] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], cand)
	}
	return groups
}

// othersThan is the set of the plan's nodes that are not among nodes.
func othersThan(set, nodes []Candidate) map[string]bool {
	out := map[string]bool{}
	for _, cand := range set {
		out[cand.Node] = true
	}
	for _, cand := range nodes {
		delete(out, cand.Node)
	}
	return out
}

// inPlanOrder names the plan's nodes that are among names, in plan order.
func inPlanOrder(set []Candidate, names map[string]bool) []string {
	var out []string
	for _, cand := range set {
		if names[cand.Node] {
			out = append(out, cand.Node)
		}
	}
	return out
}

// wholeGroups takes groups in order while every NodePool's budget and the cap allow all of
// a group, skipping those that do not fit.
func wholeGroups(groups [][]Candidate, budget Budget, limit int) []Candidate {
	left := map[string]int{}
	var out []Candidate
	for _, g := range groups {
		if len(out)+len(g) > limit {
			continue
		}
		need := map[string]int{}
		for _, cand := range g {
			need[cand.NodePool]++
		}
		fits := true
		for pool, n := range need {
			if _, seen := left[pool]; !seen {
				left[pool] = budget(pool, karpv1.DisruptionReasonUnderutilized)
			}
			fits = fits && n <= left[pool]
		}
		if !fits {
			continue
		}
		for pool, n := range need {
			left[pool] -= n
		}
		out = append(out, g...)
	}
	return out
}

// consolidate checks whether taking the nodes away saves money: their pods fit on the
// other nodes, or on those plus replacements that cost less than the nodes taken away (by
// SpotToSpotSavings at least when spot replaces spot, and spot never replaces spot under
// NoSpotToSpot).
func consolidate(c Cluster, nodes []Candidate, later map[string]bool, opts Options) (Decision, bool) {
	d, ok := evaluate(c, nodes, later)
	if !ok || d.Savings <= savingsEpsilon {
		return Decision{}, false
	}
	allSpot := true
	for _, n := range nodes {
		allSpot = allSpot && n.CapacityType == karpv1.CapacityTypeSpot
	}
	now := price(d.Replacements)
	was := d.Savings + now
	if len(d.Replacements) > 0 && allSpot && allSpotClaims(d.Replacements) && (opts.NoSpotToSpot || now > was*(1-opts.SpotToSpotSavings)) {
		return Decision{}, false
	}
	return d, true
}

// evaluate plans taking the nodes away, whatever it saves; false when some pod would have
// nowhere to go.
func evaluate(c Cluster, nodes []Candidate, later map[string]bool) (Decision, bool) {
	plan, ok := simulate(c, nodes, later)
	return decisionOf(nodes, plan), ok
}

// estimate is evaluate with replacements that carry only their pods and cheapest offering:
// enough to weigh a plan, for a fraction of the cost.
func estimate(c Cluster, nodes []Candidate) (Decision, bool) {
	plan, ok := c.whatIf(nodes, nil, (*packing.Snapshot).Estimate)
	return decisionOf(nodes, plan), ok
}

func decisionOf(nodes []Candidate, plan packing.Plan) Decision {
	return Decision{
		Reason: karpv1.DisruptionReasonUnderutilized, Originals: nodes,
		Replacements: plan.NewNodeClaims, Placements: plan.Existing, Savings: priceOf(nodes) - price(plan.NewNodeClaims),
	}
}

// simulate plans the pods of the nodes taken away onto the rest of the cluster and new
// NodeClaims, each pod in the zones its pin allows, if any; false when some pod would have
// nowhere to go.
func simulate(c Cluster, gone []Candidate, later map[string]bool) (packing.Plan, bool) {
	return c.whatIf(gone, later, (*packing.Snapshot).Solve)
}

// whatIf plans, with solve, the pods of the nodes gone onto the rest of the cluster but the
// nodes later, and onto new NodeClaims.
func (c Cluster) whatIf(gone []Candidate, later map[string]bool, solve func(*packing.Snapshot, []*corev1.Pod, map[string]bool, map[string]bool) packing.Plan) (packing.Plan, bool) {
	w := c.whatIfs
	if w == nil {
		w = newWhatIfs()
		c.whatIfs = w
	}
	c.snapshot()
	away := nodeSet(gone)
	var pods []*corev1.Pod
	for _, g := range gone {
		for _, p := range g.Pods {
			pods = append(pods, w.pendingPod(c, p, away))
		}
	}
	plan := solve(w.snap, pods, away, later)
	return plan, len(plan.Unschedulable) == 0
}

// snapshot is the what-ifs' snapshot of the cluster, prepared on first use.
func (c Cluster) snapshot() *packing.Snapshot {
	w := c.whatIfs
	if w.snap == nil {
		w.snap = packing.NewSnapshot(packing.Input{Nodes: c.Nodes, NodePools: c.NodePools, DaemonSets: c.DaemonSets, Volumes: c.Volumes, MinValuesPolicy: c.MinValuesPolicy})
	}
	return w.snap
}

// pendingPod is the pod as it waits for a node once its node is gone: unbound, and kept to
// the zones its pin allows.
func (w *whatIfs) pendingPod(c Cluster, p *corev1.Pod, away map[string]bool) *corev1.Pod {
	if pending, ok := w.fixed[p]; ok {
		return pending
	}
	key := pendingKey{pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}}
	pin, pinned := c.pins[key.pod]
	var zones []string
	if pinned {
		zones = pin.zones(away, c.zoneOf)
		key.zones = strings.Join(zones, ",")
	}
	if pending, ok := w.pending[key]; ok {
		return pending
	}
	pending := p.DeepCopy()
	pending.Spec.NodeName = ""
	if pinned {
		pinToZones(pending, zones)
	}
	w.pending[key] = pending
	if len(pin.shared) == 0 {
		// Its zones do not depend on the nodes away.
		w.fixed[p] = pending
	}
	return pending
}

// idleSpend is, per candidate node, the share of its hourly price its movable pods leave
// unused: the price times one less the node's utilization. A dear node half used comes
// before a cheap one nearly empty, as taking it away saves more.
func idleSpend(c Cluster, candidates []Candidate) map[string]float64 {
	used := utilizations(c, candidates)
	out := make(map[string]float64, len(candidates))
	for _, cand := range candidates {
		out[cand.Node] = cand.Price * (1 - used[cand.Node])
	}
	return out
}

// utilizations is, per candidate node, the largest share of any of the node's allocatable
// resources (CPU, memory, GPUs, ...) its movable pods request.
func utilizations(c Cluster, candidates []Candidate) map[string]float64 {
	allocatable := make(map[string]corev1.ResourceList, len(c.Nodes))
	for _, n := range c.Nodes {
		allocatable[n.Node.Name] = n.Node.Status.Allocatable
	}
	out := make(map[string]float64, len(candidates))
	for _, cand := range candidates {
		share := 0.0
		for name, used := range requestsOf(packing.BoundRequests, cand.Pods) {
			total := allocatable[cand.Node][name]
			if !total.IsZero() {
				share = max(share, used.AsApproximateFloat64()/total.AsApproximateFloat64())
			}
		}
		out[cand.Node] = share
	}
	return out
}

// requestsOf is what the pods request together, each as request counts it: a pod on its
// node (packing.BoundRequests) or one placed (packing.PodRequests).
func requestsOf(request func(*corev1.Pod) corev1.ResourceList, pods ...[]*corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, list := range pods {
		for _, p := range list {
			for name, q := range request(p) {
				total := sum[name]
				total.Add(q)
				sum[name] = total
			}
		}
	}
	return sum
}

func allSpotClaims(ncs []packing.NewNodeClaim) bool {
	for _, nc := range ncs {
		if nc.Cheapest.CapacityType != karpv1.CapacityTypeSpot {
			return false
		}
	}
	return true
}

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

// podsOf is the set of the nodes' movable pods.
func podsOf(cands []Candidate) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, cand := range cands {
		for _, p := range cand.Pods {
			out[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	return out
}

// among are the pods of the list named in the set, in order.
func among(pods []*corev1.Pod, set map[types.NamespacedName]bool) []*corev1.Pod {
	in := inSet(set)
	return slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return !in(p) })
}

// holdsAny reports whether some pod of the list is named in the set.
func holdsAny(pods []*corev1.Pod, set map[types.NamespacedName]bool) bool {
	return slices.ContainsFunc(pods, inSet(set))
}

// inSet reports whether a pod is named in the set.
func inSet(set map[types.NamespacedName]bool) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return set[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] }
}

// nodeSet is the set of the candidates' node names.
func nodeSet(cands []Candidate) map[string]bool {
	out := make(map[string]bool, len(cands))
	for _, cand := range cands {
		out[cand.Node] = true
	}
	return out
}
