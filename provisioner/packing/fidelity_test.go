package packing_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
	"github.com/tailor-autoscaler/tailor/test/filtercheck"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// endState is the cluster a plan leads to once its nodes have registered: the input's
// nodes and pods, a node per new NodeClaim as the expected offering launches it (labels of
// the type, zone, capacity type and NodePool; the NodePool's taints; the type's
// allocatable), the DaemonSet pods that land on the new nodes, and every planned pod bound
// where the plan put it.
func endState(t testing.TB, in packing.Input, plan packing.Plan) filtercheck.Cluster {
	t.Helper()
	var c filtercheck.Cluster
	c.Claims, c.Volumes, c.StorageClasses = in.Volumes.Claims, in.Volumes.PersistentVols, in.Volumes.StorageClasses
	for _, n := range in.Nodes {
		c.Nodes = append(c.Nodes, n.Node)
		c.Pods = append(c.Pods, n.Pods...)
	}
	bind := func(pod *corev1.Pod, node string) {
		bound := pod.DeepCopy()
		bound.Spec.NodeName = node
		if bound.UID == "" {
			bound.UID = types.UID(bound.Namespace + "/" + bound.Name)
		}
		c.Pods = append(c.Pods, bound)
	}
	for _, p := range plan.Existing {
		for _, pod := range p.Pods {
			bind(pod, p.Node.Node.Name)
		}
	}
	for i, nc := range plan.NewNodeClaims {
		name := fmt.Sprintf("new-%d", i)
		node := newNode(t, name, nc)
		c.Nodes = append(c.Nodes, node)
		for _, ds := range in.DaemonSets {
			pod := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
			pod.Namespace, pod.Name = ds.Namespace, ds.Name+"-"+name
			if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok || !toleratesAll(pod, node.Spec.Taints) {
				continue
			}
			bind(pod, name)
		}
		for _, pod := range nc.Pods {
			bind(pod, name)
		}
	}
	return c
}

func toleratesAll(pod *corev1.Pod, taints []corev1.Taint) bool {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect != corev1.TaintEffectPreferNoSchedule
	}, packing.TaintComparisonOperators)
	return !untolerated
}

func newNode(t testing.TB, name string, nc packing.NewNodeClaim) *corev1.Node {
	t.Helper()
	var it *cloudprovider.InstanceType
	for _, candidate := range nc.InstanceTypes {
		if candidate.Name == nc.Cheapest.InstanceType {
			it = candidate
		}
	}
	if it == nil {
		t.Fatalf("NodeClaim's cheapest type %s is not among its instance types", nc.Cheapest.InstanceType)
	}
	labels := map[string]string{}
	for k, v := range requirements.SingleValueLabels(nc.NodePool.Spec.Template.Spec.Requirements) {
		labels[k] = v
	}
	for k, v := range nc.NodePool.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelTopologyZone] = nc.Cheapest.Zone
	labels[karpv1.CapacityTypeLabelKey] = nc.Cheapest.CapacityType
	labels[karpv1.NodePoolLabelKey] = nc.NodePool.Name
	if !requirements.Matches(nc.Requirements, labels) {
		t.Fatalf("node %s of NodeClaim (%s) does not satisfy the NodeClaim's requirements %v", name, nc.Cheapest.InstanceType, nc.Requirements)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: nc.NodePool.Spec.Template.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: it.Allocatable(), Capacity: it.Capacity},
	}
}

// verify checks with kube-scheduler's own filters that every planned pod is accepted
// where the plan put it, and that every DaemonSet pod fits on the new nodes.
func verify(t testing.TB, in packing.Input, plan packing.Plan) {
	t.Helper()
	c := endState(t, in, plan)
	rejections, err := filtercheck.Check(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rejections) > 0 {
		var lines []string
		for i, r := range rejections {
			if i == 10 {
				lines = append(lines, fmt.Sprintf("... and %d more", len(rejections)-10))
				break
			}
			lines = append(lines, fmt.Sprintf("%s on %s: %s %s", r.Pod, r.Node, r.Plugin, strings.Join(r.Reasons, "; ")))
		}
		t.Errorf("kube-scheduler's filters reject %d planned pods:\n%s", len(rejections), strings.Join(lines, "\n"))
	}
}

// accounted checks that every pending pod is planned exactly once.
func accounted(t testing.TB, in packing.Input, plan packing.Plan) {
	t.Helper()
	seen := map[*corev1.Pod]int{}
	for _, p := range plan.Existing {
		for _, pod := range p.Pods {
			seen[pod]++
		}
	}
	for _, nc := range plan.NewNodeClaims {
		for _, pod := range nc.Pods {
			seen[pod]++
		}
	}
	for _, u := range plan.Unschedulable {
		seen[u.Pod]++
	}
	want := map[*corev1.Pod]int{}
	for _, pod := range in.Pods {
		want[pod] = 1
	}
	if diff := cmp.Diff(len(want), len(seen)); diff != "" {
		t.Errorf("pods planned (-want +got):\n%s", diff)
	}
	for pod, n := range seen {
		if n != 1 {
			t.Errorf("pod %s/%s planned %d times", pod.Namespace, pod.Name, n)
		}
	}
}

// TestWorkloadsAgreeWithKubeScheduler plans the shared benchmark workloads with the full
// catalog and checks every placement with kube-scheduler's filters.
func TestWorkloadsAgreeWithKubeScheduler(t *testing.T) {
	for _, shape := range workloads.Shapes {
		t.Run(shape, func(t *testing.T) {
			in := workloads.Load(t, shape, 1000)
			plan := packing.Solve(in)
			accounted(t, in, plan)
			if len(plan.Unschedulable) > 0 {
				t.Errorf("%d pods unschedulable, first: %s: %s", len(plan.Unschedulable), plan.Unschedulable[0].Pod.Name, plan.Unschedulable[0].Reason)
			}
			verify(t, in, plan)
		})
	}
}

// Builders for the constraint cases: a small catalog in three zones, a GPU type behind a
// taint, an arm64 type.

func itype(name, arch string, cpu, memGi, pods int64, price float64, extra corev1.ResourceList) *cloudprovider.InstanceType {
	it := &cloudprovider.InstanceType{
		Name:   name,
		Labels: map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: arch, corev1.LabelOSStable: "linux"},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI),
			corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	for k, v := range extra {
		it.Capacity[k] = v
	}
	for i, z := range []string{"zone-a", "zone-b", "zone-c"} {
		it.Offerings = append(it.Offerings,
			cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true},
			cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: price * (0.4 + 0.05*float64(i)), Available: true})
	}
	return it
}

func smallCatalog() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("s", "amd64", 2, 4, 10, 0.10, nil),
		itype("m", "amd64", 4, 16, 20, 0.20, nil),
		itype("l", "amd64", 16, 64, 60, 0.80, nil),
		itype("arm", "arm64", 4, 16, 20, 0.16, nil),
		itype("gpu", "amd64", 8, 32, 30, 1.00, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}),
	}
}

func pool(name string, mutate ...func(*karpv1.NodePool)) packing.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}},
	}}}}
	for _, m := range mutate {
		m(np)
	}
	return packing.NodePool{NodePool: np, InstanceTypes: smallCatalog()}
}

func mkpods(prefix string, n int, cpu, mem string, labels map[string]string, mutate ...func(*corev1.Pod)) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", prefix, i), Labels: labels, UID: types.UID(fmt.Sprintf("%s-%d", prefix, i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
			}}}}},
		}
		for _, m := range mutate {
			m(p)
		}
		out[i] = p
	}
	return out
}

func sel(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }

func existingNode(name, zone string, cpu string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("30"),
		}},
	}
}

func bound(pods []*corev1.Pod, node string) []*corev1.Pod {
	for _, p := range pods {
		p.Spec.NodeName = node
	}
	return pods
}

// TestConstraintsAgreeWithKubeScheduler plans one case per scheduling constraint and checks
// every placement with kube-scheduler's own filters on the resulting nodes, plus what the
// case is about.
func TestConstraintsAgreeWithKubeScheduler(t *testing.T) {
	zone := corev1.LabelTopologyZone
	host := corev1.LabelHostname
	web := map[string]string{"app": "web"}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	zoneOf := func(plan packing.Plan) map[string]int {
		out := map[string]int{}
		for _, nc := range plan.NewNodeClaims {
			out[nc.Cheapest.Zone] += len(nc.Pods)
		}
		return out
	}
	tests := []struct {
		name  string
		input packing.Input
		check func(t *testing.T, plan packing.Plan)
	}{
		{
			name: "requests of cpu, memory and ephemeral storage",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 9, "1500m", "3Gi", nil, func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("4Gi")
			})},
		},
		{
			name: "GPU requests go to the tainted GPU NodePool only with a toleration",
			input: packing.Input{NodePools: []packing.NodePool{pool("general", func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"gpu"}})
			}), pool("gpu", func(np *karpv1.NodePool) { np.Spec.Template.Spec.Taints = []corev1.Taint{gpuTaint} })},
				Pods: append(mkpods("cuda", 2, "2", "8Gi", nil, func(p *corev1.Pod) {
					p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
					p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
				}), mkpods("nocuda", 1, "1", "1Gi", nil, func(p *corev1.Pod) {
					p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
				})...)},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.NewNodeClaims) != 2 || plan.NewNodeClaims[0].NodePool.Name != "gpu" || len(plan.Unschedulable) != 1 {
					t.Fatalf("want each tolerating GPU pod on its own GPU node and the other unschedulable, got %d NodeClaims, %d unschedulable", len(plan.NewNodeClaims), len(plan.Unschedulable))
				}
				want := `NodePool "general": no instance type has room for the pod's requests (cpu=1, memory=1Gi, pods=1, nvidia.com/gpu=1): closest is l with cpu=15900m, memory=65024Mi, pods=60, ephemeral-storage=20Gi allocatable after DaemonSets, short of nvidia.com/gpu; NodePool "gpu": the pod does not tolerate taint nvidia.com/gpu=true:NoSchedule`
				if diff := cmp.Diff(want, plan.Unschedulable[0].Reason); diff != "" {
					t.Errorf("reason (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "max pods bound small pods",
			input: packing.Input{NodePools: []packing.NodePool{pool("general", func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"s"}})
			})}, Pods: mkpods("tiny", 25, "10m", "16Mi", nil)},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.NewNodeClaims) != 3 {
					t.Errorf("25 pods at 10 pods per node need 3 nodes, got %d", len(plan.NewNodeClaims))
				}
			},
		},
		{
			name: "DaemonSet pods are reserved on new nodes",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 6, "1", "1Gi", nil),
				DaemonSets: []*appsv1.DaemonSet{daemonSet("logs", "500m", "512Mi", nil), daemonSet("arm-only", "3", "1Gi", map[string]string{corev1.LabelArchStable: "arm64"})}},
		},
		{
			name: "node selector and required node affinity (OR of terms)",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: append(
				mkpods("arm", 3, "1", "1Gi", nil, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"} }),
				mkpods("bc", 3, "1", "1Gi", nil, func(p *corev1.Pod) {
					p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}}},
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-c"}}}},
					}}}}
				})...)},
		},
		{
			name: "preferred node affinity is honoured when it can be",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("od", 2, "1", "1Gi", nil, func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}}}}}}
			})},
			check: func(t *testing.T, plan packing.Plan) {
				for _, nc := range plan.NewNodeClaims {
					if nc.Cheapest.CapacityType != "on-demand" {
						t.Errorf("want on-demand as preferred, got %s", nc.Cheapest.CapacityType)
					}
				}
			},
		},
		{
			name: "a preference that cannot be met is given up",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("x", 1, "1", "1Gi", nil, func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"s390x"}}}}}}}}
			})},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.NewNodeClaims) != 1 {
					t.Errorf("want the pod planned without its preference, got %v", plan.Unschedulable)
				}
			},
		},
		{
			name: "taints: NoSchedule and NoExecute need tolerations, PreferNoSchedule and startup taints do not",
			input: packing.Input{NodePools: []packing.NodePool{pool("tainted", func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "team", Value: "a", Effect: corev1.TaintEffectNoExecute}, {Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
				np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}}
			})}, Pods: mkpods("team-a", 2, "1", "1Gi", nil, func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoExecute}}
			})},
		},
		{
			name:  "zonal topology spread counts existing pods",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Nodes: []packing.Node{{Node: existingNode("old-a", "zone-a", "2"), Pods: bound(mkpods("old", 2, "500m", "1Gi", web), "old-a")}}, Pods: mkpods("web", 7, "500m", "1Gi", web, spreadOn(zone, web, 1))},
			check: func(t *testing.T, plan packing.Plan) {
				if diff := cmp.Diff(map[string]int{"zone-a": 1, "zone-b": 3, "zone-c": 3}, zoneOf(plan)); diff != "" {
					t.Errorf("zones (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:  "hostname topology spread",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 6, "100m", "128Mi", web, spreadOn(host, web, 2))},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.NewNodeClaims) != 3 {
					t.Errorf("want 3 nodes of 2 pods, got %d", len(plan.NewNodeClaims))
				}
			},
		},
		{
			name:  "capacity type topology spread",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 4, "1", "1Gi", web, spreadOn(karpv1.CapacityTypeLabelKey, web, 1))},
		},
		{
			name: "zonal spread with minDomains beyond the zones",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 8, "100m", "128Mi", web, spreadOn(zone, web, 1), func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](5)
			})},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.Unschedulable) != 5 {
					t.Errorf("with fewer domains than minDomains each zone takes maxSkew pods: want 5 unschedulable, got %d", len(plan.Unschedulable))
				}
			},
		},
		{
			name:  "spread with matchLabelKeys counts each revision apart",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: append(mkpods("v1", 3, "100m", "128Mi", map[string]string{"app": "web", "rev": "1"}, spreadOn(zone, web, 1), matchKeys("rev")), mkpods("v2", 3, "100m", "128Mi", map[string]string{"app": "web", "rev": "2"}, spreadOn(zone, web, 1), matchKeys("rev"))...)},
		},
		{
			name:  "zonal self affinity keeps a group in one zone",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("db", 12, "2", "4Gi", web, podAffinity(zone, web, false))},
			check: func(t *testing.T, plan packing.Plan) {
				if len(zoneOf(plan)) != 1 {
					t.Errorf("want one zone, got %v", zoneOf(plan))
				}
			},
		},
		{
			name:  "affinity to pods on an existing node",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Nodes: []packing.Node{{Node: existingNode("cache", "zone-b", "4"), Pods: bound(mkpods("cache", 1, "1", "1Gi", map[string]string{"app": "cache"}), "cache")}}, Pods: mkpods("web", 3, "1", "1Gi", web, podAffinity(zone, map[string]string{"app": "cache"}, false))},
		},
		{
			name:  "hostname anti-affinity puts one pod per node",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 4, "100m", "128Mi", web, podAffinity(host, web, true))},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.NewNodeClaims) != 4 {
					t.Errorf("want 4 nodes, got %d", len(plan.NewNodeClaims))
				}
			},
		},
		{
			name:  "zonal anti-affinity allows one pod per zone",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 4, "100m", "128Mi", web, podAffinity(zone, web, true))},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.Unschedulable) != 1 {
					t.Errorf("want the fourth pod unschedulable, got %d", len(plan.Unschedulable))
				}
			},
		},
		{
			name: "an existing pod's anti-affinity keeps matching pods out of its zone",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Nodes: []packing.Node{{Node: existingNode("lonely", "zone-a", "4"), Pods: bound(mkpods("lonely", 1, "1", "1Gi", map[string]string{"app": "lonely"}, podAffinity(zone, web, true)), "lonely"), Schedulable: true}},
				Pods: mkpods("web", 3, "1", "1Gi", web)},
			check: func(t *testing.T, plan packing.Plan) {
				if zoneOf(plan)["zone-a"] != 0 || len(plan.Existing) != 0 {
					t.Errorf("want no web pod in zone-a, got %v and %d on the existing node", zoneOf(plan), len(plan.Existing))
				}
			},
		},
		{
			name:  "preferred anti-affinity is honoured",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("web", 3, "100m", "128Mi", web, preferredAnti(host, web))},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.NewNodeClaims) != 3 {
					t.Errorf("want 3 nodes, got %d", len(plan.NewNodeClaims))
				}
			},
		},
		{
			name: "host ports",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: mkpods("proxy", 3, "100m", "128Mi", nil, func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			})},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.NewNodeClaims) != 3 {
					t.Errorf("want 3 nodes, got %d", len(plan.NewNodeClaims))
				}
			},
		},
		{
			name: "volume topology: a bound zonal volume and a WaitForFirstConsumer class",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Pods: append(mkpods("bound", 1, "1", "1Gi", nil, withClaim("data-bound")), mkpods("wffc", 1, "1", "1Gi", nil, withClaim("data-new"))...),
				Volumes: packing.Volumes{
					Claims:         []*corev1.PersistentVolumeClaim{claim("data-bound", "pv-1", nil), claim("data-new", "", ptr.To("zonal"))},
					PersistentVols: []*corev1.PersistentVolume{zonalPV("pv-1", "zone-c")},
					StorageClasses: []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "zonal"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
						AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: zone, Values: []string{"zone-b"}}}}}}},
				}},
			check: func(t *testing.T, plan packing.Plan) {
				got := map[string]string{}
				for _, nc := range plan.NewNodeClaims {
					for _, p := range nc.Pods {
						got[p.Name] = nc.Cheapest.Zone
					}
				}
				if diff := cmp.Diff(map[string]string{"bound-0": "zone-c", "wffc-0": "zone-b"}, got); diff != "" {
					t.Errorf("zones (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:  "existing nodes with room are filled first",
			input: packing.Input{NodePools: []packing.NodePool{pool("general")}, Nodes: []packing.Node{{Node: existingNode("old", "zone-a", "4"), Schedulable: true}}, Pods: mkpods("web", 5, "1", "1Gi", nil)},
			check: func(t *testing.T, plan packing.Plan) {
				if len(plan.Existing) != 1 || len(plan.Existing[0].Pods) != 4 {
					t.Errorf("want 4 pods on the existing node, got %v", plan.Existing)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := packing.Solve(tt.input)
			accounted(t, tt.input, plan)
			verify(t, tt.input, plan)
			if tt.check != nil {
				tt.check(t, plan)
			}
		})
	}
}

func spreadOn(key string, l map[string]string, skew int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel(l)})
	}
}

func matchKeys(keys ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].MatchLabelKeys = keys }
}

func podAffinity(key string, l map[string]string, anti bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		term := []corev1.PodAffinityTerm{{TopologyKey: key, LabelSelector: sel(l)}}
		if anti {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}}
		} else {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}}
		}
	}
}

func preferredAnti(key string, l map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel(l)}}}}}
	}
}

func daemonSet(name, cpu, mem string, nodeSelector map[string]string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID(name)}, Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{Name: "d", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}}}
}

func withClaim(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
	}
}

func claim(name, volume string, class *string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if volume != "" {
		c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		c.Status.Phase = corev1.ClaimBound
	}
	return c
}

func zonalPV(name, zone string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: "data-bound"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: name}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}},
	}, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
}
