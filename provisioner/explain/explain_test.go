package explain

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var (
	update = flag.Bool("update", false, "rewrite the golden files in testdata")
	kube   client.Client
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testenv.Run(m, func(cfg *rest.Config) error {
		c, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
		kube = c
		return err
	}))
}

const (
	lastSchedulerMessage = "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. " +
		"preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod., NodeProvisioning: waiting for NodeClaim general-x7k2p to launch."
	provisionerMessage = `cannot provision a node for this pod: NodePool "gpu": the pod does not tolerate taint nvidia.com/gpu=true:NoSchedule; ` +
		`NodePool "general": no instance type has room for the pod's requests (cpu=64, memory=1Gi, pods=1); existing nodes: 0/3 nodes are available: 2 node(s): Insufficient cpu (NodeResourcesFit)`
)

// TestExplainPlannedPod reads a pending pod with scheduler events (an old and a new one),
// a NodeClaim that plans it and launched, and another pod's events, from a real API server.
func TestExplainPlannedPod(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, ctx, "web-1")
	pod.Status.NominatedNodeName = "ip-10-0-1-5.ec2.internal"
	pod.Status.Phase = corev1.PodPending
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatalf("updating pod status: %v", err)
	}
	now := time.Now()
	createEvent(t, ctx, pod, "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.", now.Add(-time.Minute), 1)
	createEvent(t, ctx, pod, "FailedScheduling", lastSchedulerMessage, now, 4)
	other := createPod(t, ctx, "web-2")
	createEvent(t, ctx, other, "FailedScheduling", "0/9 nodes are available: 9 Insufficient memory.", now.Add(time.Minute), 1)

	planned, err := nomination.EncodePods([]nomination.Pod{
		{Namespace: "default", Name: "web-1", UID: pod.UID},
		{Namespace: "default", Name: "web-2", UID: other.UID},
	})
	if err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "general-x7k2p",
			Annotations: map[string]string{
				nomination.PlannedPodsAnnotationKey: planned, karpv1.NodeClaimMinValuesRelaxedAnnotationKey: "true",
				cloudprovider.PlannedPriceAnnotationKey: `{"instance":0.03,"volumes":0.002192,"publicIPv4":0.005,"monitoring":0,"daemonSets":0.003}`,
			},
			Labels: map[string]string{
				karpv1.NodePoolLabelKey:        "general",
				corev1.LabelInstanceTypeStable: "m5.large",
				corev1.LabelTopologyZone:       "us-east-1a",
				karpv1.CapacityTypeLabelKey:    "spot",
			},
		},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			ExpireAfter:  karpv1.MustParseNillableDuration("720h"),
		},
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatalf("creating NodeClaim: %v", err)
	}
	nc.Status.NodeName = "ip-10-0-1-5.ec2.internal"
	nc.Status.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
	nc.Status.Price = &karpv1.Price{PerHour: "0.042792", Instance: "0.0324", Volumes: "0.002192", PublicIPv4: "0.005", DaemonSets: "0.0032"}
	nc.Status.Conditions = []metav1.Condition{
		{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.Now()},
		{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionFalse, Reason: "NodeNotFound", LastTransitionTime: metav1.Now()},
	}
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatalf("updating NodeClaim status: %v", err)
	}

	// The node has not registered: the overlays are matched with the NodeClaim's labels.
	for _, o := range []*karpv1alpha1.NodeOverlay{
		{ObjectMeta: metav1.ObjectMeta{Name: "spot-discount"}, Spec: karpv1alpha1.NodeOverlaySpec{
			Requirements:    []corev1.NodeSelectorRequirement{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			PriceAdjustment: ptr.To("-10%"),
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "m5-licence"}, Spec: karpv1alpha1.NodeOverlaySpec{
			Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
			Price:        ptr.To("0.2"),
			Weight:       ptr.To[int32](5),
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c5-only"}, Spec: karpv1alpha1.NodeOverlaySpec{
			Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large"}}},
			Price:        ptr.To("0.1"),
		}},
	} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatalf("creating NodeOverlay: %v", err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}

	got, err := Explain(ctx, kube, "default", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	want := &Explanation{
		Pod:               "default/web-1",
		SchedulerName:     "tailor-scheduler",
		Phase:             corev1.PodPending,
		NominatedNodeName: "ip-10-0-1-5.ec2.internal",
		Scheduling: &SchedulingFailure{
			Message:    lastSchedulerMessage,
			Count:      4,
			TotalNodes: 3,
			Reasons: []NodeCount{
				{Nodes: 1, Reason: "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"},
				{Nodes: 2, Reason: "Insufficient cpu"},
			},
			PostFilter: "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod., NodeProvisioning: waiting for NodeClaim general-x7k2p to launch",
		},
		NodeClaim: &NodeClaim{
			Name: "general-x7k2p", NodePool: "general", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot",
			NodeName: "ip-10-0-1-5.ec2.internal", ProviderID: "aws:///us-east-1a/i-0123456789abcdef0",
			Launched: "True", Registered: "False", PlannedPods: 2, MinValuesRelaxed: true,
			Price:         &cloudprovider.PriceParts{Instance: 0.0324, Volumes: 0.002192, PublicIPv4: 0.005, DaemonSets: 0.0032},
			PriceLaunched: true,
			Overlays:      []string{"m5-licence", "spot-discount"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Explain (-want +got):\n%s", diff)
	}
	renderGolden(t, "planned.golden", got)
}

// TestExplainUnprovisionablePod reads a pod no NodePool can take.
func TestExplainUnprovisionablePod(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, ctx, "big-1")
	createEvent(t, ctx, pod, "FailedScheduling", "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod., NodeProvisioning: waiting for the provisioner to plan a node.", time.Now(), 2)
	createEvent(t, ctx, pod, "FailedProvisioning", provisionerMessage, time.Now(), 1)

	got, err := Explain(ctx, kube, "default", "big-1")
	if err != nil {
		t.Fatal(err)
	}
	wantProvisioning := []ProvisioningFailure{{
		Message: provisionerMessage,
		Count:   1,
		NodePools: []NodePoolReason{
			{NodePool: "gpu", Reason: "the pod does not tolerate taint nvidia.com/gpu=true:NoSchedule"},
			{NodePool: "general", Reason: "no instance type has room for the pod's requests (cpu=64, memory=1Gi, pods=1)"},
		},
		ExistingNodes: "0/3 nodes are available: 2 node(s): Insufficient cpu (NodeResourcesFit)",
	}}
	if diff := cmp.Diff(wantProvisioning, got.Provisioning); diff != "" {
		t.Errorf("Provisioning (-want +got):\n%s", diff)
	}
	if got.NodeClaim != nil {
		t.Errorf("NodeClaim = %+v, want none", got.NodeClaim)
	}
	renderGolden(t, "unprovisionable.golden", got)
}

// TestExplainWithheldPods reads pods a NodePool could take that the provisioner launches
// nothing for: a gang member whose gang does not fit whole, and a pod over its quota.
func TestExplainWithheldPods(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, reason, message, golden string
	}{
		{"train-3", ReasonGangNotProvisioned, "gang default/train needs 16 pods running together: 0 already run or have capacity planned, and of its 16 pending pods only 12 could be placed; no capacity is launched for any of them until all fit", "gang.golden"},
		{"batch-7", ReasonOverQuota, "no capacity is launched for this pod: namespace default would use cpu 12 with this pod, over its ElasticQuota max of 10", "quota.golden"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			pod := createPod(t, ctx, c.name)
			createEvent(t, ctx, pod, "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod., NodeProvisioning: waiting for the provisioner to plan a node.", time.Now(), 3)
			createEvent(t, ctx, pod, c.reason, c.message, time.Now(), 2)
			got, err := Explain(ctx, kube, "default", c.name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&Withheld{Reason: c.reason, Message: c.message, Count: 2}, got.Withheld); diff != "" {
				t.Errorf("Withheld (-want +got):\n%s", diff)
			}
			renderGolden(t, c.golden, got)
		})
	}
}

// TestExplainPodRejectedOnItsPlannedCapacity reads a pod the scheduler rejected on the node
// planned for it, held back at its launch limit.
func TestExplainPodRejectedOnItsPlannedCapacity(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, ctx, "gpu-0")
	since := time.Date(2026, 12, 2, 2, 41, 7, 0, time.UTC)
	message := "planned capacity did not fit: DynamicResources: cannot allocate all claims (node ip-10-0-3-7.ec2.internal of NodeClaim gpu-x7k2p); " +
		"3 of 3 launches rejected (--launch-limit-per-pod): nothing more is launched for this pod until it, its NodePools or its claims change"
	pod.Status.Conditions = []corev1.PodCondition{{Type: launchlimit.PodCondition, Status: corev1.ConditionTrue, Reason: "LaunchLimitReached", Message: message, LastTransitionTime: metav1.NewTime(since)}}
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatalf("updating pod status: %v", err)
	}
	createEvent(t, ctx, pod, "FailedScheduling", "0/4 nodes are available: 1 node(s) had untolerated taint {CriticalAddonsOnly: true}, 3 cannot allocate all claims. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling., NodeProvisioning: waiting for the provisioner to plan a node.", time.Now(), 9)
	got, err := Explain(ctx, kube, "default", "gpu-0")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&CapacityRejected{Held: true, Reason: "LaunchLimitReached", Message: message, Since: since}, got.CapacityRejected); diff != "" {
		t.Errorf("CapacityRejected (-want +got):\n%s", diff)
	}
	if want := "pending: planned capacity did not fit: DynamicResources: cannot allocate all claims; nothing more is launched for it until it, its NodePools or its claims change (below)"; got.Verdict() != want {
		t.Errorf("Verdict() = %q, want %q", got.Verdict(), want)
	}
	renderGolden(t, "rejected.golden", got)
}

// TestExplainInfeasibleResize reads a running pod whose in-place resize its node cannot
// carry out.
func TestExplainInfeasibleResize(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, ctx, "resized-0")
	pod.Status.Phase = corev1.PodRunning
	message := "Node didn't have enough capacity: cpu, requested: 6000, capacity: 4000"
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible, Message: message, LastTransitionTime: metav1.Now()}}
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatalf("updating pod status: %v", err)
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "resized-0"}, Target: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-2-9.ec2.internal"}}
	if err := kube.SubResource("binding").Create(ctx, pod, binding); err != nil {
		t.Fatalf("binding pod: %v", err)
	}
	got, err := Explain(ctx, kube, "default", "resized-0")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Resize{Reason: corev1.PodReasonInfeasible, Message: message}, got.Resize); diff != "" {
		t.Errorf("Resize (-want +got):\n%s", diff)
	}
	renderGolden(t, "resize.golden", got)
}

func TestExplainMissingPod(t *testing.T) {
	_, err := Explain(context.Background(), kube, "default", "nope")
	want := "pod default/nope not found: check the name and the namespace (-n)"
	if err == nil || err.Error() != want {
		t.Errorf("Explain error = %v, want %q", err, want)
	}
}

func createPod(t *testing.T, ctx context.Context, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: "tailor-scheduler",
			Containers:    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	return pod
}

func createEvent(t *testing.T, ctx context.Context, pod *corev1.Pod, reason, msg string, at time.Time, count int32) {
	t.Helper()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: pod.Name + "."},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1",
		},
		Reason: reason, Message: msg, Type: corev1.EventTypeWarning, Count: count,
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
		Source: corev1.EventSource{Component: "test"},
	}
	if err := kube.Create(ctx, e); err != nil {
		t.Fatalf("creating event: %v", err)
	}
}

func renderGolden(t *testing.T, file string, ex *Explanation) {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, ex); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (go test -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("Render (-want +got):\n%s", diff)
	}
}

// TestExplainAReplacementInProgress reads a running pod whose copy starts before its
// eviction, and the copy: both say which pod replaces which, where, and what they wait for.
func TestExplainAReplacementInProgress(t *testing.T) {
	ctx := context.Background()
	old := createPod(t, ctx, "web-old")
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-old"}, Target: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-2-9.ec2.internal"}}
	if err := kube.SubResource("binding").Create(ctx, old, binding); err != nil {
		t.Fatalf("binding pod: %v", err)
	}
	copy := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-copy",
			Labels:      map[string]string{surge.ReplacesLabelKey: string(old.UID)},
			Annotations: map[string]string{surge.ReplacesAnnotationKey: old.Name, surge.DeadlineAnnotationKey: "2026-12-04T21:10:00Z"}},
		Spec: corev1.PodSpec{SchedulerName: "tailor-scheduler", NodeName: "ip-10-0-3-7.ec2.internal",
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := kube.Create(ctx, copy); err != nil {
		t.Fatal(err)
	}
	deadline := time.Date(2026, 12, 4, 21, 10, 0, 0, time.UTC)
	for _, c := range []struct {
		pod, golden string
		want        *Replacement
	}{
		{"web-old", "replaced.golden", &Replacement{Other: "web-copy", CopyNode: "ip-10-0-3-7.ec2.internal", Deadline: deadline}},
		{"web-copy", "copy.golden", &Replacement{IsCopy: true, Other: "web-old", CopyNode: "ip-10-0-3-7.ec2.internal", Deadline: deadline}},
	} {
		got, err := Explain(ctx, kube, "default", c.pod)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got.Replacement); diff != "" {
			t.Errorf("%s: Replacement (-want +got):\n%s", c.pod, diff)
		}
		renderGolden(t, c.golden, got)
	}
}
