package disruption

import (
	"runtime"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

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

// consolidate checks whether taking the nodes away saves money: their pods fit on the
// other nodes, or on those plus replacements that cost less than the nodes taken away (by
// SpotToSpotSavings at least when spot replaces spot, and spot never replaces spot under
// NoSpotToSpot), by MinSavingsPerPod at least for each pod moved.
func consolidate(c Cluster, nodes []Candidate, later map[string]bool, opts Options) (Decision, bool) {
	d, ok := evaluate(c, nodes, later)
	if !ok || d.Savings <= savingsEpsilon || !worthItsMoves(d.Savings, len(podsOf(nodes)), opts) {
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

// worthItsMoves reports whether an hourly saving is worth evicting the pods for: at least
// MinSavingsPerPod a pod.
func worthItsMoves(savings float64, pods int, opts Options) bool {
	return savings >= opts.MinSavingsPerPod*float64(pods)
}

func allSpotClaims(ncs []packing.NewNodeClaim) bool {
	for _, nc := range ncs {
		if nc.Cheapest.CapacityType != karpv1.CapacityTypeSpot {
			return false
		}
	}
	return true
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
