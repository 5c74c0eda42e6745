package packing

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// instanceType makes a type with one on-demand and one spot offering in each zone; spot
// costs half.
func instanceType(name, arch string, cpu, memGi, pods int64, price float64, zones ...string) *cloudprovider.InstanceType {
	if len(zones) == 0 {
		zones = []string{"zone-a", "zone-b"}
	}
	it := &cloudprovider.InstanceType{
		Name: name,
		Labels: map[string]string{
			corev1.LabelInstanceTypeStable: name,
			corev1.LabelArchStable:         arch,
			corev1.LabelOSStable:           "linux",
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		},
		Overhead: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("512Mi"),
		},
	}
	for _, z := range zones {
		it.Offerings = append(it.Offerings,
			cloudprovider.Offering{Zone: z, ZoneID: z + "-id", CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true},
			cloudprovider.Offering{Zone: z, ZoneID: z + "-id", CapacityType: karpv1.CapacityTypeSpot, Price: price / 2, Available: true},
		)
	}
	return it
}

func catalog() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		instanceType("small", "amd64", 2, 4, 10, 0.10),
		instanceType("medium", "amd64", 4, 8, 20, 0.20),
		instanceType("large", "amd64", 8, 16, 40, 0.40),
		instanceType("arm-large", "arm64", 8, 16, 40, 0.32),
	}
}

func nodePool(name string, mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
	for _, m := range mutate {
		m(np)
	}
	return np
}

func pod(name, cpu, mem string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(mem),
			}},
		}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func pods(prefix string, n int, cpu, mem string, mutate ...func(*corev1.Pod)) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", prefix, i), cpu, mem, mutate...)
	}
	return out
}

// requireNodeNamed requires the pod to run on the node, by name.
func requireNodeNamed(p *corev1.Pod, name string) {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{name}}},
		}}},
	}}
}

// existing is a schedulable node of the general NodePool with the CPUs given, running a pod
// of a CPU.
func existing(name, cpu, running string) Node {
	return Node{
		Node: &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10"),
			}},
		},
		Pods:        []*corev1.Pod{pod(running, "1", "0")},
		Schedulable: true,
	}
}

// summary is what the tests compare: per new NodeClaim, its NodePool, expected offering
// and pod names; per unschedulable pod, its reason.
type summary struct {
	NodeClaims    []claimSummary
	Existing      map[string][]string
	Unschedulable map[string]string
}

type claimSummary struct {
	NodePool string
	Cheapest Choice
	Pods     int
}

// summarize leaves the parts of prices out; TestSolvePricesWholeNodes checks them.
func summarize(p Plan) summary {
	var s summary
	for _, c := range p.NewNodeClaims {
		cheapest := c.Cheapest
		cheapest.Parts = cloudprovider.PriceParts{}
		s.NodeClaims = append(s.NodeClaims, claimSummary{NodePool: c.NodePool.Name, Cheapest: cheapest, Pods: len(c.Pods)})
	}
	for _, f := range p.Existing {
		if s.Existing == nil {
			s.Existing = map[string][]string{}
		}
		for _, pod := range f.Pods {
			s.Existing[f.Node.Node.Name] = append(s.Existing[f.Node.Node.Name], pod.Name)
		}
	}
	for _, u := range p.Unschedulable {
		if s.Unschedulable == nil {
			s.Unschedulable = map[string]string{}
		}
		s.Unschedulable[u.Pod.Name] = u.Reason
	}
	return s
}

func TestSolve(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name  string
		input Input
		want  summary
	}{
		{
			name: "pods fill a node while an allowed type fits them, then the cheapest such type is chosen",
			input: Input{
				Pods:      pods("web", 10, "1", "1Gi"),
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
			},
			// 8 vCPU less 100m overhead takes 7 pods; arm64 is cheaper and the pods allow it.
			// The other 3 need 4 vCPU.
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "general", Cheapest: Choice{InstanceType: "arm-large", Zone: "zone-a", CapacityType: "on-demand", Price: 0.32}, Pods: 7},
				{NodePool: "general", Cheapest: Choice{InstanceType: "medium", Zone: "zone-a", CapacityType: "on-demand", Price: 0.20}, Pods: 3},
			}},
		},
		{
			name: "spot is chosen when the NodePool allows it and it is cheaper",
			input: Input{
				Pods: pods("web", 1, "1", "1Gi"),
				NodePools: []NodePool{{NodePool: nodePool("general", func(np *karpv1.NodePool) {
					np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}
				}), InstanceTypes: catalog()}},
			},
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "general", Cheapest: Choice{InstanceType: "small", Zone: "zone-a", CapacityType: "spot", Price: 0.05}, Pods: 1},
			}},
		},
		{
			name: "max pods bounds a node before cpu does",
			input: Input{
				Pods:      pods("tiny", 12, "10m", "16Mi"),
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()[:1]}},
			},
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "general", Cheapest: Choice{InstanceType: "small", Zone: "zone-a", CapacityType: "on-demand", Price: 0.10}, Pods: 10},
				{NodePool: "general", Cheapest: Choice{InstanceType: "small", Zone: "zone-a", CapacityType: "on-demand", Price: 0.10}, Pods: 2},
			}},
		},
		{
			name: "a node selector narrows the instance types",
			input: Input{
				Pods: pods("arm", 1, "6", "1Gi", func(p *corev1.Pod) {
					p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
				}),
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
			},
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "general", Cheapest: Choice{InstanceType: "arm-large", Zone: "zone-a", CapacityType: "on-demand", Price: 0.32}, Pods: 1},
			}},
		},
		{
			name: "required zone affinity is honoured",
			input: Input{
				Pods: pods("zonal", 1, "1", "1Gi", func(p *corev1.Pod) {
					p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}},
						}}},
					}}
				}),
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
			},
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "general", Cheapest: Choice{InstanceType: "small", Zone: "zone-b", CapacityType: "on-demand", Price: 0.10}, Pods: 1},
			}},
		},
		{
			name: "a node selector on the zone ID picks its zone",
			input: Input{
				Pods: pods("zonal", 1, "1", "1Gi", func(p *corev1.Pod) {
					p.Spec.NodeSelector = map[string]string{karpv1.ZoneIDLabelKey: "zone-b-id"}
				}),
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
			},
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "general", Cheapest: Choice{InstanceType: "small", Zone: "zone-b", CapacityType: "on-demand", Price: 0.10}, Pods: 1},
			}},
		},
		{
			name: "the highest-weight NodePool that can take a pod wins",
			input: Input{
				Pods: pods("web", 1, "1", "1Gi"),
				NodePools: []NodePool{
					{NodePool: nodePool("cheap"), InstanceTypes: catalog()},
					{NodePool: nodePool("preferred", func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To[int32](50) }), InstanceTypes: catalog()[2:3]},
				},
			},
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "preferred", Cheapest: Choice{InstanceType: "large", Zone: "zone-a", CapacityType: "on-demand", Price: 0.40}, Pods: 1},
			}},
		},
		{
			name: "pods go to in-flight NodeClaims with room before new capacity",
			input: Input{
				Pods:      pods("web", 3, "1", "1Gi"),
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
				Nodes: []Node{{
					Node: &corev1.Node{
						ObjectMeta: metav1.ObjectMeta{Name: "general-abc", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}},
						Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10"),
						}},
					},
					NodeClaim:   &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-abc"}},
					Pods:        []*corev1.Pod{pod("running", "1", "0")},
					Schedulable: true,
				}},
			},
			want: summary{
				Existing: map[string][]string{"general-abc": {"web-0", "web-1"}},
				NodeClaims: []claimSummary{
					{NodePool: "general", Cheapest: Choice{InstanceType: "small", Zone: "zone-a", CapacityType: "on-demand", Price: 0.10}, Pods: 1},
				},
			},
		},
		{
			name: "a pod whose affinity names its nodes runs on one of them or waits, never on a new node",
			input: Input{
				Pods: []*corev1.Pod{
					pod("to-b", "1", "1Gi", func(p *corev1.Pod) { requireNodeNamed(p, "b") }),
					pod("to-full", "1", "1Gi", func(p *corev1.Pod) { requireNodeNamed(p, "full") }),
				},
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
				Nodes:     []Node{existing("a", "3", "running-a"), existing("b", "3", "running-b"), existing("full", "1", "running-full")},
			},
			want: summary{
				Existing: map[string][]string{"b": {"to-b"}},
				Unschedulable: map[string]string{
					"to-full": `NodePool "general": the pod's node affinity names its nodes (metadata.name in full), which a new node is not; none of those has room`,
				},
			},
		},
		{
			name: "a pod larger than every instance type is explained, not launched",
			input: Input{
				Pods:      []*corev1.Pod{pod("big", "64", "1Gi")},
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
			},
			want: summary{Unschedulable: map[string]string{
				"big": `NodePool "general": no instance type has room for the pod's requests (cpu=64, memory=1Gi, pods=1): closest is large with cpu=7900m, memory=15872Mi, pods=40 allocatable after DaemonSets, short of cpu`,
			}},
		},
		{
			name: "an untolerated NodePool taint is explained per NodePool",
			input: Input{
				Pods: []*corev1.Pod{pod("web", "1", "1Gi")},
				NodePools: []NodePool{{NodePool: nodePool("gpu", func(np *karpv1.NodePool) {
					np.Spec.Template.Spec.Taints = []corev1.Taint{gpuTaint}
				}), InstanceTypes: catalog()}},
			},
			want: summary{Unschedulable: map[string]string{
				"web": `NodePool "gpu": the pod does not tolerate taint nvidia.com/gpu=true:NoSchedule`,
			}},
		},
		{
			name: "a tolerating pod may use a tainted NodePool",
			input: Input{
				Pods: []*corev1.Pod{pod("cuda", "1", "1Gi", func(p *corev1.Pod) {
					p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
				})},
				NodePools: []NodePool{{NodePool: nodePool("gpu", func(np *karpv1.NodePool) {
					np.Spec.Template.Spec.Taints = []corev1.Taint{gpuTaint}
				}), InstanceTypes: catalog()}},
			},
			want: summary{NodeClaims: []claimSummary{
				{NodePool: "gpu", Cheapest: Choice{InstanceType: "small", Zone: "zone-a", CapacityType: "on-demand", Price: 0.10}, Pods: 1},
			}},
		},
		{
			name: "a selector no NodePool offering satisfies is explained",
			input: Input{
				Pods: []*corev1.Pod{pod("s390", "1", "1Gi", func(p *corev1.Pod) {
					p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "s390x"}
				})},
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
			},
			want: summary{Unschedulable: map[string]string{
				"s390": `NodePool "general": no instance type satisfies both the NodePool requirements (karpenter.sh/capacity-type In [on-demand]) and the pod's node selector and affinity (kubernetes.io/arch=s390x)`,
			}},
		},
		{
			name: "NodePool limits stop launches beyond them",
			input: Input{
				Pods: pods("web", 3, "3", "1Gi"),
				NodePools: []NodePool{{
					NodePool:      nodePool("general"),
					InstanceTypes: catalog()[:2],
					Remaining:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
				}},
			},
			want: summary{
				NodeClaims: []claimSummary{
					{NodePool: "general", Cheapest: Choice{InstanceType: "medium", Zone: "zone-a", CapacityType: "on-demand", Price: 0.20}, Pods: 1},
					{NodePool: "general", Cheapest: Choice{InstanceType: "medium", Zone: "zone-a", CapacityType: "on-demand", Price: 0.20}, Pods: 1},
				},
				Unschedulable: map[string]string{"web-2": `NodePool "general": its limits leave no room for a node that fits the pod (remaining: cpu=0)`},
			},
		},
		{
			name:  "without NodePools every pod is explained",
			input: Input{Pods: []*corev1.Pod{pod("web", "1", "1Gi")}},
			want:  summary{Unschedulable: map[string]string{"web": "no NodePool is available to this pod's scheduler profile"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize(Solve(tt.input))); diff != "" {
				t.Errorf("Solve() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSolveRequirementsKeepOnlyWhatFits(t *testing.T) {
	plan := Solve(Input{
		Pods:      pods("web", 1, "3", "1Gi"),
		NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
	})
	if len(plan.NewNodeClaims) != 1 {
		t.Fatalf("want one NodeClaim, got %d", len(plan.NewNodeClaims))
	}
	want := []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm-large", "large", "medium"}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	if diff := cmp.Diff(want, plan.NewNodeClaims[0].Requirements); diff != "" {
		t.Errorf("Requirements mismatch (-want +got):\n%s", diff)
	}
}

// withNodeCosts gives every offering of the types the node costs.
func withNodeCosts(costs cloudprovider.NodeCosts, types ...*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	for _, it := range types {
		for i := range it.Offerings {
			it.Offerings[i].NodeCosts = costs
		}
	}
	return types
}

func TestSolvePricesWholeNodes(t *testing.T) {
	// "two" holds one pod of 1 vCPU at 0.05, "eight" seven at 0.40: by instance price six
	// pods are cheapest on six "two", but each node's volume makes one "eight" cheaper.
	catalog := func(costs cloudprovider.NodeCosts) []*cloudprovider.InstanceType {
		return withNodeCosts(costs, instanceType("two", "amd64", 2, 8, 10, 0.05), instanceType("eight", "amd64", 8, 32, 40, 0.40))
	}
	volume := cloudprovider.NodeCosts{Volumes: 0.03}
	tests := []struct {
		name       string
		types      []*cloudprovider.InstanceType
		daemonSets []*appsv1.DaemonSet
		want       []Choice
	}{
		{
			name:  "instance prices only",
			types: catalog(cloudprovider.NodeCosts{}),
			want: slices.Repeat([]Choice{{InstanceType: "two", Zone: "zone-a", CapacityType: "on-demand", Price: 0.05,
				Parts: cloudprovider.PriceParts{Instance: 0.05}}}, 6),
		},
		{
			name:  "a volume per node",
			types: catalog(volume),
			want: []Choice{{InstanceType: "eight", Zone: "zone-a", CapacityType: "on-demand", Price: 0.43,
				Parts: cloudprovider.PriceParts{Instance: 0.40, Volumes: 0.03}}},
		},
		{
			name:  "DaemonSets take their share of the instance",
			types: catalog(volume),
			daemonSets: []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "agent"}, Spec: appsv1.DaemonSetSpec{
				Template: corev1.PodTemplateSpec{Spec: pod("agent", "395m", "64Mi").Spec},
			}}},
			// 395m of 7900m allocatable is 5%, more than the 1 pod of 40 and 64Mi of 31.5Gi.
			want: []Choice{{InstanceType: "eight", Zone: "zone-a", CapacityType: "on-demand", Price: 0.43,
				Parts: cloudprovider.PriceParts{Instance: 0.38, Volumes: 0.03, DaemonSets: 0.02}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Solve(Input{
				Pods:       pods("web", 6, "1", "1Gi"),
				NodePools:  []NodePool{{NodePool: nodePool("general"), InstanceTypes: tt.types}},
				DaemonSets: tt.daemonSets,
			})
			var got []Choice
			for _, nc := range plan.NewNodeClaims {
				got = append(got, nc.Cheapest)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("offerings (-want +got):\n%s", diff)
			}
		})
	}
}
