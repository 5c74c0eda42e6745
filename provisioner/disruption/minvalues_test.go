package disruption

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// replacementFamilies is what the minValues tests compare of a replacement.
type replacementFamilies struct {
	Families  []string
	MinValues int
	Relaxed   bool
}

func TestReplacementsKeepMinValues(t *testing.T) {
	// A drifted big node running a 5-CPU pod: big.2xlarge and large.4xlarge can take it,
	// small.xlarge cannot, so two families are there for a replacement.
	drifted := node{name: "old", instanceType: "big.2xlarge", capacityType: "on-demand", drifted: true, pods: []string{"5"}}
	tests := []struct {
		name      string
		minValues int
		policy    packing.MinValuesPolicy
		// want is nil when no replacement may be chosen.
		want *replacementFamilies
	}{
		{
			name:      "the replacement lists as many families as minValues asks",
			minValues: 2,
			want:      &replacementFamilies{Families: []string{"big", "large"}, MinValues: 2},
		},
		{
			name:      "Strict: with fewer families than minValues no replacement is chosen",
			minValues: 3,
		},
		{
			name:      "BestEffort: the replacement lowers minValues to the families there are",
			minValues: 3,
			policy:    packing.MinValuesBestEffort,
			want:      &replacementFamilies{Families: []string{"big", "large"}, MinValues: 2, Relaxed: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := decideCluster(drifted)
			c.MinValuesPolicy = tt.policy
			np := c.NodePools[0].NodePool
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.InstanceFamilyLabelKey, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(tt.minValues)},
			}
			for _, it := range c.NodePools[0].InstanceTypes {
				it.Labels[karpv1.InstanceFamilyLabelKey] = strings.Split(it.Name, ".")[0]
			}
			d, ok := Decide(c, func(string, karpv1.DisruptionReason) int { return 10 }, DefaultOptions)
			var got *replacementFamilies
			if ok {
				if len(d.Replacements) != 1 {
					t.Fatalf("decision %s of %v with %d replacements, want one", d.Reason, nodeNames(d.Originals), len(d.Replacements))
				}
				r := d.Replacements[0]
				got = &replacementFamilies{Relaxed: r.MinValuesRelaxed, MinValues: requirements.MinValues(r.Requirements)[karpv1.InstanceFamilyLabelKey]}
				seen := map[string]bool{}
				for _, it := range r.InstanceTypes {
					if f := it.Labels[karpv1.InstanceFamilyLabelKey]; !seen[f] {
						seen[f] = true
						got.Families = append(got.Families, f)
					}
				}
				sort.Strings(got.Families)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("replacement (-want +got):\n%s", diff)
			}
		})
	}
}
