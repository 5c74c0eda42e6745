package packing_test

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// TestSnapshotPlansAsSolveDoes takes random nodes away from clusters the workloads built,
// holds others, and plans the pods of those taken away: a Snapshot's plan must be Solve's
// plan of the same input, round after round on one Snapshot, and its estimate Solve's plan
// ranked by whole node prices alone, which Solve keeps unless ranking by instance prices
// does better.
func TestSnapshotPlansAsSolveDoes(t *testing.T) {
	for _, shape := range []string{"diverse", "webmix"} {
		t.Run(shape, func(t *testing.T) {
			in := builtCluster(t, shape, 600, 60)
			snap := packing.NewSnapshot(in)
			rng := rand.New(rand.NewPCG(1, uint64(len(shape))))
			placed, launched, rankedByInstance := 0, 0, 0
			for round := range 25 {
				away, held := map[string]bool{}, map[string]bool{}
				var pods []*corev1.Pod
				for _, n := range in.Nodes {
					switch r := rng.IntN(20); {
					case r < 2:
						away[n.Node.Name] = true
						for _, p := range n.Pods {
							pending := p.DeepCopy()
							pending.Spec.NodeName = ""
							pods = append(pods, pending)
						}
					case r < 4:
						held[n.Node.Name] = true
					}
				}
				plan := snap.Solve(pods, away, held)
				got := workloads.Summarize(plan)
				fresh := without(in, pods, away, held)
				want := workloads.Summarize(packing.Solve(fresh))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("round %d, %d nodes away, %d held: Snapshot.Solve differs from Solve (-Solve +Snapshot):\n%s", round, len(away), len(held), diff)
				}
				// Estimate ranks offerings by whole node prices alone; Solve keeps that
				// plan unless the one ranked by instance prices places as many pods for less.
				fresh.WholePriceRankingOnly = true
				byWhole := packing.Solve(fresh)
				estimate := snap.Estimate(pods, away, held)
				if diff := cmp.Diff(priced(workloads.Summarize(byWhole)), priced(workloads.Summarize(estimate))); diff != "" {
					t.Fatalf("round %d: Snapshot.Estimate differs from Solve ranking by whole node prices alone (-Solve +Estimate):\n%s", round, diff)
				}
				if plan.RankedByInstancePrices {
					rankedByInstance++
					if p, w := plan.PricePerHour(), byWhole.PricePerHour(); p >= w || len(plan.Unschedulable) > len(byWhole.Unschedulable) {
						t.Fatalf("round %d: ranked by instance prices, $%.4f/h and %d pods unschedulable; by whole node prices, $%.4f/h and %d", round, p, len(plan.Unschedulable), w, len(byWhole.Unschedulable))
					}
				} else if diff := cmp.Diff(want, workloads.Summarize(byWhole)); diff != "" {
					t.Fatalf("round %d: Solve kept the plan ranked by whole node prices, but it differs from Solve ranking by them alone (-Solve +alone):\n%s", round, diff)
				}
				placed += len(plan.Existing)
				launched += len(plan.NewNodeClaims)
			}
			// Both halves of a plan were compared, and both rankings kept.
			if placed == 0 || launched == 0 {
				t.Errorf("over all rounds, %d placements on nodes and %d new NodeClaims; want some of each", placed, launched)
			}
			if rankedByInstance == 0 || rankedByInstance == 25 {
				t.Errorf("%d of 25 plans ranked by instance prices; want some, not all, to check both", rankedByInstance)
			}
			t.Logf("%d nodes; %d placements on nodes and %d new NodeClaims compared; %d of 25 plans ranked by instance prices", len(in.Nodes), placed, launched, rankedByInstance)
		})
	}
}

// without is in planning pods, less the nodes away, with those held unschedulable.
func without(in packing.Input, pods []*corev1.Pod, away, held map[string]bool) packing.Input {
	out := in
	out.Pods = pods
	out.Nodes = nil
	for _, n := range in.Nodes {
		if away[n.Node.Name] {
			continue
		}
		n.Schedulable = n.Schedulable && !held[n.Node.Name]
		out.Nodes = append(out.Nodes, n)
	}
	return out
}

// priced is a plan summary less what Estimate leaves out of new NodeClaims.
func priced(s workloads.PlanSummary) workloads.PlanSummary {
	out := s
	out.NewNodeClaims = nil
	for _, c := range s.NewNodeClaims {
		out.NewNodeClaims = append(out.NewNodeClaims, workloads.ClaimSummary{NodePool: c.NodePool, Cheapest: c.Cheapest, Pods: c.Pods})
	}
	return out
}

// builtCluster plans a workload's pods batch by batch onto the nodes the earlier batches
// launched, and returns the cluster they make (the pods bound), with no pods to plan.
func builtCluster(t testing.TB, shape string, pods, batch int) packing.Input {
	t.Helper()
	in := workloads.Load(t, shape, pods)
	all := in.Pods
	in.Pods = nil
	cluster := workloads.NewCluster()
	for i := 0; i < len(all); i += batch {
		round := in
		round.Pods = all[i:min(i+batch, len(all))]
		round.Nodes = cluster.Nodes
		if _, err := cluster.Apply(packing.Solve(round)); err != nil {
			t.Fatal(err)
		}
	}
	in.Nodes = cluster.Nodes
	return in
}
