package packing

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

const tierLabel = "example.com/tier"

// familyCatalog has 65 cheap types of family m (tier silver), then two of family c (tier
// gold), two of family r with more memory (tier bronze) and one of family x with no tier.
func familyCatalog() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	add := func(family, tier string, n int, memGi int64, price float64) {
		for i := range n {
			it := instanceType(fmt.Sprintf("%s%d.xlarge", family, i), "amd64", 4, memGi, 50, price+0.001*float64(i))
			it.Labels[karpv1.InstanceFamilyLabelKey] = family
			if tier != "" {
				it.Labels[tierLabel] = tier
			}
			out = append(out, it)
		}
	}
	add("m", "silver", 65, 16, 0.10)
	add("c", "gold", 2, 8, 1.00)
	add("r", "bronze", 2, 64, 2.00)
	add("x", "", 1, 16, 3.00)
	return out
}

// withMinValues adds a requirement that the key exists with minValues.
func withMinValues(key string, n int) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(n)})
	}
}

// minValuesClaim is what the minValues tests compare of a NodeClaim.
type minValuesClaim struct {
	NodePool      string
	InstanceTypes int
	// Values are the distinct values of the tested key among the instance types.
	Values    []string
	Relaxed   bool
	MinValues int
}

func TestSolveMinValues(t *testing.T) {
	tests := []struct {
		name   string
		policy MinValuesPolicy
		key    string
		pools  []NodePool
		pods   []*corev1.Pod
		want   []minValuesClaim
		// unschedulable is the reason of every pod left out.
		unschedulable string
	}{
		{
			name:  "without minValues the cheapest MaxInstanceTypes types are listed",
			key:   karpv1.InstanceFamilyLabelKey,
			pools: []NodePool{{NodePool: nodePool("default"), InstanceTypes: familyCatalog()}},
			pods:  pods("web", 1, "1", "1Gi"),
			want:  []minValuesClaim{{NodePool: "default", InstanceTypes: MaxInstanceTypes, Values: []string{"m"}}},
		},
		{
			name:  "minValues on instance-family widens the list beyond MaxInstanceTypes with the cheapest type of each missing family",
			key:   karpv1.InstanceFamilyLabelKey,
			pools: []NodePool{{NodePool: nodePool("default", withMinValues(karpv1.InstanceFamilyLabelKey, 3)), InstanceTypes: familyCatalog()}},
			pods:  pods("web", 1, "1", "1Gi"),
			want:  []minValuesClaim{{NodePool: "default", InstanceTypes: MaxInstanceTypes + 2, Values: []string{"c", "m", "r"}, MinValues: 3}},
		},
		{
			name:  "minValues on instance-type widens the list to that many types",
			key:   corev1.LabelInstanceTypeStable,
			pools: []NodePool{{NodePool: nodePool("default", withMinValues(corev1.LabelInstanceTypeStable, 64)), InstanceTypes: familyCatalog()}},
			pods:  pods("web", 1, "1", "1Gi"),
			want:  []minValuesClaim{{NodePool: "default", InstanceTypes: 64, MinValues: 64}},
		},
		{
			name:  "minValues on a custom label of the instance types",
			key:   tierLabel,
			pools: []NodePool{{NodePool: nodePool("default", withMinValues(tierLabel, 2)), InstanceTypes: familyCatalog()}},
			pods:  pods("web", 1, "1", "1Gi"),
			want:  []minValuesClaim{{NodePool: "default", InstanceTypes: MaxInstanceTypes + 1, Values: []string{"gold", "silver"}, MinValues: 2}},
		},
		{
			name:          "Strict plans no node whose pods only one family can take and names the key",
			key:           karpv1.InstanceFamilyLabelKey,
			pools:         []NodePool{{NodePool: nodePool("default", withMinValues(karpv1.InstanceFamilyLabelKey, 2)), InstanceTypes: familyCatalog()}},
			pods:          pods("big", 2, "1", "40Gi"),
			unschedulable: `NodePool "default": minValues 2 for karpenter.k8s.aws/instance-family: only 1 family can take these pods`,
		},
		{
			name: "Strict falls back to a NodePool of lower weight",
			key:  karpv1.InstanceFamilyLabelKey,
			pools: []NodePool{
				{NodePool: nodePool("diverse", withMinValues(karpv1.InstanceFamilyLabelKey, 2), func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To[int32](10) }), InstanceTypes: familyCatalog()},
				{NodePool: nodePool("fallback"), InstanceTypes: familyCatalog()},
			},
			pods: pods("big", 1, "1", "40Gi"),
			want: []minValuesClaim{{NodePool: "fallback", InstanceTypes: 2, Values: []string{"r"}}},
		},
		{
			name:   "BestEffort relaxes minValues to the families there are and says so",
			policy: MinValuesBestEffort,
			key:    karpv1.InstanceFamilyLabelKey,
			pools:  []NodePool{{NodePool: nodePool("default", withMinValues(karpv1.InstanceFamilyLabelKey, 2)), InstanceTypes: familyCatalog()}},
			pods:   pods("big", 1, "1", "40Gi"),
			want:   []minValuesClaim{{NodePool: "default", InstanceTypes: 2, Values: []string{"r"}, Relaxed: true, MinValues: 1}},
		},
		{
			name:   "BestEffort keeps minValues that can be met",
			policy: MinValuesBestEffort,
			key:    karpv1.InstanceFamilyLabelKey,
			pools:  []NodePool{{NodePool: nodePool("default", withMinValues(karpv1.InstanceFamilyLabelKey, 4)), InstanceTypes: familyCatalog()}},
			pods:   pods("web", 1, "1", "1Gi"),
			want:   []minValuesClaim{{NodePool: "default", InstanceTypes: MaxInstanceTypes + 3, Values: []string{"c", "m", "r", "x"}, MinValues: 4}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Solve(Input{Pods: tt.pods, NodePools: tt.pools, MinValuesPolicy: tt.policy})
			var got []minValuesClaim
			for _, nc := range plan.NewNodeClaims {
				c := minValuesClaim{NodePool: nc.NodePool.Name, InstanceTypes: len(nc.InstanceTypes), Relaxed: nc.MinValuesRelaxed}
				if tt.key != corev1.LabelInstanceTypeStable {
					seen := map[string]bool{}
					for _, it := range nc.InstanceTypes {
						if v, ok := it.Labels[tt.key]; ok && !seen[v] {
							seen[v] = true
							c.Values = append(c.Values, v)
						}
					}
					sort.Strings(c.Values)
				}
				c.MinValues = requirements.MinValues(nc.Requirements)[tt.key]
				got = append(got, c)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NodeClaims (-want +got):\n%s", diff)
			}
			var want map[string]string
			if tt.unschedulable != "" {
				want = map[string]string{}
				for _, p := range tt.pods {
					want[p.Name] = tt.unschedulable
				}
			}
			if diff := cmp.Diff(want, summarize(plan).Unschedulable); diff != "" {
				t.Errorf("unschedulable (-want +got):\n%s", diff)
			}
		})
	}
}
