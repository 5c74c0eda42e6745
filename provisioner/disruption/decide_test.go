package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// decideCluster is a NodePool of three machine sizes (spot and on-demand) and nodes given as
// name, instance type, capacity type and the CPU requests of their pods. The largest is the
// cheapest per CPU, the middle one the dearest.
func decideCluster(nodes ...node) Cluster {
	types := []*cloudprovider.InstanceType{instanceType("big.2xlarge", 8, 1.0), instanceType("small.xlarge", 4, 0.2), instanceType("large.4xlarge", 16, 0.6)}
	for _, it := range types {
		it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeSpot, Price: it.Offerings[0].Price * 0.9, Available: true})
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	c := Cluster{NodePools: []packing.NodePool{{NodePool: np, InstanceTypes: types}}}
	for _, n := range nodes {
		var it *cloudprovider.InstanceType
		for _, candidate := range types {
			if candidate.Name == n.instanceType {
				it = candidate
			}
		}
		labels := map[string]string{corev1.LabelHostname: n.name, corev1.LabelInstanceTypeStable: it.Name, corev1.LabelTopologyZone: "us-east-1a",
			karpv1.CapacityTypeLabelKey: n.capacityType, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", karpv1.NodePoolLabelKey: "general"}
		node := packing.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: it.Allocatable()}}, Schedulable: true}
		price := offeringPrice(&c.NodePools[0], labels)
		cand := Candidate{Node: n.name, NodeClaim: n.name, NodePool: "general", Price: price, CapacityType: n.capacityType, Drifted: n.drifted, Planned: n.planned, MayRemoveEmpty: true, MayConsolidate: true}
		for i, cpu := range n.pods {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: n.name + "-" + string(rune('a'+i))}, Spec: corev1.PodSpec{NodeName: n.name,
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
			node.Pods = append(node.Pods, p)
			cand.Pods = append(cand.Pods, p)
		}
		c.Nodes = append(c.Nodes, node)
		if !n.keep {
			c.Candidates = append(c.Candidates, cand)
		}
	}
	return c
}

// node is a node of a test cluster: planned marks it left for later by a consolidation
// under way; keep makes it no candidate (say, do-not-disrupt), though it takes pods.
type node = struct {
	name, instanceType, capacityType string
	drifted, planned, keep           bool
	pods                             []string
}

// summary is what a decision does, in a comparable form: Targets are the nodes that take
// pods, Rest what the consolidation plan leaves for later.
type summary struct {
	Reason       karpv1.DisruptionReason
	Originals    []string
	Replacements []string
	Targets      []string
	Rest         []string
}

func summarize(d Decision, ok bool) *summary {
	if !ok {
		return nil
	}
	s := &summary{Reason: d.Reason, Originals: nodeNames(d.Originals)}
	for _, r := range d.Replacements {
		s.Replacements = append(s.Replacements, r.Cheapest.CapacityType+" "+r.Cheapest.InstanceType)
	}
	for _, p := range d.Placements {
		s.Targets = append(s.Targets, p.Node.Node.Name)
	}
	s.Rest = d.Rest
	return s
}

// oneCPUHungryPodEach is spot small nodes, each running a pod too large to share one.
func oneCPUHungryPodEach(names ...string) []node {
	var out []node
	for _, n := range names {
		out = append(out, node{name: n, instanceType: "small.xlarge", capacityType: "spot", pods: []string{"3"}})
	}
	return out
}

func TestDecide(t *testing.T) {
	all := func(string, karpv1.DisruptionReason) int { return 10 }
	one := func(string, karpv1.DisruptionReason) int { return 1 }
	tests := []struct {
		name   string
		nodes  []node
		budget Budget
		opts   Options
		want   *summary
	}{
		{
			name:   "a drifted node is replaced, whatever it saves",
			nodes:  []node{{name: "old", instanceType: "small.xlarge", capacityType: "spot", drifted: true, pods: []string{"3"}}},
			budget: all,
			want:   &summary{Reason: karpv1.DisruptionReasonDrifted, Originals: []string{"old"}, Replacements: []string{"spot small.xlarge"}},
		},
		{
			name:   "a drifted node goes first; its pods move to room elsewhere",
			nodes:  []node{{name: "old", instanceType: "small.xlarge", capacityType: "on-demand", drifted: true, pods: []string{"3"}}, {name: "idle", instanceType: "small.xlarge", capacityType: "on-demand"}},
			budget: all,
			want:   &summary{Reason: karpv1.DisruptionReasonDrifted, Originals: []string{"old"}, Targets: []string{"idle"}},
		},
		{
			name:  "a drifted node waits while its budget for drift is spent; the empty node goes",
			nodes: []node{{name: "old", instanceType: "small.xlarge", capacityType: "on-demand", drifted: true, pods: []string{"3"}}, {name: "idle", instanceType: "small.xlarge", capacityType: "on-demand"}},
			budget: func(_ string, r karpv1.DisruptionReason) int {
				if r == karpv1.DisruptionReasonDrifted {
					return 0
				}
				return 10
			},
			want: &summary{Reason: karpv1.DisruptionReasonEmpty, Originals: []string{"idle"}},
		},
		{
			name:   "pods that fit on another node: the underused node is deleted",
			nodes:  []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"4"}}, {name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}},
			budget: all,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"a"}},
		},
		{
			name:   "two underused big nodes become one small one",
			nodes:  []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}, {name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}},
			budget: all,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a", "b"}, Replacements: []string{"spot small.xlarge"}},
		},
		{
			name: "a plan larger than the budget: the least used node goes now; its pod keeps off the nodes the plan takes later, onto the new node the plan sized for all three",
			nodes: []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
				{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1500m"}},
				{name: "c", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"5"}}},
			budget: one,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a"}, Replacements: []string{"spot large.4xlarge"},
				Rest: []string{"b", "c"}},
		},
		{
			name: "the node spending the most on room its pods leave unused goes first: a dear node a quarter used before a cheap one an eighth used",
			nodes: []node{{name: "cheap", instanceType: "small.xlarge", capacityType: "on-demand", pods: []string{"500m"}},
				{name: "dear", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"2"}},
				{name: "c", instanceType: "large.4xlarge", capacityType: "on-demand", keep: true, pods: []string{"6"}}},
			budget: one,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"dear"}, Targets: []string{"c"}, Rest: []string{"cheap"}},
		},
		{
			name: "a plan under way goes on where it left off",
			nodes: []node{{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
				{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", planned: true, pods: []string{"1500m"}},
				{name: "c", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"5"}}},
			budget: one,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"c"}},
		},
		{
			name:   "nodes that save nothing alone are replaced together by a larger node that costs less",
			nodes:  oneCPUHungryPodEach("a1", "a2", "a3", "a4"),
			budget: all,
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
			budget: one,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a1"},
				Replacements: []string{"spot large.4xlarge"}, Rest: []string{"a2", "a3", "a4"}},
		},
		{
			name: "the rest of such a group follows onto the replacement",
			nodes: append(oneCPUHungryPodEach("a2", "a3", "a4"),
				node{name: "r", instanceType: "large.4xlarge", capacityType: "spot", keep: true, pods: []string{"3"}}),
			budget: one,
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a2"}, Targets: []string{"r"},
				Rest: []string{"a3", "a4"}},
		},
		{
			name: "a node that saves nothing stays, though it joined the plan on a tie",
			nodes: append(oneCPUHungryPodEach("d"),
				node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
				node{name: "c", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"7"}}),
			budget: all,
			want:   &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"c"}},
		},
		{
			name:   "a spot node is not replaced by spot for a saving under the threshold",
			nodes:  []node{{name: "s", instanceType: "small.xlarge", capacityType: "spot", pods: []string{"3"}}},
			budget: all,
			opts:   Options{SpotToSpotSavings: 0.99, MaxMultiNode: 100, MaxCandidates: 500},
		},
		{
			name:   "a node whose pods fit nowhere cheaper stays",
			nodes:  []node{{name: "full", instanceType: "small.xlarge", capacityType: "spot", pods: []string{"3", "0.5"}}},
			budget: all,
		},
		{
			name:   "no budget: nothing happens",
			nodes:  []node{{name: "idle", instanceType: "small.xlarge", capacityType: "on-demand"}},
			budget: func(string, karpv1.DisruptionReason) int { return 0 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts.MaxMultiNode == 0 {
				opts = DefaultOptions
			}
			got := summarize(Decide(decideCluster(tt.nodes...), tt.budget, opts))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeSavings(t *testing.T) {
	tests := []struct {
		savings float64
		want    string
	}{
		{savings: 0.083, want: "saves $0.0830/hour"},
		{savings: -0.437, want: "costs $0.4370/hour more until the rest of the plan moves onto the replacements"},
	}
	for _, tt := range tests {
		if got := describeSavings(Decision{Savings: tt.savings}); got != tt.want {
			t.Errorf("describeSavings(%v) = %q, want %q", tt.savings, got, tt.want)
		}
	}
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
