package top

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
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
	got := nodePrices(Build(nodes, nil, testPrices, overlays, nil))
	want := map[string]float64{"a": 0.06, "b": 0.05, "c": 0.1}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("node prices (-want +got):\n%s", diff)
	}
}

// TestBuildAddsWhatNodeClaimsPayBesidesTheirInstance adds, to the price of each NodeClaim's
// node, its volumes, public IPv4 and monitoring: as launched, or as planned until then.
func TestBuildAddsWhatNodeClaimsPayBesidesTheirInstance(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("a", "general", "m5.large", "us-east-1a", "spot", "2", "8Gi", true),
		testNode("b", "general", "m5.large", "us-east-1a", "spot", "2", "8Gi", true),
		testNode("c", "general", "c5.xlarge", "us-east-1b", "on-demand", "4", "8Gi", true),
	}
	claim := func(node, planned string, launched *karpv1.Price) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{NodeName: node, Price: launched}}
		if planned != "" {
			nc.Annotations = map[string]string{cloudprovider.PlannedPriceAnnotationKey: planned}
		}
		return nc
	}
	claims := []karpv1.NodeClaim{
		claim("a", "", &karpv1.Price{PerHour: "0.057192", Instance: "0.05", Volumes: "0.002192", PublicIPv4: "0.005"}),
		claim("b", `{"instance":0.04,"volumes":0.002192,"publicIPv4":0,"monitoring":0.0029,"daemonSets":0.01}`, nil),
		claim("", `{"instance":0.04,"volumes":1,"publicIPv4":0,"monitoring":0,"daemonSets":0}`, nil), // not launched: no node
	}
	got := nodePrices(Build(nodes, nil, testPrices, nil, claims))
	// The instance prices are the catalog's (m5.large spot 0.05, c5.xlarge 0.17); c has no NodeClaim.
	want := map[string]float64{"a": 0.057192, "b": 0.055092, "c": 0.17}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("node prices (-want +got):\n%s", diff)
	}
}

// nodePrices are the model's node prices by node name.
func nodePrices(m Model) map[string]float64 {
	out := map[string]float64{}
	for _, p := range m.NodePools {
		for _, n := range p.Nodes {
			out[n.Name] = n.PricePerHour
		}
	}
	return out
}
