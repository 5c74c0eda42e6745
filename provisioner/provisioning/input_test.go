package provisioning

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// create makes an object on the API server and deletes it when the test ends; a status, if
// given, is written after creation.
func (f *fixture) create(t *testing.T, obj client.Object, status func()) {
	t.Helper()
	ctx := context.Background()
	if err := f.kube.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.kube.Delete(ctx, obj) })
	if status != nil {
		status()
		if err := f.kube.Status().Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) node(t *testing.T, name, providerID, zone, cpu string, taints ...corev1.Taint) *corev1.Node {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone}},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: taints},
	}
	f.create(t, n, func() {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("58")}
	})
	return n
}

func (f *fixture) boundPod(t *testing.T, name, node string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "pause"}}},
	}
	f.create(t, p, func() { p.Status.Phase = phase })
	return p
}

func (f *fixture) nodeClaim(t *testing.T, pool string, status func(*karpv1.NodeClaimStatus)) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pool + "-", Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
		Spec: karpv1.NodeClaimSpec{
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoExecute}},
			Requirements:  []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}}},
			NodeClassRef:  &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	}
	var update func()
	if status != nil {
		update = func() { status(&nc.Status) }
	}
	f.create(t, nc, update)
	return nc
}

// nodeSummary is what a test checks of a planner node.
type nodeSummary struct {
	Name        string
	NodeClaim   string
	Schedulable bool
	Hostname    string
	Zone        string
	NodePool    string
	CPU         string
	Taints      []string
	Pods        []string
}

func summarizeNodes(nodes []packing.Node) []nodeSummary {
	out := make([]nodeSummary, 0, len(nodes))
	for _, n := range nodes {
		s := nodeSummary{
			Name: n.Node.Name, Schedulable: n.Schedulable,
			Hostname: n.Node.Labels[corev1.LabelHostname], Zone: n.Node.Labels[corev1.LabelTopologyZone], NodePool: n.Node.Labels[karpv1.NodePoolLabelKey],
		}
		if n.NodeClaim != nil {
			s.NodeClaim = n.NodeClaim.Name
		}
		if q, ok := n.Node.Status.Allocatable[corev1.ResourceCPU]; ok {
			s.CPU = q.String()
		}
		for _, t := range n.Node.Spec.Taints {
			s.Taints = append(s.Taints, t.ToString())
		}
		for _, p := range n.Pods {
			s.Pods = append(s.Pods, p.Name)
		}
		out = append(out, s)
	}
	return out
}

func names[T client.Object](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		name := o.GetName()
		if o.GetNamespace() != "" {
			name = o.GetNamespace() + "/" + name
		}
		out = append(out, name)
	}
	return out
}

func TestInputDescribesTheCluster(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1)), pool("general"), pool("batch"))
	ctx := context.Background()

	// A node Tailor does not manage, with a running pod and a finished one.
	f.node(t, "system-0", "", "us-east-1a", "2", corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	f.boundPod(t, "coredns", "system-0", corev1.PodRunning)
	f.boundPod(t, "backup", "system-0", corev1.PodSucceeded)

	// A launched NodeClaim whose node registered: one pod landed, another is still on its way.
	launched := f.nodeClaim(t, "general", func(s *karpv1.NodeClaimStatus) {
		s.ProviderID, s.NodeName = "aws:///us-east-1b/i-0001", "ip-10-0-1-1.ec2.internal"
		s.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("58")}
	})
	f.node(t, "ip-10-0-1-1.ec2.internal", "aws:///us-east-1b/i-0001", "us-east-1b", "1900m")
	f.boundPod(t, "landed", "ip-10-0-1-1.ec2.internal", corev1.PodRunning)
	onItsWay := f.pod(t, "on-its-way", "500m")
	f.tracker.Plan(launched.Name, "ip-10-0-1-1.ec2.internal", podRefs([]*corev1.Pod{onItsWay}))

	// A launched NodeClaim of a NodePool the profile may not use, its node not registered yet.
	other := f.nodeClaim(t, "batch", func(s *karpv1.NodeClaimStatus) {
		s.ProviderID, s.NodeName = "aws:///us-east-1b/i-0002", "ip-10-0-1-2.ec2.internal"
		s.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m")}
	})
	// A NodeClaim not launched yet, with a pod planned onto it.
	unlaunched := f.nodeClaim(t, "general", nil)
	queued := f.pod(t, "queued", "1")
	f.tracker.Plan(unlaunched.Name, "", podRefs([]*corev1.Pod{queued}))

	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "logs"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "logs"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "logs"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "fluent-bit", Image: "fluent-bit"}}},
			},
		},
	}
	f.create(t, ds, nil)
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3-" + f.ns}, Provisioner: "ebs.csi.aws.com"}
	f.create(t, class, nil)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "data-" + f.ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}},
		},
	}
	f.create(t, pv, nil)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			VolumeName:  pv.Name,
		},
	}
	f.create(t, pvc, nil)

	stateful := f.pod(t, "stateful", "1", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	})

	unbound, err := f.prov.unboundPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := f.prov.input(ctx, NodePoolSelector{Names: []string{"general"}}, []*corev1.Pod{stateful}, unbound, inputOptions{})
	if err != nil {
		t.Fatal(err)
	}

	want := []nodeSummary{
		{
			Name: unlaunched.Name, NodeClaim: unlaunched.Name,
			Hostname: unlaunched.Name, Zone: "us-east-1b", NodePool: "general",
			Taints: []string{"dedicated=web:NoSchedule"}, Pods: []string{"queued"},
		},
		{
			Name: "ip-10-0-1-1.ec2.internal", NodeClaim: launched.Name, Schedulable: true,
			Hostname: "ip-10-0-1-1.ec2.internal", Zone: "us-east-1b", NodePool: "general", CPU: "1900m",
			Taints: []string{"dedicated=web:NoSchedule"}, Pods: []string{"landed", "on-its-way"},
		},
		{
			Name: "ip-10-0-1-2.ec2.internal", NodeClaim: other.Name,
			Hostname: "ip-10-0-1-2.ec2.internal", Zone: "us-east-1b", NodePool: "batch", CPU: "1930m",
			Taints: []string{"dedicated=web:NoSchedule"},
		},
		{
			Name: "system-0", Hostname: "system-0", Zone: "us-east-1a", CPU: "2",
			// The API server taints a node not Ready when it is created; it is described as it is.
			Taints: []string{"CriticalAddonsOnly=true:NoSchedule", "node.kubernetes.io/not-ready:NoSchedule"}, Pods: []string{"coredns"},
		},
	}
	if diff := cmp.Diff(want, summarizeNodes(in.Nodes)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{f.ns + "/logs"}, names(in.DaemonSets)); diff != "" {
		t.Errorf("DaemonSets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{f.ns + "/data"}, names(in.Volumes.Claims)); diff != "" {
		t.Errorf("PersistentVolumeClaims (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{pv.Name}, names(in.Volumes.PersistentVols)); diff != "" {
		t.Errorf("PersistentVolumes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{class.Name}, names(in.Volumes.StorageClasses)); diff != "" {
		t.Errorf("StorageClasses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"stateful"}, podNames(in.Pods)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}

func TestInputLeavesVolumesOutWhenNoPodHasAClaim(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1)), pool("general"))
	ctx := context.Background()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3-" + f.ns}, Provisioner: "ebs.csi.aws.com"}
	f.create(t, class, nil)
	web := f.pod(t, "web", "1")
	in, _, err := f.prov.input(ctx, NodePoolSelector{}, []*corev1.Pod{web}, map[types.UID]*corev1.Pod{web.UID: web}, inputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(packing.Volumes{}, in.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
}

// TestProvisionPlansOntoTheRegisteredNodeOfAnInFlightNodeClaim: a pod that fits the room
// left on a launched NodeClaim whose node registered is recorded on that NodeClaim, once.
func TestProvisionPlansOntoTheRegisteredNodeOfAnInFlightNodeClaim(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1)), pool("general"))
	ctx := context.Background()
	nc := f.nodeClaim(t, "general", func(s *karpv1.NodeClaimStatus) {
		s.ProviderID, s.NodeName = "aws:///us-east-1b/i-0003", "ip-10-0-1-3.ec2.internal"
		s.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("58")}
	})
	f.node(t, "ip-10-0-1-3.ec2.internal", "aws:///us-east-1b/i-0003", "us-east-1b", "1900m")
	f.boundPod(t, "landed", "ip-10-0-1-3.ec2.internal", corev1.PodRunning)
	extra := f.pod(t, "extra", "500m", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	})
	f.prov.Submit([]Submission{{Pod: extra}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	got := &karpv1.NodeClaim{}
	if err := f.kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	planned, err := nomination.DecodePods(got.Annotations[nomination.PlannedPodsAnnotationKey])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]nomination.Pod{{Namespace: f.ns, Name: "extra", UID: extra.UID}}, planned); diff != "" {
		t.Errorf("pods recorded on the in-flight NodeClaim (-want +got):\n%s", diff)
	}
	if n := len(f.claims(t)); n != 1 {
		t.Errorf("%d NodeClaims, want only the in-flight one", n)
	}
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// TestClusterInputListsThePodsOnTheirWayToANode: disruption waits while pods it moved look
// for a node, so the cluster's view carries the pods bound to none.
func TestClusterInputListsThePodsOnTheirWayToANode(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1)), pool("general"))
	f.node(t, "ip-10-0-1-4.ec2.internal", "aws:///us-east-1b/i-0004", "us-east-1b", "1900m")
	f.boundPod(t, "running", "ip-10-0-1-4.ec2.internal", corev1.PodRunning)
	f.pod(t, "web-b", "1")
	f.pod(t, "web-a", "1")
	in, err := f.prov.ClusterInput(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for _, p := range in.Pods {
		if p.Namespace == f.ns {
			pending = append(pending, p.Name)
		}
	}
	if diff := cmp.Diff([]string{"web-a", "web-b"}, pending); diff != "" {
		t.Errorf("pods on their way to a node (-want +got):\n%s", diff)
	}
}
