package gang

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// fourCPUs is the only instance type: four of the tests' pods (900m each) fill one.
func fourCPUs() *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{
		Name:   "c.xlarge",
		Labels: map[string]string{corev1.LabelInstanceTypeStable: "c.xlarge", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Offerings: []cloudprovider.Offering{
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.2, Available: true},
		},
	}
}

// pool is a NodePool of fourCPUs that may launch cpus more CPUs; 0 leaves it unlimited.
func pool(cpus int) packing.NodePool {
	np := packing.NodePool{
		NodePool:      &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		InstanceTypes: []*cloudprovider.InstanceType{fourCPUs()},
	}
	if cpus > 0 {
		np.Remaining = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI)}
	}
	return np
}

// members are n pending pods of the gang name (none when name is empty).
func members(prefix, name string, n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "train", Name: fmt.Sprintf("%s-%d", prefix, i), UID: types.UID(fmt.Sprintf("%s-%d", prefix, i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}}},
		}
		if name != "" {
			p.Labels = map[string]string{Label: name}
		}
		out[i] = p
	}
	return out
}

func key(name string) Key { return Key{Namespace: "train", Name: name} }

// outcome is what a test compares: the pods planned, by prefix, the nodes launched, and
// the gangs refused with their counts.
type outcome struct {
	Planned  map[string]int
	Nodes    int
	Refusals []string
}

func summarize(plan packing.Plan, refusals []Refusal) outcome {
	o := outcome{Planned: map[string]int{}, Nodes: len(plan.NewNodeClaims)}
	count := func(pods []*corev1.Pod) {
		for _, p := range pods {
			o.Planned[p.Name[:strings.LastIndex(p.Name, "-")]]++
		}
	}
	for _, nc := range plan.NewNodeClaims {
		count(nc.Pods)
	}
	for _, pl := range plan.Existing {
		count(pl.Pods)
	}
	for _, r := range refusals {
		o.Refusals = append(o.Refusals, fmt.Sprintf("%s: %d pending, %d placed, %d counted", r.Spec.Key.Name, len(r.Pods), r.Placed, r.Counted))
	}
	sort.Strings(o.Refusals)
	return o
}

func TestPlanIsAllOrNothingPerGang(t *testing.T) {
	for _, c := range []struct {
		name    string
		cpus    int
		pods    []*corev1.Pod
		gangs   map[Key]Spec
		counted map[Key]int
		want    outcome
	}{{
		name:  "a gang that fits gets all of its capacity",
		cpus:  12,
		pods:  members("job", "job", 8),
		gangs: map[Key]Spec{key("job"): {Key: key("job"), MinMember: 8}},
		want:  outcome{Planned: map[string]int{"job": 8}, Nodes: 2},
	}, {
		name:  "a gang one node over the NodePool's limit gets none, and the pods beside it are sized without it",
		cpus:  12,
		pods:  append(members("job", "job", 16), members("web", "", 2)...),
		gangs: map[Key]Spec{key("job"): {Key: key("job"), MinMember: 16}},
		want:  outcome{Planned: map[string]int{"web": 2}, Nodes: 1, Refusals: []string{"job: 16 pending, 12 placed, 0 counted"}},
	}, {
		name:    "members already running count toward MinMember",
		cpus:    12,
		pods:    members("job", "job", 12),
		gangs:   map[Key]Spec{key("job"): {Key: key("job"), MinMember: 16}},
		counted: map[Key]int{key("job"): 4},
		want:    outcome{Planned: map[string]int{"job": 12}, Nodes: 3},
	}, {
		name:  "a gang whose MinMember fit gets capacity for as many members as fit",
		cpus:  12,
		pods:  members("job", "job", 16),
		gangs: map[Key]Spec{key("job"): {Key: key("job"), MinMember: 10}},
		want:  outcome{Planned: map[string]int{"job": 12}, Nodes: 3},
	}, {
		name: "of two gangs the limit takes one: the one that fits alone is planned once the other is left out",
		cpus: 12,
		pods: append(members("a", "a", 8), members("b", "b", 8)...),
		gangs: map[Key]Spec{
			key("a"): {Key: key("a"), MinMember: 8},
			key("b"): {Key: key("b"), MinMember: 8},
		},
		want: outcome{Planned: map[string]int{"a": 8}, Nodes: 2, Refusals: []string{"b: 8 pending, 4 placed, 0 counted"}},
	}, {
		name:  "pods of an undeclared gang or a gang of one are planned each on its own",
		cpus:  8,
		pods:  append(members("lost", "lost", 6), members("solo", "solo", 6)...),
		gangs: map[Key]Spec{key("solo"): {Key: key("solo"), MinMember: 1}},
		want:  outcome{Planned: map[string]int{"lost": 6, "solo": 2}, Nodes: 2},
	}} {
		t.Run(c.name, func(t *testing.T) {
			in := packing.Input{NodePools: []packing.NodePool{pool(c.cpus)}}
			solve := func(pods []*corev1.Pod) packing.Plan {
				in := in
				in.Pods = pods
				return packing.Solve(in)
			}
			plan, refusals := Plan(c.pods, c.gangs, c.counted, solve)
			if diff := cmp.Diff(c.want, summarize(plan, refusals)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefusalMessageSaysWhatIsMissing(t *testing.T) {
	r := Refusal{
		Spec: Spec{Key: key("job"), MinMember: 16}, Pods: members("job", "job", 16), Placed: 12,
		Reasons: []string{`NodePool "default": limit cpu 12 reached`},
	}
	want := `gang train/job needs 16 pods running together: 0 already run or have capacity planned, and of its 16 pending pods only 12 could be placed (the others: NodePool "default": limit cpu 12 reached); no capacity is launched for any of them until all fit`
	if diff := cmp.Diff(want, r.Message()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}
