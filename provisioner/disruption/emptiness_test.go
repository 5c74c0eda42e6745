package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// TestDecideEmpty: empty nodes go as their budget for emptiness allows.
func TestDecideEmpty(t *testing.T) {
	testDecide(t, []decideCase{
		{
			name:   "no budget: nothing happens",
			nodes:  []node{{name: "idle", instanceType: "small.xlarge", capacityType: "on-demand"}},
			budget: func(string, karpv1.DisruptionReason) int { return 0 },
		},
	})
}

func TestEmptyNodeIsRemovedAndDoNotDisruptHolds(t *testing.T) {
	f := newFixture(t, "empty")
	f.node("idle", "small.xlarge")
	f.node("pinned", "small.xlarge", "100m")
	f.pods[f.prefix+"-pinned"][0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	f.pass()
	if diff := cmp.Diff(map[string]string{"idle": "deleted", "pinned": "kept"}, f.state("idle", "pinned")); diff != "" {
		t.Errorf("after a pass (-want +got):\n%s", diff)
	}
}
