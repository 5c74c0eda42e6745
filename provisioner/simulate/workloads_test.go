package simulate_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// TestRunGeneratedWorkload plans a benchmark workload of test/workloads with the embedded
// catalog.
func TestRunGeneratedWorkload(t *testing.T) {
	path, workload := generated(t, "diverse", 200)
	cat, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(workload, &list); err != nil {
		t.Fatalf("reading the workload: %v", err)
	}
	var pending, pools []string
	for _, item := range list.Items {
		switch item.Kind {
		case "Pod":
			pending = append(pending, item.Metadata.Namespace+"/"+item.Metadata.Name)
		case "NodePool":
			pools = append(pools, item.Metadata.Name)
		}
	}
	if len(pending) != 200 {
		t.Fatalf("the workload has %d pods, want 200", len(pending))
	}
	out, _ := simulate.RunDecoded(t, "-f", path)
	simulate.CheckPlan(t, out, pending, pools, nil, cat)
	if len(out.NodeClaims) == 0 {
		t.Error("no NodeClaims for 200 pending pods")
	}
}

// TestRunWholeNodePlansCostNoMoreThanInstancePlans plans the benchmark workloads with the EKS
// DaemonSets in subnets that give each node a public address, once by whole node prices and
// once by instance prices as Karpenter ranks offerings, and prices both plans whole: the
// first must place every pod the second places and cost no more.
func TestRunWholeNodePlansCostNoMoreThanInstancePlans(t *testing.T) {
	for _, w := range []struct {
		shape string
		pods  int
	}{{"diverse", 1000}, {"webmix", 1000}, {"tiny", 3000}} {
		t.Run(fmt.Sprintf("%s %d", w.shape, w.pods), func(t *testing.T) {
			path, _ := generated(t, w.shape, w.pods)
			flags := []string{"-f", path, "--eks-daemonsets", "--public-subnets"}
			whole, _ := simulate.RunDecoded(t, flags...)
			instance, _ := simulate.RunDecoded(t, append(flags, "--price-instances-only")...)
			if len(whole.Unschedulable) > len(instance.Unschedulable) {
				t.Errorf("planned by whole node prices, %d pods unschedulable; by instance prices, %d", len(whole.Unschedulable), len(instance.Unschedulable))
			}
			if whole.TotalPricePerHour > instance.TotalPricePerHour {
				t.Errorf("planned by whole node prices: $%.4f/h on %d nodes; by instance prices: $%.4f/h on %d nodes, less", whole.TotalPricePerHour, whole.Nodes, instance.TotalPricePerHour, instance.Nodes)
			}
			if instance.RankedBy != "instancePrices" {
				t.Errorf("--price-instances-only: rankedBy %q, want instancePrices", instance.RankedBy)
			}
			t.Logf("whole node prices: $%.4f/h, %d nodes, ranked by %s; instance prices: $%.4f/h, %d nodes", whole.TotalPricePerHour, whole.Nodes, whole.RankedBy, instance.TotalPricePerHour, instance.Nodes)
		})
	}
}

// generated writes a workload of test/workloads to a file, and returns its path and
// content.
func generated(t *testing.T, shape string, pods int) (string, []byte) {
	t.Helper()
	var workload bytes.Buffer
	if err := workloads.Write(&workload, shape, pods, workloads.DefaultSeed); err != nil {
		t.Fatalf("generating the workload: %v", err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.json", shape, pods))
	if err := os.WriteFile(path, workload.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, workload.Bytes()
}
