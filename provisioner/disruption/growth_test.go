package disruption

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	simulation "github.com/tailor-autoscaler/tailor/provisioner/simulate"
	"github.com/tailor-autoscaler/tailor/test/benchout"
)

// growthPoint is one row of the consolidation growth curve, as make bench-consolidation
// writes it to _output/bench/consolidation.json.
type growthPoint struct {
	Workload string `json:"workload"`
	// DaemonSets names the DaemonSets every node runs: "eks" for the EKS add-ons', empty
	// for none.
	DaemonSets string `json:"daemonSets,omitempty"`
	// Nodes and Pods are the cluster's when consolidation starts: the scaled-down
	// workload's pods on the nodes that still run some.
	Nodes int `json:"nodes"`
	Pods  int `json:"pods"`
	// Passes are made as the controller makes them, each planning for
	// DefaultOptions.PassTime at most. FirstDecisionSeconds is the time of the passes up to
	// the first decision, which plans over every node; LaterPassSeconds the median of the
	// passes after it, MaxLaterPassSeconds the slowest of them, and MaxPassSeconds the
	// slowest of all; MaxDecisionSeconds is the most time the passes between two decisions
	// took together (a plan made anew once one is used up).
	FirstDecisionSeconds float64 `json:"firstDecisionSeconds"`
	LaterPassSeconds     float64 `json:"laterPassSeconds"`
	MaxLaterPassSeconds  float64 `json:"maxLaterPassSeconds"`
	MaxPassSeconds       float64 `json:"maxPassSeconds"`
	MaxDecisionSeconds   float64 `json:"maxDecisionSeconds"`
	Passes               int     `json:"passes"`
	Decisions            int     `json:"decisions"`
	// CostVsFresh is the hourly cost once consolidation converges, over a fresh plan of the
	// pods left.
	CostVsFresh  float64 `json:"costVsFresh"`
	ConvergeSecs float64 `json:"convergeSeconds"`
}

// BenchmarkConsolidationGrowth measures how consolidation's cost grows with the cluster:
// per workload and size, it provisions the workload a hundredth at a time (as pods arrive
// over time), deletes two pods of every three, removes the nodes left empty, and
// consolidates until no decision is left. NODES lists the sizes, as the nodes left once
// the pods are deleted (default 500,1000,2500,5000; the workload's size is chosen to land
// near them), SHAPES the workloads (default webmix,diverse), DECISIONS caps the decisions,
// DAEMONSETS=eks runs the EKS add-ons' DaemonSets on every node; BENCH_JSON names the file
// the rows are written to.
func BenchmarkConsolidationGrowth(b *testing.B) {
	sizes := envInts(b, "NODES", []int{500, 1000, 2500, 5000})
	shapes := strings.Split(envOr("SHAPES", "webmix,diverse"), ",")
	limit := envInts(b, "DECISIONS", []int{5000})[0]
	var daemonSets []*appsv1.DaemonSet
	switch ds := os.Getenv("DAEMONSETS"); ds {
	case "":
	case "eks":
		daemonSets = simulation.EKSDaemonSets()
	default:
		b.Fatalf("DAEMONSETS=%q: want eks (the EKS add-ons' DaemonSets on every node) or nothing", ds)
	}
	var rows []growthPoint
	for _, shape := range shapes {
		perNode, ok := podsPerNode[shape]
		if !ok {
			b.Fatalf("SHAPES: %q is not one of webmix, diverse", shape)
		}
		for _, nodes := range sizes {
			b.Run(fmt.Sprintf("%s/%d", shape, nodes), func(b *testing.B) {
				row := growth(b, shape, nodes*perNode, limit, daemonSets)
				rows = append(rows, row)
				b.ReportMetric(float64(row.Nodes), "nodes")
				b.ReportMetric(row.FirstDecisionSeconds, "first-s")
				b.ReportMetric(row.LaterPassSeconds, "later-s")
				b.ReportMetric(row.CostVsFresh, "x-fresh")
			})
		}
	}
	fmt.Printf("\n%-8s %6s %6s %10s %10s %10s %9s %12s %7s %9s %8s\n", "workload", "nodes", "pods", "first (s)", "later (s)", "max later", "max pass", "max decision", "passes", "decisions", "x fresh")
	for _, r := range rows {
		fmt.Printf("%-8s %6d %6d %10.2f %10.3f %10.3f %9.3f %12.2f %7d %9d %8.3f\n", r.Workload, r.Nodes, r.Pods, r.FirstDecisionSeconds, r.LaterPassSeconds, r.MaxLaterPassSeconds, r.MaxPassSeconds, r.MaxDecisionSeconds, r.Passes, r.Decisions, r.CostVsFresh)
	}
	benchout.Write(b, rows)
}

// podsPerNode is about how many pods of each workload make a node once two of three are
// deleted and the nodes left empty removed.
var podsPerNode = map[string]int{"webmix": 8, "diverse": 4}

func growth(b *testing.B, shape string, pods, limit int, daemonSets []*appsv1.DaemonSet) growthPoint {
	s, kept, _ := scaledDown(b, scaleDownCase{shape: shape, from: pods, batch: max(pods/100, 1), keep: func(i int) bool { return i%3 == 0 }, daemonSets: daemonSets})
	for name, n := range s.nodes {
		if len(n.movable()) == 0 {
			delete(s.nodes, name)
		}
	}
	row := growthPoint{Workload: shape, Nodes: len(s.nodes), Pods: len(kept)}
	if len(daemonSets) > 0 {
		row.DaemonSets = os.Getenv("DAEMONSETS")
	}
	var later []float64
	moves := map[string]int{}
	var planner Planner
	start := time.Now()
	sinceDecision := 0.0
	for row.Decisions < limit {
		view := s.view()
		began := time.Now()
		d, ok := planner.Decide(view, s.defaultBudget(), DefaultOptions)
		took := time.Since(began).Seconds()
		row.Passes++
		row.MaxPassSeconds = max(row.MaxPassSeconds, took)
		sinceDecision += took
		if row.Decisions == 0 {
			row.FirstDecisionSeconds += took
		} else {
			later = append(later, took)
		}
		if !ok && planner.Planning() {
			continue
		}
		row.MaxDecisionSeconds = max(row.MaxDecisionSeconds, sinceDecision)
		sinceDecision = 0
		if !ok {
			break
		}
		row.Decisions++
		planner.Launched(d, s.apply(b, d, moves))
	}
	row.ConvergeSecs = time.Since(start).Seconds()
	slices.Sort(later)
	if len(later) > 0 {
		row.LaterPassSeconds = later[len(later)/2]
		row.MaxLaterPassSeconds = later[len(later)-1]
	}
	fresh := packing.Solve(packing.Input{Pods: kept, NodePools: s.in.NodePools, DaemonSets: s.in.DaemonSets})
	row.CostVsFresh = s.cost() / fresh.PricePerHour()
	return row
}

// apply carries out a decision on the cluster in memory: the originals go, their pods land
// where the decision placed them, and the plan's rest is remembered as the controller does.
// It returns the NodeClaims launched for the decision's replacements.
func (s *simCluster) apply(t testing.TB, d Decision, moves map[string]int) []string {
	t.Helper()
	s.rest = map[string]bool{}
	for _, n := range d.Rest {
		s.rest[n] = true
	}
	for _, o := range d.Originals {
		for _, p := range o.Pods {
			moves[p.Name]++
		}
		delete(s.nodes, o.Node)
	}
	for _, pl := range d.Placements {
		target := s.nodes[pl.Node.Node.Name]
		target.holdsMoved = true
		s.bind(target, pl.Pods)
	}
	return s.launch(t, movedOnly(d), true)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInts(tb testing.TB, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			tb.Fatalf("%s=%q: %q is not a number", name, v, f)
		}
		out = append(out, n)
	}
	return out
}
