package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
)

// TestDeletionCostsRankTheNodesAsConsolidationTakesThem: the lower a node's cost, the
// sooner its pods go in a scale-down: drifted nodes first, then those the plan under way
// takes later, then by the hourly price of the room their pods leave unused (in hundredths
// of a cent). Nodes consolidation leaves alone are unranked; empty nodes are left out.
func TestDeletionCostsRankTheNodesAsConsolidationTakesThem(t *testing.T) {
	type ranked struct {
		Name   string
		Ranked bool
		Cost   int32
		Pods   int
	}
	nodes := []node{
		// $0.20/hour, an eighth used: $0.175 of it idle.
		{name: "cheap", instanceType: "small.xlarge", capacityType: "on-demand", pods: []string{"500m"}},
		// $1/hour, a quarter used: $0.75 idle.
		{name: "dear", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1", "1"}},
		{name: "drifted", instanceType: "big.2xlarge", capacityType: "on-demand", drifted: true, pods: []string{"7"}},
		{name: "planned", instanceType: "big.2xlarge", capacityType: "on-demand", planned: true, pods: []string{"4"}},
		{name: "kept", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"1"}},
		{name: "empty", instanceType: "small.xlarge", capacityType: "on-demand"},
	}
	for _, tc := range []struct {
		name   string
		policy karpv1.ConsolidationPolicy
		want   []ranked
	}{
		{
			name: "WhenEmptyOrUnderutilized", policy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
			want: []ranked{
				{"cheap", true, -1750, 1}, {"dear", true, -7500, 2}, {"drifted", true, driftedCost, 1},
				{"kept", false, 0, 1}, {"planned", true, plannedCost, 1},
			},
		},
		{
			name: "WhenEmpty: only drift takes nodes with pods", policy: karpv1.ConsolidationPolicyWhenEmpty,
			want: []ranked{
				{"cheap", false, 0, 1}, {"dear", false, 0, 2}, {"drifted", true, driftedCost, 1},
				{"kept", false, 0, 1}, {"planned", false, 0, 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := decideCluster(nodes...)
			c.NodePools[0].NodePool.Spec.Disruption.ConsolidationPolicy = tc.policy
			var got []ranked
			for _, n := range deletionCosts(c) {
				got = append(got, ranked{n.Name, n.Ranked, n.Cost, len(n.Pods)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("deletion costs (-want +got):\n%s", diff)
			}
		})
	}
}

// steering records the rankings it is given.
type steering struct{ rankings [][]deletioncost.Node }

func (s *steering) Steer(nodes []deletioncost.Node) { s.rankings = append(s.rankings, nodes) }

// TestAPassSteersScaleDownsByItsView: each pass hands the steering its ranking, even one
// whose budgets let it disrupt nothing.
func TestAPassSteersScaleDownsByItsView(t *testing.T) {
	f := newFixture(t, "steered")
	f.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	if err := kube.Update(f.ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	s := &steering{}
	f.ctrl.opts.DeletionCosts = s
	f.node("half", "big.2xlarge", "4")
	f.node("little", "big.2xlarge", "1")
	f.pass()
	type ranked struct {
		Name   string
		Ranked bool
		Cost   int32
	}
	var got [][]ranked
	for _, nodes := range s.rankings {
		var pass []ranked
		for _, n := range nodes {
			pass = append(pass, ranked{n.Name, n.Ranked, n.Cost})
		}
		got = append(got, pass)
	}
	// $1/hour nodes, half and an eighth of their CPU used.
	want := [][]ranked{{{"steered-half", true, -5000}, {"steered-little", true, -8750}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rankings (-want +got):\n%s", diff)
	}
}
