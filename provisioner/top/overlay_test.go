package top

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
)

func TestBuildPricesNodesWithOverlays(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("a", "general", "m5.large", "us-east-1a", "spot", "2", "8Gi", true),
		testNode("b", "batch", "m5.large", "us-east-1a", "spot", "2", "8Gi", true),
		testNode("c", "general", "c5.xlarge", "us-east-1b", "on-demand", "4", "8Gi", true),
	}
	overlays := []v1alpha1.NodeOverlay{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "general-spot"},
			Spec: v1alpha1.NodeOverlaySpec{
				Requirements: []corev1.NodeSelectorRequirement{
					{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpIn, Values: []string{"general"}},
					{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
				},
				PriceAdjustment: ptr.To("+0.01"),
			},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "c5"}, Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.xlarge"}}},
			Price:        ptr.To("0.1"),
		}},
	}
	m := Build(nodes, nil, testPrices, overlays)
	got := map[string]float64{}
	for _, p := range m.NodePools {
		for _, n := range p.Nodes {
			got[n.Name] = n.PricePerHour
		}
	}
	want := map[string]float64{"a": 0.06, "b": 0.05, "c": 0.1}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 })); diff != "" {
		t.Errorf("node prices (-want +got):\n%s", diff)
	}
}
