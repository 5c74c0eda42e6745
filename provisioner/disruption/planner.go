package disruption

import (
	"slices"
	"time"
)

// Planner makes consolidation plans over as many passes as they take, Options.PassTime
// each: weighing hundreds of candidates against a large cluster takes seconds, and a pass
// that long would hold the controller (and the capacity launched ahead of an interruption,
// which waits for it) as long. A plan is weighed to the end on the view of the cluster it
// began on, prepared once (as a plan made in one pass is); the pass that ends it takes the
// nodes of the plan that its own view still shows as candidates, and checks the decision
// against that view. The zero Planner is ready to use.
type Planner struct {
	work *planWork
	// course is the plan being carried out, as planned.
	course *course
}

// Launched tells the planner the NodeClaims it launched for the decision's replacements, in
// order: the pods of the rest of the plan that go to them go to their nodes.
func (p *Planner) Launched(d Decision, nodeClaims []string) {
	if d.from == nil || d.from != p.course {
		return
	}
	for i, name := range nodeClaims {
		if i < len(d.replacing) {
			p.course.launched[d.replacing[i]] = name
		}
	}
}

// pacer tells a plan whether its next step fits in the pass's time, judging by the last.
// It reads the wall clock: it bounds computing time, which an injected clock would not see
// pass.
type pacer struct {
	deadline time.Time
	// began is when the last step began, and step how long the one before it took.
	began time.Time
	step  time.Duration
}

// next reports whether to take the next step of a plan: the first step of a stage always
// (so that every pass gets on), a later one when it would end by the deadline if it takes
// as long as the last did.
func (p *pacer) next(first bool) bool {
	if p == nil {
		return true
	}
	now := time.Now()
	if !p.began.IsZero() {
		p.step = now.Sub(p.began)
	}
	p.began = now
	return first || !now.Add(p.step).After(p.deadline)
}

// over reports whether the pass's time is up.
func (p *pacer) over() bool {
	return p != nil && !time.Now().Before(p.deadline)
}

// planWork is a plan being made, on the view c it began on. A plan grows the set of nodes
// to take away in candidate order, a block of candidates at a time (see block): a block
// joins when its pods still fit and the set saves no less with it. A node that saves
// nothing alone may save with others (nodes each running one GPU pod, replaced by one
// larger node), so nodes are let in on a tie; the candidates left out join per NodePool
// when that saves more; a last stage takes out again, a block at a time, the nodes let in
// on a tie that the set saves as much without.
type planWork struct {
	c Cluster
	// candidates are those weighed, in order; next is the first not weighed yet.
	candidates []Candidate
	next       int
	// set are the nodes let in, in order, saving saved; tied are those let in on a tie.
	set   []Candidate
	saved float64
	tied  map[string]bool
	// joined says the candidates left out were weighed per NodePool; untie is then the
	// index in set of the next node to weigh taking out again, counting down.
	joined bool
	untie  int
	// made says the plan is made: a pass that made it as its time ran out left it for the
	// next to carry out.
	made bool
}

// Planning reports whether a consolidation plan is under way: the next Decide carries it
// on.
func (p *Planner) Planning() bool { return p.work != nil }

// start begins a plan over the candidates, in the order to weigh them, on the prepared view.
func (p *Planner) start(c Cluster, candidates []Candidate, opts Options) {
	p.work = &planWork{c: c, candidates: candidates[:min(len(candidates), opts.MaxCandidates)], tied: map[string]bool{}}
}

// carryOn weighs the plan until it is made, and reports true, or until the pass's time is
// up (w.c.pace), and reports false.
func (w *planWork) carryOn() bool {
	if !w.grow() {
		return false
	}
	if !w.joined {
		w.joinPools()
	}
	return w.untieAll()
}

// members are the set's nodes among the candidates given (a later view's), in set order.
func (w *planWork) members(candidates []Candidate) []Candidate {
	current := make(map[string]Candidate, len(candidates))
	for _, cand := range candidates {
		current[cand.Node] = cand
	}
	var out []Candidate
	for _, cand := range w.set {
		if now, ok := current[cand.Node]; ok {
			out = append(out, now)
		}
	}
	return out
}

// grow lets the candidates into the set a block at a time, in order (see block), each
// block when its pods still fit and the set saves no less with it; it reports false when
// the pass's time is up first (see pacer). Given a spare snapshot (two CPUs or more), it
// weighs the next block at the same time, as if the current one joins, which most do, and
// keeps that result only when it does.
func (w *planWork) grow() bool {
	c := w.c
	size := w.block()
	admit := func(blk, next []Candidate, d Decision, ok bool) bool {
		if !ok || d.Savings <= w.saved-savingsEpsilon {
			return false
		}
		for _, cand := range blk {
			w.tied[cand.Node] = d.Savings < w.saved+savingsEpsilon
		}
		w.set, w.saved = next, d.Savings
		return true
	}
	for first := true; w.next < len(w.candidates); first = false {
		if !c.pace.next(first) {
			return false
		}
		end := min(w.next+size, len(w.candidates))
		blk := w.candidates[w.next:end]
		next := append(slices.Clip(w.set), blk...)
		if c.spare == nil || end == len(w.candidates) {
			d, ok := estimate(c, next)
			admit(blk, next, d, ok)
			w.next = end
			continue
		}
		laterEnd := min(end+size, len(w.candidates))
		later := w.candidates[end:laterEnd]
		withLater := append(slices.Clip(next), later...)
		d, ok, dAhead, okAhead := c.both(next, withLater)
		w.next = end
		if admit(blk, next, d, ok) {
			admit(later, withLater, dAhead, okAhead)
			w.next = laterEnd
		}
	}
	return true
}

// planSteps bounds the steps of each stage of a plan: the candidates join, and tied nodes
// are taken out again, in blocks of a planSteps-th of the candidates (one node at a time
// below planSteps candidates). Each step weighs the set whole, so a plan's work grows with
// its candidates rather than their square (1,000 candidates one at a time took 17 s), and
// nodes joining a block at a time also let in together nodes that only save together.
const planSteps = 64

// block is how many candidates join, or tied nodes leave, at a time.
func (w *planWork) block() int {
	return max(1, (len(w.candidates)+planSteps-1)/planSteps)
}

// both estimates two sets at once, the second on the spare snapshot.
func (c Cluster) both(first, second []Candidate) (Decision, bool, Decision, bool) {
	var d2 Decision
	var ok2 bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		spare := c
		spare.whatIfs = c.spare
		d2, ok2 = estimate(spare, second)
	}()
	d1, ok1 := estimate(c, first)
	<-done
	return d1, ok1, d2, ok2
}

// joinPools lets in the candidates left out, per NodePool (see joinPools).
func (w *planWork) joinPools() {
	w.set, w.saved = joinPools(w.c, w.candidates, w.set, w.saved, w.tied)
	w.joined, w.untie = true, len(w.set)-1
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

// untieAll takes out again, last first and a block at a time (see block), the nodes let in
// on a tie that the set saves as much without; it reports false when the pass's time is up
// first. Given a spare snapshot, it weighs taking out the next block at the same time, as if
// the current one stays, which most do, and keeps that result only when it does.
func (w *planWork) untieAll() bool {
	c := w.c
	size := w.block()
	for first := true; w.untie >= 0; first = false {
		if !c.pace.next(first) {
			return false
		}
		blk, below := w.tiedBlock(w.untie, size)
		if len(blk) == 0 {
			w.untie = below
			continue
		}
		without := withoutIndices(w.set, blk)
		ahead, aheadBelow := w.tiedBlock(below, size)
		if c.spare == nil || len(ahead) == 0 {
			if d, ok := estimate(c, without); ok && d.Savings > w.saved-savingsEpsilon {
				w.set, w.saved = without, d.Savings
			}
			w.untie = below
			continue
		}
		withoutAhead := withoutIndices(w.set, ahead)
		d, ok, dAhead, okAhead := c.both(without, withoutAhead)
		if ok && d.Savings > w.saved-savingsEpsilon {
			w.set, w.saved = without, d.Savings
			w.untie = below
			continue
		}
		if okAhead && dAhead.Savings > w.saved-savingsEpsilon {
			w.set, w.saved = withoutAhead, dAhead.Savings
		}
		w.untie = aheadBelow
	}
	return true
}

// tiedBlock lists, counting down from index from of the set, the indices of up to size
// nodes let in on a tie, and the index to count down from after them.
func (w *planWork) tiedBlock(from, size int) ([]int, int) {
	var out []int
	i := from
	for ; i >= 0 && len(out) < size; i-- {
		if w.tied[w.set[i].Node] {
			out = append(out, i)
		}
	}
	return out, i
}

// withoutIndices is the set less the nodes at the indices given.
func withoutIndices(set []Candidate, indices []int) []Candidate {
	drop := make(map[int]bool, len(indices))
	for _, i := range indices {
		drop[i] = true
	}
	out := make([]Candidate, 0, len(set)-len(indices))
	for i, cand := range set {
		if !drop[i] {
			out = append(out, cand)
		}
	}
	return out
}
