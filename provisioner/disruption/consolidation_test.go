package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// TestDecideConsolidation: underused nodes go when their pods fit elsewhere for less, as
// their budgets allow.
func TestDecideConsolidation(t *testing.T) {
	testDecide(t, []decideCase{
		{
			name:   "pods that fit on another node: the underused node is deleted",
			nodes:  []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"4"}}, {name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}},
			budget: tenAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"a"}},
		},
		{
			name:   "two underused big nodes become one small one",
			nodes:  []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}, {name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}},
			budget: tenAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a", "b"}, Replacements: []string{"spot small.xlarge"}},
		},
		{
			name: "a plan larger than the budget: the least used node goes now; its pod keeps off the nodes the plan takes later, onto the new node the plan sized for all three",
			nodes: []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
				{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1500m"}},
				{name: "c", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"5"}}},
			budget: oneAtATime,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a"}, Replacements: []string{"spot large.4xlarge"},
				Rest: []string{"b", "c"}},
		},
		{
			name: "the node spending the most on room its pods leave unused goes first: a dear node a quarter used before a cheap one an eighth used",
			nodes: []node{{name: "cheap", instanceType: "small.xlarge", capacityType: "on-demand", pods: []string{"500m"}},
				{name: "dear", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"2"}},
				{name: "c", instanceType: "large.4xlarge", capacityType: "on-demand", keep: true, pods: []string{"6"}}},
			budget: oneAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"dear"}, Targets: []string{"c"}, Rest: []string{"cheap"}},
		},
		{
			name: "a plan under way goes on where it left off",
			nodes: []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
				{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", planned: true, pods: []string{"1500m"}},
				{name: "c", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"5"}}},
			budget: oneAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"c"}},
		},
		{
			name:   "nodes that save nothing alone are replaced together by a larger node that costs less",
			nodes:  oneCPUHungryPodEach("a1", "a2", "a3", "a4"),
			budget: tenAtATime,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a1", "a2", "a3", "a4"},
				Replacements: []string{"spot large.4xlarge"}},
		},
		{
			name: "nodes that share a replacement go together or wait: the budget takes what it can whole",
			nodes: append(oneCPUHungryPodEach("a1", "a2", "a3", "a4"),
				node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
				node{name: "c", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"6"}}),
			budget: func(string, karpv1.DisruptionReason) int { return 4 },
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"c"},
				Rest: []string{"a1", "a2", "a3", "a4"}},
		},
		{
			name:   "nodes that share a replacement but never fit the budget together: the replacement comes first, with the nodes the budget allows",
			nodes:  oneCPUHungryPodEach("a1", "a2", "a3", "a4"),
			budget: oneAtATime,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a1"},
				Replacements: []string{"spot large.4xlarge"}, Rest: []string{"a2", "a3", "a4"}},
		},
		{
			name: "the rest of such a group follows onto the replacement",
			nodes: append(oneCPUHungryPodEach("a2", "a3", "a4"),
				node{name: "r", instanceType: "large.4xlarge", capacityType: "spot", keep: true, pods: []string{"3"}}),
			budget: oneAtATime,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a2"}, Targets: []string{"r"},
				Rest: []string{"a3", "a4"}},
		},
		{
			name: "a node that saves nothing stays, though it joined the plan on a tie",
			nodes: append(oneCPUHungryPodEach("d"),
				node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
				node{name: "c", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"7"}}),
			budget: tenAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"c"}},
		},
		{
			name:   "a spot node is not replaced by spot for a saving under the threshold",
			nodes:  []node{{name: "s", instanceType: "small.xlarge", capacityType: "spot", pods: []string{"3"}}},
			budget: tenAtATime,
			opts:   Options{SpotToSpotSavings: 0.99, MaxMultiNode: 100, MaxCandidates: 500},
		},
		{
			name:   "a saving of $1/hour for one pod moved is worth its move at $0.50 a pod",
			nodes:  []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"4"}}, {name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}},
			budget: tenAtATime,
			opts:   Options{MinSavingsPerPod: 0.5, MaxMultiNode: 100, MaxCandidates: 500},
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"a"}},
		},
		{
			name:   "but not at $0.40 a pod for three pods",
			nodes:  []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"4"}}, {name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"500m", "500m", "500m"}}},
			budget: tenAtATime,
			opts:   Options{MinSavingsPerPod: 0.4, MaxMultiNode: 100, MaxCandidates: 500},
		},
		{
			name:   "a node whose pods fit nowhere cheaper stays",
			nodes:  []node{{name: "full", instanceType: "small.xlarge", capacityType: "spot", pods: []string{"3", "0.5"}}},
			budget: tenAtATime,
		},
	})
}

// TestAPodResizedInPlaceMovesAtItsNewSize: a pod whose resize to 6 CPUs its node found
// infeasible counts 1 CPU there, as the scheduler counts it, but is planned at 6 CPUs where
// consolidation moves it: it does not fit the room of 4 CPUs another node has.
func TestAPodResizedInPlaceMovesAtItsNewSize(t *testing.T) {
	for _, tt := range []struct {
		name   string
		resize bool
		want   *summary
	}{
		{name: "not resized", want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"a"}}},
		{name: "resize infeasible on its node", resize: true,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Replacements: []string{"spot large.4xlarge"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := decideCluster(node{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"4"}},
				node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}})
			if tt.resize {
				p := c.Nodes[1].Pods[0]
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("6")
				had := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", AllocatedResources: had, Resources: &corev1.ResourceRequirements{Requests: had}}}
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
			}
			got := summarize(Decide(c, func(string, karpv1.DisruptionReason) int { return 10 }, DefaultOptions))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}
