package simulate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func pod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func instanceTypes(names ...string) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, len(names))
	for i, name := range names {
		out[i] = &cloudprovider.InstanceType{Name: name}
	}
	return out
}

func TestRenderGolden(t *testing.T) {
	general := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	gpu := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	node := &packing.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-1"}}}
	tests := []struct {
		name   string
		plan   packing.Plan
		golden string
	}{
		{
			name: "new NodeClaims, existing nodes and unschedulable pods",
			plan: packing.Plan{
				NewNodeClaims: []packing.NewNodeClaim{
					{
						NodePool: general, Pods: []*corev1.Pod{pod("default", "web-1-0"), pod("default", "web-1-1")},
						Cheapest: packing.Choice{InstanceType: "m7g.xlarge", Zone: "us-east-1b", CapacityType: "spot", Price: 0.07123,
							Parts: cloudprovider.PriceParts{Instance: 0.0632, Volumes: 0.00219, PublicIPv4: 0.005, DaemonSets: 0.00084}},
						InstanceTypes: instanceTypes("m7g.xlarge", "m6g.xlarge", "c7g.2xlarge"),
					},
					{
						NodePool: gpu, Pods: []*corev1.Pod{pod("ml", "inference-0")},
						Cheapest:         packing.Choice{InstanceType: "g5.xlarge", Zone: "us-east-1a", CapacityType: "on-demand", Price: 1.00604},
						InstanceTypes:    instanceTypes("g5.xlarge"),
						MinValuesRelaxed: true,
					},
				},
				Existing:               []packing.Placement{{Node: node, Pods: []*corev1.Pod{pod("default", "a"), pod("kube-system", "b")}}},
				Unschedulable:          []packing.Unschedulable{{Pod: pod("default", "big"), Reason: "no instance type has 512 cpu"}},
				RankedByInstancePrices: true,
			},
			golden: "render.golden.json",
		},
		{
			name:   "empty plan",
			golden: "render-empty.golden.json",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got bytes.Buffer
			if err := Render(tt.plan, 0.0420004).Write(&got, true); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading the golden file (go test -update writes it): %v", err)
			}
			if diff := cmp.Diff(string(want), got.String()); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteCompact(t *testing.T) {
	var got bytes.Buffer
	if err := Render(packing.Plan{}, 1.5).Write(&got, false); err != nil {
		t.Fatal(err)
	}
	want := `{"nodeClaims":[],"unschedulable":[],"totalPricePerHour":0,"nodes":0,"solveSeconds":1.5,"rankedBy":"wholeNodePrices"}` + "\n"
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("Write() (-want +got):\n%s", diff)
	}
}
