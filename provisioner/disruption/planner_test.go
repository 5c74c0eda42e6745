package disruption

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// carried is what a decision does, compared across ways of making it.
type carried struct {
	Originals []string
	Rest      []string
	Savings   float64
}

func carriedOf(d Decision, ok bool) carried {
	if !ok {
		return carried{}
	}
	return carried{Originals: nodeNames(d.Originals), Rest: d.Rest, Savings: d.Savings}
}

// planInPasses runs a Planner, one step of the plan a pass, until it decides or has no
// plan; view gives each pass's view of the cluster. It returns the decision and the passes.
func planInPasses(t *testing.T, view func(pass int) Cluster, budget Budget) (Decision, bool, int) {
	t.Helper()
	opts := DefaultOptions
	opts.PassTime = time.Nanosecond
	var p Planner
	for pass := 1; pass <= 5000; pass++ {
		d, ok := p.Decide(view(pass), budget, opts)
		if ok || !p.Planning() {
			return d, ok, pass
		}
	}
	t.Fatal("no decision after 5000 passes")
	return Decision{}, false, 0
}

// underused is webmix 400 provisioned ten pods at a time with two pods of three deleted
// since, and the nodes left empty removed: consolidation's to plan.
func underused(t *testing.T) *simCluster {
	s, _, _ := scaledDown(t, scaleDownCase{shape: "webmix", from: 400, batch: 10, keep: func(i int) bool { return i%3 == 0 }})
	for name, n := range s.nodes {
		if len(n.movable()) == 0 {
			delete(s.nodes, name)
		}
	}
	return s
}

// TestAPlanCarriedAcrossPassesDecidesAsOnePass: a plan made a step a pass, on a cluster
// that does not change meanwhile, decides what the plan made in one pass does.
func TestAPlanCarriedAcrossPassesDecidesAsOnePass(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a scale-down of hundreds of pods")
	}
	s := underused(t)
	budget := s.defaultBudget()
	want := carriedOf(Decide(s.view(), budget, DefaultOptions))
	if len(want.Originals) == 0 {
		t.Fatal("the scale-down left nothing to consolidate")
	}
	d, ok, passes := planInPasses(t, func(int) Cluster { return s.view() }, budget)
	if diff := cmp.Diff(want, carriedOf(d, ok)); diff != "" {
		t.Errorf("decision made over %d passes, against one pass (-want +got):\n%s", passes, diff)
	}
	if passes < 10 {
		t.Errorf("the plan took %d passes of one step each, want many", passes)
	}
}

// TestAPlanCarriedOnLeavesOutNodesNoLongerCandidates: a node of the plan under way that
// stops being a candidate between passes (it now holds moved pods, or was cordoned) is
// neither taken away now nor kept for later.
func TestAPlanCarriedOnLeavesOutNodesNoLongerCandidates(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a scale-down of hundreds of pods")
	}
	s := underused(t)
	budget := s.defaultBudget()
	opts := DefaultOptions
	opts.PassTime = time.Nanosecond
	var p Planner
	for p.work == nil || len(p.work.set) < 3 {
		if _, ok := p.Decide(s.view(), budget, opts); ok || !p.Planning() {
			t.Fatal("decided before the plan held three nodes")
		}
	}
	dropped := p.work.set[1].Node
	s.nodes[dropped].holdsMoved = true
	var d Decision
	ok := false
	for range 5000 {
		if d, ok = p.Decide(s.view(), budget, opts); ok || !p.Planning() {
			break
		}
	}
	if !ok {
		t.Fatal("no decision once the node left the plan")
	}
	if slices.Contains(nodeNames(d.Originals), dropped) || slices.Contains(d.Rest, dropped) {
		t.Errorf("node %s, no longer a candidate, is in the decision: now %v, later %v", dropped, nodeNames(d.Originals), d.Rest)
	}
}

// TestAPlanTakesAsManyStepsAtAnySize: a plan grows and unties its set in blocks (see
// planSteps), so the steps it takes, one a pass here, do not grow with its candidates: a
// cluster four times as large takes no more of them than planSteps for each stage allows.
func TestAPlanTakesAsManyStepsAtAnySize(t *testing.T) {
	if testing.Short() {
		t.Skip("plans scale-downs of thousands of pods")
	}
	for _, pods := range []int{600, 2400} {
		s, _, _ := scaledDown(t, scaleDownCase{shape: "webmix", from: pods, batch: pods / 40, keep: func(i int) bool { return i%3 == 0 }})
		for name, n := range s.nodes {
			if len(n.movable()) == 0 {
				delete(s.nodes, name)
			}
		}
		view := s.view()
		_, candidates := forConsolidation(view)
		if pods > 600 && len(candidates) <= 2*planSteps {
			t.Fatalf("webmix %d left %d candidates, want more than %d to weigh in blocks", pods, len(candidates), 2*planSteps)
		}
		d, ok, passes := planInPasses(t, func(int) Cluster { return s.view() }, s.defaultBudget())
		if !ok {
			t.Fatalf("webmix %d: no decision", pods)
		}
		// A pass each step of growing and of untying, and the pass that takes the decision.
		if limit := 2*planSteps + 1; passes > limit {
			t.Errorf("webmix %d (%d candidates): the plan took %d passes of one step, want at most %d", pods, len(candidates), passes, limit)
		}
		t.Logf("webmix %d: %d candidates, %d passes, %d nodes now and %d later", pods, len(candidates), passes, len(d.Originals), len(d.Rest))
	}
}
