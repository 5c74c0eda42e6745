package disruption

import (
	"slices"
)

// Planner makes consolidation plans over as many passes as they take, Options.PassTime
// each: weighing hundreds of candidates against a large cluster takes seconds, and a pass
// that long would hold the controller (and the capacity launched ahead of an interruption,
// which waits for it) as long. What a pass weighed is carried to the next, by node name,
// onto that pass's view of the cluster. The zero Planner is ready to use.
type Planner struct {
	work *planWork
}

// planWork is a plan being made. A plan grows the set of nodes to take away in candidate
// order: a node joins when its pods still fit and the set saves no less with it. A node
// that saves nothing alone may save with others (nodes each running one GPU pod, replaced
// by one larger node), so nodes are let in on a tie; the candidates left out join per
// NodePool when that saves more; a last stage takes out again the nodes let in on a tie
// that the set saves as much without.
type planWork struct {
	// order are the candidates in the order they are weighed; next is the first not
	// weighed yet.
	order []string
	next  int
	// set are the nodes let in, in order, saving saved; tied are those let in on a tie.
	set   []string
	saved float64
	tied  map[string]bool
	// joined says the candidates left out were weighed per NodePool; untie is then the
	// index in set of the next node to weigh taking out again, counting down.
	joined bool
	untie  int
}

// Planning reports whether a consolidation plan is under way: the next Decide carries it
// on.
func (p *Planner) Planning() bool { return p.work != nil }

// plan carries on the plan under way, or starts one over the candidates (in the order to
// weigh them), until it is made or the pass's time is up. It returns the nodes to take
// away and true once made, false when the time was up first.
func (p *Planner) plan(c Cluster, candidates []Candidate, opts Options) ([]Candidate, bool) {
	current := make(map[string]Candidate, len(candidates))
	for _, cand := range candidates {
		current[cand.Node] = cand
	}
	if p.work != nil && !p.work.resume(c, current) {
		p.work = nil
	}
	if p.work == nil {
		w := &planWork{tied: map[string]bool{}}
		for _, cand := range candidates[:min(len(candidates), opts.MaxCandidates)] {
			w.order = append(w.order, cand.Node)
		}
		p.work = w
	}
	w := p.work
	if !w.grow(c, current) {
		return nil, false
	}
	if !w.joined {
		w.joinPools(c, current)
	}
	if !w.untieAll(c, current) {
		return nil, false
	}
	p.work = nil
	if w.saved <= savingsEpsilon {
		return nil, true
	}
	return w.members(current), true
}

// resume fits the plan under way to this pass's view: nodes that are no longer candidates
// leave the set (and are skipped when their turn comes), and what the set saves is weighed
// again, as pods may have come and gone since. It reports false when the set's pods no
// longer fit: the plan starts over.
func (w *planWork) resume(c Cluster, current map[string]Candidate) bool {
	kept := w.set[:0]
	untie := -1
	for i, name := range w.set {
		if _, ok := current[name]; !ok {
			continue
		}
		kept = append(kept, name)
		if i <= w.untie {
			untie++
		}
	}
	w.set, w.untie = kept, untie
	if len(w.set) == 0 {
		w.saved = 0
		return true
	}
	d, ok := estimate(c, w.members(current))
	w.saved = d.Savings
	return ok
}

// members are the set's candidates as the pass sees them.
func (w *planWork) members(current map[string]Candidate) []Candidate {
	out := make([]Candidate, len(w.set))
	for i, name := range w.set {
		out[i] = current[name]
	}
	return out
}

// grow lets the candidates into the set one at a time, in order, each when its pods still
// fit and the set saves no less with it; it reports false when the pass's time is up first
// (see pacer). Given a spare snapshot (two CPUs or more), it weighs the next candidate at
// the same time, as if the current one joins, which most do, and keeps that result only
// when it does: the same set as one at a time, in little more than half the time.
func (w *planWork) grow(c Cluster, current map[string]Candidate) bool {
	set := w.members(current)
	admit := func(cand Candidate, next []Candidate, d Decision, ok bool) bool {
		if !ok || d.Savings <= w.saved-savingsEpsilon {
			return false
		}
		w.tied[cand.Node] = d.Savings < w.saved+savingsEpsilon
		set, w.saved = next, d.Savings
		w.set = append(w.set, cand.Node)
		return true
	}
	for first := true; w.next < len(w.order); first = false {
		if !c.pace.next(first) {
			return false
		}
		cand, ok := current[w.order[w.next]]
		if !ok {
			w.next++
			continue
		}
		next := append(slices.Clip(set), cand)
		after, ahead := w.nextCandidate(current)
		if c.spare == nil || ahead < 0 {
			d, ok := estimate(c, next)
			admit(cand, next, d, ok)
			w.next++
			continue
		}
		later := current[w.order[ahead]]
		withLater := append(slices.Clip(next), later)
		d, ok, dAhead, okAhead := c.both(next, withLater)
		w.next++
		if admit(cand, next, d, ok) {
			admit(later, withLater, dAhead, okAhead)
			w.next = after
		}
	}
	return true
}

// nextCandidate finds the candidate weighed after the one at next, still a candidate: its
// index in order, and the index to carry on from once it is weighed too; -1 when there is
// none.
func (w *planWork) nextCandidate(current map[string]Candidate) (after, ahead int) {
	for i := w.next + 1; i < len(w.order); i++ {
		if _, ok := current[w.order[i]]; ok {
			return i + 1, i
		}
	}
	return len(w.order), -1
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
func (w *planWork) joinPools(c Cluster, current map[string]Candidate) {
	var candidates []Candidate
	for _, name := range w.order {
		if cand, ok := current[name]; ok {
			candidates = append(candidates, cand)
		}
	}
	set, saved := joinPools(c, candidates, w.members(current), w.saved, w.tied)
	w.set = w.set[:0]
	for _, cand := range set {
		w.set = append(w.set, cand.Node)
	}
	w.saved, w.joined, w.untie = saved, true, len(w.set)-1
}

// untieAll takes out again, last first, the nodes let in on a tie that the set saves as
// much without; it reports false when the pass's time is up first. Given a spare snapshot,
// it weighs taking out the next tied node at the same time, as if the current one stays,
// which most do, and keeps that result only when it does.
func (w *planWork) untieAll(c Cluster, current map[string]Candidate) bool {
	for first := true; w.untie >= 0; first = false {
		if !c.pace.next(first) {
			return false
		}
		if !w.tied[w.set[w.untie]] {
			w.untie--
			continue
		}
		set := w.members(current)
		without := slices.Delete(slices.Clone(set), w.untie, w.untie+1)
		ahead := w.untie - 1
		for ahead >= 0 && !w.tied[w.set[ahead]] {
			ahead--
		}
		if c.spare == nil || ahead < 0 {
			if d, ok := estimate(c, without); ok && d.Savings > w.saved-savingsEpsilon {
				w.set = slices.Delete(w.set, w.untie, w.untie+1)
				w.saved = d.Savings
			}
			w.untie--
			continue
		}
		withoutAhead := slices.Delete(slices.Clone(set), ahead, ahead+1)
		d, ok, dAhead, okAhead := c.both(without, withoutAhead)
		if ok && d.Savings > w.saved-savingsEpsilon {
			w.set = slices.Delete(w.set, w.untie, w.untie+1)
			w.saved = d.Savings
			w.untie--
			continue
		}
		if okAhead && dAhead.Savings > w.saved-savingsEpsilon {
			w.set = slices.Delete(w.set, ahead, ahead+1)
			w.saved = dAhead.Savings
		}
		w.untie = ahead - 1
	}
	return true
}
