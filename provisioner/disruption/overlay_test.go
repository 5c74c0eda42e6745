package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
)

// TestConsolidationWeighsOverlaidPrices checks that consolidation prices nodes and their
// replacements with the NodeOverlays applied, as the controller reads instance types
// through them: a node of the cheapest type stays, and is replaced once an overlay makes its
// type dearer than a larger one.
func TestConsolidationWeighsOverlaidPrices(t *testing.T) {
	all := func(string, karpv1.DisruptionReason) int { return 10 }
	tests := []struct {
		name     string
		overlays []v1alpha1.NodeOverlay
		want     *summary
	}{
		{name: "without overlay the small node is the cheapest there is"},
		{
			name: "an overlay making small nodes dear replaces it with a large one",
			overlays: []v1alpha1.NodeOverlay{{
				ObjectMeta: metav1.ObjectMeta{Name: "small-licence"},
				Spec: v1alpha1.NodeOverlaySpec{
					Requirements:    []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"small.xlarge"}}},
					PriceAdjustment: ptr.To("+1"),
				},
			}},
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"n"}, Replacements: []string{"spot large.4xlarge"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := decideCluster(node{name: "n", instanceType: "small.xlarge", capacityType: "spot", pods: []string{"3"}})
			pool := &c.NodePools[0]
			pool.InstanceTypes = overlay.Apply(tt.overlays, pool.NodePool.Name, pool.InstanceTypes).InstanceTypes
			for i := range c.Candidates {
				c.Candidates[i].Price = offeringPrice(pool, c.Nodes[i].Node.Labels)
			}
			got := summarize(Decide(c, all, DefaultOptions))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}
