package e2e

import (
	"context"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/test/localstack"
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
	onNodes := 0
	for _, n := range result.Nodes {
		onNodes += len(n.Pods)
	}
	if onNodes != result.Total {
		t.Errorf("the nodes' table lists %d running pods, want all %d", onNodes, result.Total)
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
	// Each node's status.price is its instance as EC2 bills it, the DaemonSets' share
	// included, plus the AL2023 root volume (20Gi of gp3) and any public address.
	for _, n := range result.Nodes {
		p := n.Price
		if p == nil {
			t.Errorf("NodeClaim %s has no status.price", n.NodeClaim)
			continue
		}
		parts, err := cloudprovider.PartsOf(p)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(parts.Instance+parts.DaemonSets-n.PricePerHour) > 1e-6 || p.Volumes != "0.002192" || math.Abs(parts.Total()-n.NodePricePerHour) > 1e-6 {
			t.Errorf("NodeClaim %s: status.price %+v; want its instance's $%.6f/hour, 20Gi of gp3 ($0.002192) and parts summing to perHour", n.NodeClaim, *p, n.PricePerHour)
		}
	}
	checkMetrics(t, e.stack.ProvisionerMetricsURL, len(result.Nodes), result.Total)
}

// checkMetrics scrapes the provisioner and checks that its metrics tell the demo's story:
// every NodeClaim created, launched and initialized, every pod planned onto a new one and
// bound, plans timed, and the scheduler plugin's calls counted.
func checkMetrics(t *testing.T, url string, nodeClaims, pods int) {
	t.Helper()
	metrics, err := localstack.ScrapeMetrics(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	sum := metrics.Sum
	want := map[string]float64{
		"tailor_nodeclaims_created_total":                          float64(nodeClaims),
		"tailor_nodeclaims_launched_total":                         float64(nodeClaims),
		"tailor_nodeclaims_initialized_total":                      float64(nodeClaims),
		"planned_pods_total{result=new_nodeclaim}":                 float64(pods),
		"pod_bound_seconds (samples)":                              float64(pods),
		"plan_duration_seconds (samples) at least one":             1,
		"grpc SubmitPods handled OK at least once":                 1,
		"tailor_nodepool_usage{nodepool=general,resource=cpu} > 0": 1,
	}
	got := map[string]float64{
		"tailor_nodeclaims_created_total":                          sum("tailor_nodeclaims_created_total", nil),
		"tailor_nodeclaims_launched_total":                         sum("tailor_nodeclaims_launched_total", nil),
		"tailor_nodeclaims_initialized_total":                      sum("tailor_nodeclaims_initialized_total", nil),
		"planned_pods_total{result=new_nodeclaim}":                 sum("tailor_provisioner_planned_pods_total", map[string]string{"result": "new_nodeclaim"}),
		"pod_bound_seconds (samples)":                              sum("tailor_provisioner_pod_bound_seconds", nil),
		"plan_duration_seconds (samples) at least one":             min(1, sum("tailor_provisioner_plan_duration_seconds", nil)),
		"grpc SubmitPods handled OK at least once":                 min(1, sum("grpc_server_handled_total", map[string]string{"grpc_method": "SubmitPods", "grpc_code": "OK"})),
		"tailor_nodepool_usage{nodepool=general,resource=cpu} > 0": min(1, sum("tailor_nodepool_usage", map[string]string{"nodepool": "general", "resource": "cpu"})),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provisioner metrics (-want +got):\n%s", diff)
	}
}
