package e2e

import (
	"testing"

	"github.com/tailor-autoscaler/tailor/test/scenario"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// TestDemoPodsLandWhereTheyWereNominated runs the demo and checks the contract between
// the plugin and the sidecar: every pod was nominated to the node of a NodeClaim planned
// for it, and then bound to exactly that node.
func TestDemoPodsLandWhereTheyWereNominated(t *testing.T) {
	e := startStack(t)
	result, err := scenario.Demo(e.ctx, e.stack, testenv.Root(), testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if result.Running != result.Total || result.Total != 10 {
		t.Fatalf("%d/%d pods running on launched nodes, want 10/10", result.Running, result.Total)
	}
	plannedOn := map[string]string{}
	for _, n := range result.Nodes {
		if n.Node == "" || n.InstanceType == "" || n.PricePerHour <= 0 {
			t.Errorf("NodeClaim %s has node %q, type %q, price %v: want all set", n.NodeClaim, n.Node, n.InstanceType, n.PricePerHour)
		}
		for _, p := range n.PlannedPods {
			plannedOn[p] = n.Node
		}
	}
	for _, p := range result.Pods {
		switch {
		case p.Nominated == "":
			t.Errorf("pod %s was bound to %s without being nominated first", p.Name, p.Node)
		case p.Nominated != p.Node:
			t.Errorf("pod %s was nominated to %s but bound to %s", p.Name, p.Nominated, p.Node)
		case plannedOn[p.Name] != p.Node:
			t.Errorf("pod %s was bound to %s, but planned onto the NodeClaim of %q", p.Name, p.Node, plannedOn[p.Name])
		}
	}
	if result.PricePerHour <= 0 {
		t.Errorf("total price %v, want positive", result.PricePerHour)
	}
}
