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
	"github.com/tailor-autoscaler/tailor/test/workloads"
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
		name:  "a gang over the NodePool's limit by one member gets none",
		cpus:  12,
		pods:  members("job", "job", 13),
		gangs: map[Key]Spec{key("job"): {Key: key("job"), MinMember: 13}},
		want:  outcome{Planned: map[string]int{}, Refusals: []string{"job: 13 pending, 12 placed, 0 counted"}},
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
			plan, _, refusals := Plan(Batch{Pods: c.pods, Gangs: c.gangs, Counted: c.counted}, solve)
			if diff := cmp.Diff(c.want, summarize(plan, refusals)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAGangKeptToOneZoneGoesWhereItCostsLeast: eight members spread evenly over two
// zones (maxSkew 1) land four and four; kept to one zone, all eight go to the cheaper one,
// the spread met there alone. With room in no zone for all of them, none gets capacity.
func TestAGangKeptToOneZoneGoesWhereItCostsLeast(t *testing.T) {
	spread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{Label: "job"}},
		}}
	}
	twoZones := pool(0)
	it := fourCPUs()
	it.Offerings = []cloudprovider.Offering{
		{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.2, Available: true},
		{Zone: "zone-b", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.15, Available: true},
	}
	twoZones.InstanceTypes = []*cloudprovider.InstanceType{it}
	zoneOf := func(plan packing.Plan) map[string]int {
		out := map[string]int{}
		for _, nc := range plan.NewNodeClaims {
			out[nc.Cheapest.Zone] += len(nc.Pods)
		}
		return out
	}
	for _, c := range []struct {
		name       string
		singleZone bool
		// cpus limits the NodePool; 0 leaves it unlimited.
		cpus int
		// runsIn is where members of the gang already run.
		runsIn   string
		want     map[string]int
		refusals int
	}{
		{name: "spread over zones", want: map[string]int{"zone-a": 4, "zone-b": 4}},
		{name: "kept to one zone", singleZone: true, want: map[string]int{"zone-b": 8}},
		{name: "kept to one zone with room for half", singleZone: true, cpus: 4, want: map[string]int{}, refusals: 1},
		{name: "kept to the zone its members run in", singleZone: true, runsIn: "zone-a", want: map[string]int{"zone-a": 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			np := twoZones
			if c.cpus > 0 {
				np.Remaining = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(c.cpus), resource.DecimalSI)}
			}
			in := packing.Input{NodePools: []packing.NodePool{np}}
			solve := func(pods []*corev1.Pod) packing.Plan {
				in := in
				in.Pods = pods
				return packing.Solve(in)
			}
			pods := members("job", "job", 8)
			for _, p := range pods {
				spread(p)
			}
			b := Batch{Pods: pods, Gangs: map[Key]Spec{key("job"): {Key: key("job"), MinMember: 8, SingleZone: c.singleZone}}, Zones: []string{"zone-a", "zone-b"}}
			if c.runsIn != "" {
				b.ZoneOf = map[Key]string{key("job"): c.runsIn}
			}
			plan, planned, refusals := Plan(b, solve)
			if diff := cmp.Diff(c.want, zoneOf(plan)); diff != "" {
				t.Errorf("members by zone (-want +got):\n%s", diff)
			}
			if len(refusals) != c.refusals {
				t.Errorf("%d refusals, want %d", len(refusals), c.refusals)
			}
			if len(refusals) > 0 && !strings.Contains(refusals[0].Message(), "no one zone has room for enough of them") {
				t.Errorf("refusal %q does not say no zone has room", refusals[0].Message())
			}
			if len(planned)+8*len(refusals) != 8 {
				t.Errorf("%d pods planned beside %d refused gangs of 8", len(planned), len(refusals))
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

// TestGangsOnTheCatalog plans 16-member gangs on the shared catalog's NodePools (webmix's
// general and GPU pools: real instance types and on-demand prices, synthetic spot prices),
// with and without the single-zone option: kept to one zone, every member is in one zone,
// and the test logs what that costs.
func TestGangsOnTheCatalog(t *testing.T) {
	pools := workloads.Load(t, "webmix", 10).NodePools
	gpu := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), "nvidia.com/gpu": resource.MustParse("1"),
		}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	cpu := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	}
	zones := Zones(pools)
	for _, c := range []struct {
		name  string
		shape func(*corev1.Pod)
	}{{"16 one-GPU workers", gpu}, {"16 four-CPU workers", cpu}} {
		t.Run(c.name, func(t *testing.T) {
			pods := members("job", "job", 16)
			for _, p := range pods {
				c.shape(p)
			}
			solve := func(pods []*corev1.Pod) packing.Plan {
				return packing.Solve(packing.Input{Pods: pods, NodePools: pools})
			}
			price := map[bool]float64{}
			for _, single := range []bool{false, true} {
				b := Batch{Pods: pods, Gangs: map[Key]Spec{key("job"): {Key: key("job"), MinMember: 16, SingleZone: single}}, Zones: zones}
				plan, _, refusals := Plan(b, solve)
				if len(refusals) > 0 {
					t.Fatalf("single zone %v: refused: %s", single, refusals[0].Message())
				}
				inZones := map[string]int{}
				for _, nc := range plan.NewNodeClaims {
					inZones[nc.Cheapest.Zone] += len(nc.Pods)
				}
				if single && len(inZones) != 1 {
					t.Errorf("kept to one zone, the gang runs in %v", inZones)
				}
				price[single] = plan.PricePerHour()
				t.Logf("single zone %-5v $%.4f/hour on %d nodes, members by zone %v", single, price[single], len(plan.NewNodeClaims), inZones)
			}
			// The planner is a heuristic: kept to the zone it does best in, it may find a
			// cheaper plan than free to use all of them.
			t.Logf("one zone costs ×%.3f", price[true]/price[false])
		})
	}
}
