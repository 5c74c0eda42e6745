package disruption

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// course is a consolidation plan being carried out, as it was planned: where each pod of the
// nodes it has yet to take away goes, onto nodes that stay or onto its replacements. A plan
// carried out a part at a time, each part planned anew, let the part's pods take the room the
// plan meant for later parts, which then bought replacements of their own, and a plan made
// anew for what was left could come out dearer than the one it followed (the planner is a
// heuristic: the same pods less a few may pack otherwise): at 964 webmix nodes a plan carried
// out in parts ended 4% above a fresh plan, carried out at once 1% below it.
type course struct {
	// pods are the pods of the nodes the plan has yet to take away, by node, as planned; a
	// node leaves once a decision takes it.
	pods map[string][]types.NamespacedName
	// plan places them: onto the nodes that stay (Existing) and onto replacements.
	plan packing.Plan
	// launched are the NodeClaims of the replacements launched so far, by index in
	// plan.NewNodeClaims.
	launched map[int]string
}

// newCourse plans taking the whole set away on the view; false when some pod would have
// nowhere to go or the set no longer saves.
func newCourse(c Cluster, set []Candidate) (*course, bool) {
	plan, ok := simulate(c, set, nil)
	if !ok || priceOf(set)-price(plan.NewNodeClaims) <= savingsEpsilon {
		return nil, false
	}
	cs := &course{pods: make(map[string][]types.NamespacedName, len(set)), plan: plan, launched: map[int]string{}}
	for _, cand := range set {
		cs.pods[cand.Node] = podNames(cand.Pods)
	}
	return cs, true
}

// follows reports whether the set is what is left of the course: the nodes it has yet to
// take away, each running the pods it ran when the course was planned. A node of the plan
// that is no longer a candidate (its pods changed, or it took pods that moved) has room the
// course did not count on, and one that left the plan other than by the course's decisions
// leaves it stale: the plan is planned anew.
func (cs *course) follows(set []Candidate) bool {
	if len(set) != len(cs.pods) {
		return false
	}
	for _, cand := range set {
		planned, ok := cs.pods[cand.Node]
		if !ok || !slices.Equal(planned, podNames(cand.Pods)) {
			return false
		}
	}
	return true
}

// next takes away the nodes of the set (what is left of the course, in plan order) the
// budgets allow, their pods going where the course planned them, and launches the
// replacements those pods go to that are not launched yet, sized for every pod the course
// plans onto them. It takes the whole groups of nodes whose pods share replacements that the
// budgets allow, less those whose pods do not hold on this view while the rest of the plan
// stays (a pod that moves before the others of its Deployment may not fit where the plan
// puts it, nor anywhere else, once they have all moved: a spread constraint counts them
// where they run now). Failing that, it takes the nodes of the first group the budgets (or
// MaxMultiNode) never let go whole that they allow and that hold; the group's replacements their pods go to are
// launched ahead of the rest of the group and cost on top until it moves onto them. False
// when none holds or pays.
func (cs *course) next(c Cluster, set []Candidate, budget Budget, opts Options) (Decision, bool) {
	v := indexView(c)
	try := func(now []Candidate) (Decision, map[string]bool) {
		d, ok := cs.take(v, now)
		if !ok {
			return Decision{}, nodeSet(now)
		}
		later := othersThan(set, now)
		d, failed := settle(c, d, later, cs.targetsOf(v, later))
		d.Rest = inPlanOrder(set, later)
		return d, failed
	}
	var paying [][]Candidate
	for _, g := range shareReplacements(set, cs.plan) {
		if cs.pays(g, opts) {
			paying = append(paying, g)
		}
	}
	d, ok := wholeGroupsThatHold(paying, budget, opts.MaxMultiNode, try)
	for _, g := range paying {
		if ok {
			break
		}
		if len(withinBudget(g, karpv1.DisruptionReasonUnderutilized, budget, opts.MaxMultiNode)) == len(g) {
			continue
		}
		// The budgets (or MaxMultiNode) never let this group go whole: part of it goes
		// first, one group of a node each.
		var singles [][]Candidate
		for _, cand := range g {
			singles = append(singles, []Candidate{cand})
		}
		d, ok = wholeGroupsThatHold(singles, budget, opts.MaxMultiNode, try)
	}
	if !ok {
		return Decision{}, false
	}
	for _, n := range d.Originals {
		delete(cs.pods, n.Node)
	}
	return d, true
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

// wholeGroupsThatHold tries the whole groups the budgets allow; while some of their nodes'
// pods do not hold (try names those nodes), it tries again without the groups of those
// nodes, ten times at most.
func wholeGroupsThatHold(groups [][]Candidate, budget Budget, limit int, try func([]Candidate) (Decision, map[string]bool)) (Decision, bool) {
	for range 10 {
		chosen := wholeGroups(groups, budget, limit)
		if len(chosen) == 0 {
			return Decision{}, false
		}
		d, failed := try(chosen)
		if len(failed) == 0 {
			return d, true
		}
		groups = slices.DeleteFunc(slices.Clone(groups), func(g []Candidate) bool {
			return slices.ContainsFunc(g, func(cand Candidate) bool { return failed[cand.Node] })
		})
	}
	return Decision{}, false
}

// view indexes the nodes of a pass's view by name and by their NodeClaim's name.
type view struct {
	byName, byNodeClaim map[string]packing.Node
}

func indexView(c Cluster) view {
	v := view{byName: make(map[string]packing.Node, len(c.Nodes)), byNodeClaim: map[string]packing.Node{}}
	for _, n := range c.Nodes {
		v.byName[n.Node.Name] = n
		if n.NodeClaim != nil {
			v.byNodeClaim[n.NodeClaim.Name] = n
		}
	}
	return v
}

// take is the decision that takes the nodes away as the course places their pods, on this
// view: onto the nodes that stay and the replacements launched so far (placements), and onto
// replacements to launch. False when a node the pods go to is not on the view or takes no
// pods.
func (cs *course) take(v view, nodes []Candidate) (Decision, bool) {
	moving := podsOf(nodes)
	d := Decision{Reason: karpv1.DisruptionReasonUnderutilized, Originals: nodes, from: cs}
	onto := func(n packing.Node, ok bool, pods []*corev1.Pod) bool {
		if len(pods) == 0 {
			return true
		}
		if !ok || !n.Schedulable {
			return false
		}
		d.Placements = append(d.Placements, packing.Placement{Node: &n, Pods: pods})
		return true
	}
	for _, pl := range cs.plan.Existing {
		n, ok := v.byName[pl.Node.Node.Name]
		if !onto(n, ok, among(pl.Pods, moving)) {
			return Decision{}, false
		}
	}
	for i, nc := range cs.plan.NewNodeClaims {
		pods := among(nc.Pods, moving)
		if name, launched := cs.launched[i]; launched {
			n, ok := v.byNodeClaim[name]
			if !onto(n, ok, pods) {
				return Decision{}, false
			}
			continue
		}
		if len(pods) > 0 {
			d.Replacements = append(d.Replacements, nc)
			d.replacing = append(d.replacing, i)
		}
	}
	d.Savings = priceOf(nodes) - price(d.Replacements)
	return d, true
}

// settle checks on the view that the decision holds while the rest of the plan stays: the
// pods it moves onto nodes that stay fit on those nodes, and each it moves onto a replacement
// fits on a new node in that replacement's zones, the nodes taken away and those of the
// plan's rest taking no pods. When the pods no longer fit on the nodes the course puts them
// on (a spread constraint counts the pods of their Deployments that have yet to move where
// they run now), they may go to any node that stays, where the planner puts them. The
// decision places them where the check did. It returns the decision and the nodes taken
// away whose pods do not hold (none when it holds).
func settle(c Cluster, d Decision, later, kept map[string]bool) (Decision, map[string]bool) {
	moving := map[types.NamespacedName]*corev1.Pod{}
	nodeOf := map[types.NamespacedName]string{}
	for _, o := range d.Originals {
		for _, p := range o.Pods {
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			moving[key], nodeOf[key] = p, o.Node
		}
	}
	nodesOf := func(pods map[types.NamespacedName]bool) map[string]bool {
		out := map[string]bool{}
		for key := range pods {
			out[nodeOf[key]] = true
		}
		return out
	}
	if failed := unlaunchable(c, d, later); len(failed) > 0 {
		return Decision{}, nodesOf(failed)
	}
	plan, misplaced := place(c, d, later, nil)
	if len(misplaced) > 0 {
		if plan, misplaced = place(c, d, later, kept); len(misplaced) > 0 {
			return Decision{}, nodesOf(misplaced)
		}
	}
	d.Placements = nil
	for _, pl := range plan.Existing {
		pods := make([]*corev1.Pod, len(pl.Pods))
		for i, p := range pl.Pods {
			pods[i] = moving[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
		}
		d.Placements = append(d.Placements, packing.Placement{Node: pl.Node, Pods: pods})
	}
	return d, nil
}

// unlaunchable are the pods the decision moves onto replacements that may not run in the
// replacements' zones, the nodes taken away and those later taking none.
func unlaunchable(c Cluster, d Decision, later map[string]bool) map[types.NamespacedName]bool {
	moving := podsOf(d.Originals)
	var pods []*corev1.Pod
	for _, nc := range d.Replacements {
		zones := zonesOfClaim(nc)
		for _, p := range among(nc.Pods, moving) {
			pending := p.DeepCopy()
			pending.Spec.NodeName = ""
			if len(zones) > 0 {
				pinToZones(pending, zones)
			}
			pods = append(pods, pending)
		}
	}
	if len(pods) == 0 {
		return nil
	}
	out := map[types.NamespacedName]bool{}
	for _, u := range c.snapshot().Estimate(pods, nodeSet(d.Originals), later).Unschedulable {
		out[types.NamespacedName{Namespace: u.Pod.Namespace, Name: u.Pod.Name}] = true
	}
	return out
}

// place plans the pods the decision moves onto nodes that stay, the nodes taken away and
// those later taking none: onto the nodes the decision puts them on (two pods may swap
// nodes: both stay on the room the course meant for this part, not for a later one), or,
// given the nodes kept for later parts, onto any other node but those. It returns the plan
// and the pods it does not place on a node that stays (misplaced).
func place(c Cluster, d Decision, later, kept map[string]bool) (packing.Plan, map[types.NamespacedName]bool) {
	away := nodeSet(d.Originals)
	held := maps.Clone(later)
	targets := map[string]bool{}
	for _, pl := range d.Placements {
		targets[pl.Node.Node.Name] = true
	}
	for _, n := range c.Nodes {
		if name := n.Node.Name; !targets[name] && (kept == nil || kept[name]) {
			held[name] = true
		}
	}
	var pods []*corev1.Pod
	for _, pl := range d.Placements {
		for _, p := range pl.Pods {
			pods = append(pods, c.whatIfs.pendingPod(c, p, away))
		}
	}
	plan := c.snapshot().Estimate(pods, away, held)
	misplaced := map[types.NamespacedName]bool{}
	for _, u := range plan.Unschedulable {
		misplaced[types.NamespacedName{Namespace: u.Pod.Namespace, Name: u.Pod.Name}] = true
	}
	for _, nc := range plan.NewNodeClaims {
		for _, p := range nc.Pods {
			misplaced[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	return plan, misplaced
}

// targetsOf are the nodes that stay that the course moves the pods of the nodes given onto:
// those it plans them onto and the replacements launched for them.
func (cs *course) targetsOf(v view, nodes map[string]bool) map[string]bool {
	pods := map[types.NamespacedName]bool{}
	for name := range nodes {
		for _, p := range cs.pods[name] {
			pods[p] = true
		}
	}
	out := map[string]bool{}
	for _, pl := range cs.plan.Existing {
		if holdsAny(pl.Pods, pods) {
			out[pl.Node.Node.Name] = true
		}
	}
	for i, name := range cs.launched {
		if n, ok := v.byNodeClaim[name]; ok && holdsAny(cs.plan.NewNodeClaims[i].Pods, pods) {
			out[n.Node.Name] = true
		}
	}
	return out
}

// zonesOfClaim are the zones a new NodeClaim may launch in, nil when its requirements do not
// say.
func zonesOfClaim(nc packing.NewNodeClaim) []string {
	for _, r := range nc.Requirements {
		if r.Key == corev1.LabelTopologyZone && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

// pays reports whether taking the group away as the course does saves money, the
// replacements launched so far being paid for already: by SpotToSpotSavings at least when
// spot replaces spot, and spot never replacing spot under NoSpotToSpot; by
// MinSavingsPerPod at least for each pod it moves.
func (cs *course) pays(g []Candidate, opts Options) bool {
	moving := podsOf(g)
	var replacements []packing.NewNodeClaim
	for i, nc := range cs.plan.NewNodeClaims {
		if _, launched := cs.launched[i]; launched {
			continue
		}
		if holdsAny(nc.Pods, moving) {
			replacements = append(replacements, nc)
		}
	}
	was, now := priceOf(g), price(replacements)
	if was-now <= savingsEpsilon || !worthItsMoves(was-now, len(moving), opts) {
		return false
	}
	allSpot := true
	for _, n := range g {
		allSpot = allSpot && n.CapacityType == karpv1.CapacityTypeSpot
	}
	return len(replacements) == 0 || !allSpot || !allSpotClaims(replacements) || (!opts.NoSpotToSpot && now <= was*(1-opts.SpotToSpotSavings))
}

// podNames are the pods' names, sorted.
func podNames(pods []*corev1.Pod) []types.NamespacedName {
	out := make([]types.NamespacedName, len(pods))
	for i, p := range pods {
		out[i] = types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}
