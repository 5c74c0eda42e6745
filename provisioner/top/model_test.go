package top

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var testPrices = CatalogPrices{
	priceKey("m5.large", "us-east-1a", "spot"):       0.05,
	priceKey("m5.large", "", "on-demand"):            0.096,
	priceKey("c5.xlarge", "us-east-1b", "on-demand"): 0.17,
}

const gi = 1 << 30

func testNode(name, pool, typ, zone, capacityType, cpu, memory string, ready bool) *corev1.Node {
	labels := map[string]string{}
	for k, v := range map[string]string{
		"karpenter.sh/nodepool": pool, corev1.LabelInstanceTypeStable: typ,
		corev1.LabelTopologyZone: zone, "karpenter.sh/capacity-type": capacityType,
	} {
		if v != "" {
			labels[k] = v
		}
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

func testPod(name, node, cpu, memory string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name:      "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}},
		}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		want  Model
	}{
		{
			name: "empty cluster",
			want: Model{},
		},
		{
			name: "nodes grouped by NodePool, priced by type, zone and capacity type, requests summed",
			nodes: []*corev1.Node{
				testNode("b", "general", "m5.large", "us-east-1a", "spot", "2", "8Gi", true),
				testNode("a", "general", "c5.xlarge", "us-east-1b", "on-demand", "4", "8Gi", false),
				testNode("static", "", "m5.large", "", "", "2", "8Gi", true),
			},
			pods: []*corev1.Pod{
				testPod("p1", "b", "500m", "1Gi", corev1.PodRunning),
				testPod("p2", "b", "1", "2Gi", corev1.PodRunning),
				testPod("done", "b", "1", "1Gi", corev1.PodSucceeded),
				testPod("p3", "a", "250m", "1Gi", corev1.PodPending),
				testPod("pending", "", "1", "1Gi", corev1.PodPending),
				testPod("failed", "", "1", "1Gi", corev1.PodFailed),
			},
			want: Model{
				NodePools: []NodePool{
					{
						Name: "general",
						Nodes: []Node{
							{Name: "a", InstanceType: "c5.xlarge", Zone: "us-east-1b", CapacityType: "on-demand", PricePerHour: 0.17, PriceKnown: true,
								Resources: Resources{CPURequested: 250, CPUAllocatable: 4000, MemoryRequested: gi, MemoryAllocatable: 8 * gi, Pods: 1}},
							{Name: "b", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", PricePerHour: 0.05, PriceKnown: true, Ready: true,
								Resources: Resources{CPURequested: 1500, CPUAllocatable: 2000, MemoryRequested: 3 * gi, MemoryAllocatable: 8 * gi, Pods: 2}},
						},
						Totals: Totals{Nodes: 2, PricePerHour: 0.22, Resources: Resources{CPURequested: 1750, CPUAllocatable: 6000, MemoryRequested: 4 * gi, MemoryAllocatable: 16 * gi, Pods: 3}},
					},
					{
						Nodes: []Node{{Name: "static", InstanceType: "m5.large", CapacityType: "on-demand", PricePerHour: 0.096, PriceKnown: true, Ready: true,
							Resources: Resources{CPUAllocatable: 2000, MemoryAllocatable: 8 * gi}}},
						Totals: Totals{Nodes: 1, PricePerHour: 0.096, Resources: Resources{CPUAllocatable: 2000, MemoryAllocatable: 8 * gi}},
					},
				},
				Cluster:     Totals{Nodes: 3, PricePerHour: 0.316, Resources: Resources{CPURequested: 1750, CPUAllocatable: 8000, MemoryRequested: 4 * gi, MemoryAllocatable: 24 * gi, Pods: 3}},
				PendingPods: 1,
			},
		},
		{
			name: "an unknown offering is unpriced and counted",
			nodes: []*corev1.Node{
				testNode("x", "batch", "m5.large", "us-east-1b", "spot", "2", "8Gi", true),
			},
			want: Model{
				NodePools: []NodePool{{
					Name:   "batch",
					Nodes:  []Node{{Name: "x", InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: "spot", Ready: true, Resources: Resources{CPUAllocatable: 2000, MemoryAllocatable: 8 * gi}}},
					Totals: Totals{Nodes: 1, UnpricedNodes: 1, Resources: Resources{CPUAllocatable: 2000, MemoryAllocatable: 8 * gi}},
				}},
				Cluster: Totals{Nodes: 1, UnpricedNodes: 1, Resources: Resources{CPUAllocatable: 2000, MemoryAllocatable: 8 * gi}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(tt.nodes, tt.pods, testPrices, nil, nil)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCatalogPrices(t *testing.T) {
	c, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p := NewCatalogPrices(c)
	tests := []struct {
		name                    string
		typ, zone, capacityType string
		want                    float64
		wantOK                  bool
	}{
		{name: "on-demand in a zone", typ: "m5.large", zone: "us-east-1a", capacityType: "on-demand", want: 0.096, wantOK: true},
		{name: "on-demand without a zone", typ: "m5.large", capacityType: "on-demand", want: 0.096, wantOK: true},
		{name: "spot is per zone", typ: "m5.large", zone: "us-east-1a", capacityType: "spot", want: 0.05501, wantOK: true},
		{name: "spot without a zone is unknown", typ: "m5.large", capacityType: "spot"},
		{name: "unknown type", typ: "x9.huge", zone: "us-east-1a", capacityType: "on-demand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := p.Price(tt.typ, tt.zone, tt.capacityType)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Price = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestRender draws the same cluster at a wide and a narrow terminal width.
func TestRender(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("ip-10-0-1-17.ec2.internal", "general", "m5.large", "us-east-1a", "spot", "1930m", "7187Mi", true),
		testNode("ip-10-0-2-4.ec2.internal", "general", "c5.xlarge", "us-east-1b", "on-demand", "3920m", "6803Mi", true),
		testNode("ip-10-0-3-250.ec2.internal", "batch", "m5.large", "us-east-1b", "spot", "1930m", "7187Mi", false),
		testNode("system-a", "", "t3.medium", "us-east-1a", "", "1930m", "3388Mi", true),
	}
	pods := []*corev1.Pod{
		testPod("web-1", "ip-10-0-1-17.ec2.internal", "1", "2Gi", corev1.PodRunning),
		testPod("web-2", "ip-10-0-1-17.ec2.internal", "500m", "1Gi", corev1.PodRunning),
		testPod("api-1", "ip-10-0-2-4.ec2.internal", "3", "4Gi", corev1.PodRunning),
		testPod("dns", "system-a", "100m", "70Mi", corev1.PodRunning),
		testPod("pending", "", "8", "1Gi", corev1.PodPending),
	}
	m := Build(nodes, pods, testPrices, nil, nil)
	for _, width := range []int{160, 100} {
		t.Run("width "+itoa(width), func(t *testing.T) {
			golden(t, "render-"+itoa(width)+".golden", Render(m, width))
		})
	}
	t.Run("empty", func(t *testing.T) {
		golden(t, "render-empty.golden", Render(Model{}, 120))
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

func golden(t *testing.T, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (go test -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", file, diff)
	}
}
