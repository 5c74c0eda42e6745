package informers_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/informers"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// TestPlansOfTransformedObjectsAreTheSame builds a cluster from each shared workload, batch
// by batch as the provisioner does: each batch is planned onto the nodes the earlier ones
// launched, holding their pods. Every batch is planned twice, from the objects as the API
// server stores them and as the sidecar's cache holds them, and the plans must be the
// same. The pods carry, besides what a Deployment's pods carry, what the planner reads:
// sidecar and plain init containers, host ports, overhead, pod-level requests, claimed and
// ephemeral volumes, and a DaemonSet takes a host port and room on every node.
func TestPlansOfTransformedObjectsAreTheSame(t *testing.T) {
	const pods, batch = 600, 60
	for _, shape := range workloads.Shapes {
		t.Run(shape, func(t *testing.T) {
			in := withPlannerFeatures(workloads.Load(t, shape, pods))
			all := in.Pods
			in.Pods = nil
			existing, created := 0, 0
			for i := 0; i < len(all); i += batch {
				round := in
				round.Pods = all[i:min(i+batch, len(all))]
				want := packing.Solve(round)
				got := packing.Solve(cached(t, round))
				if diff := cmp.Diff(workloads.Summarize(want), workloads.Summarize(got)); diff != "" {
					t.Fatalf("batch of pods %d to %d, on %d nodes: the plan from cached objects differs (-stored +cached):\n%s", i, i+len(round.Pods), len(in.Nodes), diff)
				}
				existing += len(want.Existing)
				created += len(want.NewNodeClaims)
				in = applied(t, in, want)
			}
			// Both halves of a plan were compared.
			if existing == 0 || created == 0 {
				t.Errorf("%d placements on nodes and %d new NodeClaims over all batches; want some of each", existing, created)
			}
		})
	}
}

// withPlannerFeatures dresses the workload's pods as realisticPod does and gives some of
// them what else the planner reads, with the volumes and a DaemonSet those need.
func withPlannerFeatures(in packing.Input) packing.Input {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	in.Volumes.StorageClasses = append(in.Volumes.StorageClasses, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"us-east-1a", "us-east-1c"}},
		}}},
	})
	in.DaemonSets = append(in.DaemonSets, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-exporter", UID: "node-exporter"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "exporter", Ports: []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}},
				Resources: corev1.ResourceRequirements{Requests: list("50m", "64Mi")}}},
		}}},
	})
	mib := func(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }
	for i, p := range in.Pods {
		realisticPod(p, i)
		switch {
		case i%7 == 0:
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: corev1.ResourceRequirements{Requests: list("100m", "128Mi")}})
		case i%11 == 0:
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "migrate",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: mib(512)}}})
		case i%13 == 0:
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "node", ContainerPort: 8443, HostPort: 8443, Protocol: corev1.ProtocolTCP})
		case i%17 == 0:
			p.Spec.Overhead = list("100m", "64Mi")
		case i%19 == 0:
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: list("1", "1Gi")}
		case i%23 == 0:
			name := "data-" + p.Name
			in.Volumes.Claims = append(in.Volumes.Claims, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + p.Name},
			})
			in.Volumes.PersistentVols = append(in.Volumes.PersistentVols, &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-" + p.Name},
				Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}}},
				}}}}},
			})
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		case i%29 == 0:
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("gp3")}}}}})
		}
	}
	return in
}

func list(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// cached is the input as the sidecar's cache holds it: pods and nodes transformed, on
// copies.
func cached(t *testing.T, in packing.Input) packing.Input {
	t.Helper()
	out := in
	out.Pods = transformedPods(t, in.Pods)
	out.Nodes = make([]packing.Node, len(in.Nodes))
	for i, n := range in.Nodes {
		node, err := informers.Node(n.Node.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		out.Nodes[i] = packing.Node{Node: node.(*corev1.Node), NodeClaim: n.NodeClaim, Pods: transformedPods(t, n.Pods), Schedulable: n.Schedulable}
	}
	return out
}

func transformedPods(t *testing.T, pods []*corev1.Pod) []*corev1.Pod {
	t.Helper()
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		obj, err := informers.Pod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = obj.(*corev1.Pod)
	}
	return out
}

// applied is the cluster once the plan has run: the pods bound where it put them, running,
// on realistic nodes launched for its new NodeClaims at their cheapest offering.
func applied(t *testing.T, in packing.Input, plan packing.Plan) packing.Input {
	t.Helper()
	bind := func(pods []*corev1.Pod, node string) []*corev1.Pod {
		out := make([]*corev1.Pod, len(pods))
		for i, p := range pods {
			b := p.DeepCopy()
			b.Spec.NodeName = node
			b.Status = runningStatus(b, i)
			out[i] = b
		}
		return out
	}
	index := map[string]int{}
	for i, n := range in.Nodes {
		index[n.Node.Name] = i
	}
	in.Nodes = slices.Clone(in.Nodes)
	for _, pl := range plan.Existing {
		i := index[pl.Node.Node.Name]
		in.Nodes[i].Pods = append(slices.Clone(in.Nodes[i].Pods), bind(pl.Pods, pl.Node.Node.Name)...)
	}
	for _, nc := range plan.NewNodeClaims {
		name := fmt.Sprintf("node-%05d", len(in.Nodes))
		in.Nodes = append(in.Nodes, packing.Node{Node: launchedNode(t, name, len(in.Nodes), nc), Pods: bind(nc.Pods, name), Schedulable: true})
	}
	return in
}

// launchedNode is the node a NodeClaim's cheapest offering makes.
func launchedNode(t *testing.T, name string, i int, nc packing.NewNodeClaim) *corev1.Node {
	t.Helper()
	for _, it := range nc.InstanceTypes {
		if it.Name != nc.Cheapest.InstanceType {
			continue
		}
		labels := requirements.SingleValueLabels(nc.Requirements)
		maps.Copy(labels, it.Labels)
		labels[corev1.LabelTopologyZone] = nc.Cheapest.Zone
		labels[karpv1.CapacityTypeLabelKey] = nc.Cheapest.CapacityType
		labels[karpv1.NodePoolLabelKey] = nc.NodePool.Name
		return realisticNode(name, i, labels, nc.NodePool.Spec.Template.Spec.Taints, it.Allocatable())
	}
	t.Fatalf("NodeClaim's cheapest type %s is not among its types", nc.Cheapest.InstanceType)
	return nil
}
