package provisioning

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

type noTrigger struct{}

func (noTrigger) Trigger() {}

// fixture is a Provisioner on a real API server, with a clean slate of NodePools and NodeClaims.
type fixture struct {
	kube     client.Client
	prov     *Provisioner
	tracker  *nomination.Tracker
	recorder *record.FakeRecorder
	ns       string
}

func newFixture(t *testing.T, types InstanceTypeSource, pools ...*karpv1.NodePool) *fixture {
	t.Helper()
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		_ = kube.DeleteAllOf(ctx, &karpv1.NodePool{})
		claims := &karpv1.NodeClaimList{}
		_ = kube.List(ctx, claims)
		for i := range claims.Items {
			nc := &claims.Items[i]
			nc.Finalizers = nil
			_ = kube.Update(ctx, nc)
			_ = kube.Delete(ctx, nc)
		}
	})
	for _, np := range pools {
		if err := kube.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "prov-"}}
	if err := kube.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	tracker := nomination.NewTracker(clock.RealClock{})
	recorder := record.NewFakeRecorder(100)
	return &fixture{kube: kube, prov: New(kube, types, tracker, noTrigger{}, recorder, Options{Clock: clock.RealClock{}, ReplanWindow: DefaultReplanWindow}), tracker: tracker, recorder: recorder, ns: ns.Name}
}

func (f *fixture) pod(t *testing.T, name, cpu string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: corev1.PodSpec{SchedulerName: "tailor-scheduler", Containers: []corev1.Container{{
			Name: "app", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		}}},
	}
	for _, m := range mutate {
		m(p)
	}
	if err := f.kube.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) claims(t *testing.T) []karpv1.NodeClaim {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := f.kube.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func pool(name string, mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
			ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"team": "web"}},
			Spec: karpv1.NodeClaimTemplateSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}},
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Taints:       []corev1.Taint{},
			},
		}},
	}
	for _, m := range mutate {
		m(np)
	}
	return np
}

func TestProvisionCreatesNodeClaimsThatRecordTheirPods(t *testing.T) {
	// One m.xlarge costs less than two m.large: the pods share a node.
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1), instanceType("m.xlarge", 4, 16, 0.15)), pool("general"))
	a, b := f.pod(t, "a", "1500m"), f.pod(t, "b", "1500m")
	if n := f.prov.Submit([]Submission{{Pod: a}, {Pod: b}}); n != 2 {
		t.Fatalf("Submit() queued %d, want 2", n)
	}
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	claims := f.claims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims, want 1 holding both pods", len(claims))
	}
	nc := claims[0]
	if diff := cmp.Diff(map[string]string{karpv1.NodePoolLabelKey: "general", "team": "web"}, nc.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	planned, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]nomination.Pod{{Namespace: f.ns, Name: "a", UID: a.UID}, {Namespace: f.ns, Name: "b", UID: b.UID}}, planned); diff != "" {
		t.Errorf("planned pods (-want +got):\n%s", diff)
	}
	if !f.tracker.Planned(a.UID) || !f.tracker.Planned(b.UID) {
		t.Error("the tracker does not know the plan")
	}
	if diff := cmp.Diff([]string{karpv1.TerminationFinalizer}, nc.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	// The template it was made from, for static drift.
	np := &karpv1.NodePool{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{np.Hash(), karpv1.NodePoolHashVersion},
		[]string{nc.Annotations[karpv1.NodePoolHashAnnotationKey], nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey]}); diff != "" {
		t.Errorf("NodePool hash and version (-want +got):\n%s", diff)
	}
	last := nc.Spec.Requirements[len(nc.Spec.Requirements)-3]
	if diff := cmp.Diff([]string{"m.xlarge"}, last.Values); diff != "" || last.Key != corev1.LabelInstanceTypeStable {
		t.Errorf("instance type requirement %v, want m.xlarge only (3 vCPU of requests)", last)
	}
	if n := f.prov.Submit([]Submission{{Pod: a}}); n != 0 {
		t.Errorf("Submit() of a planned pod queued %d, want 0", n)
	}
	stale := f.prov.Submit([]Submission{{Pod: a, StaleNode: "other-node"}})
	if stale != 0 {
		t.Errorf("a stale report naming another node queued %d, want 0", stale)
	}
}

// TestAPodPlannedAgainLeavesTheNodeClaimItsNodeRejectedItOn: the NodeClaim's planned-pods
// annotation stops listing the pod, so a restarted provisioner does not take the pod back;
// once its backoff has passed, the pod is planned onto another NodeClaim.
func TestAPodPlannedAgainLeavesTheNodeClaimItsNodeRejectedItOn(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.xlarge", 4, 16, 0.15)), pool("general"))
	clk := clocktesting.NewFakeClock(time.Now())
	f.prov.clock, f.prov.launches = clk, DefaultLaunchLimit(clk)
	ctx := context.Background()
	a, b := f.pod(t, "a", "1500m"), f.pod(t, "b", "1500m")
	f.prov.Submit([]Submission{{Pod: a}, {Pod: b}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	first := f.claims(t)[0].Name
	f.tracker.SetNode(first, "ip-10-0-0-1.ec2.internal")
	if n := f.prov.Submit([]Submission{{Pod: a, StaleNode: "ip-10-0-0-1.ec2.internal"}}); n != 1 {
		t.Fatalf("Submit() of a pod its planned node rejected queued %d, want 1", n)
	}
	listed := func() map[string][]string {
		out := map[string][]string{}
		for _, nc := range f.claims(t) {
			pods, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
			if err != nil {
				t.Fatal(err)
			}
			key := "new"
			if nc.Name == first {
				key = "first"
			}
			for _, p := range pods {
				out[key] = append(out[key], p.Name)
			}
		}
		return out
	}
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"first": {"b"}}, listed()); diff != "" {
		t.Errorf("pods listed per NodeClaim while a backs off (-want +got):\n%s", diff)
	}
	clk.Step(launchlimit.DefaultBackoff)
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"first": {"b"}, "new": {"a"}}, listed()); diff != "" {
		t.Errorf("pods listed per NodeClaim after a's backoff (-want +got):\n%s", diff)
	}
	if plan, _ := f.tracker.Get(a.UID); plan.NodeClaim == first {
		t.Errorf("a is still planned onto %s", first)
	}
}

func TestProvisionExplainsPodsNoNodePoolCanTake(t *testing.T) {
	cloud := selling(instanceType("m.large", 2, 8, 0.1))
	cloud.SetNodeClassNotReady("missing", errors.New(`EC2NodeClass "missing" not found`))
	f := newFixture(t, cloud, pool("general"), pool("broken", func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "missing" }))
	huge := f.pod(t, "huge", "64")
	f.prov.Submit([]Submission{{Pod: huge, SchedulerMessage: "0/1 nodes are available: 1 node(s): Insufficient cpu (NodeResourcesFit)"}})
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.claims(t)); n != 0 {
		t.Errorf("%d NodeClaims for an unprovisionable pod, want 0", n)
	}
	want := []string{`Warning FailedProvisioning cannot provision a node for this pod: NodePool "general": no instance type has room for the pod's requests (cpu=64, memory=1Gi, pods=1): closest is m.large with cpu=1900m, memory=7692Mi, pods=58 allocatable after DaemonSets, short of cpu; NodePool "broken": node class not ready: EC2NodeClass "missing" not found; existing nodes: 0/1 nodes are available: 1 node(s): Insufficient cpu (NodeResourcesFit)`}
	if diff := cmp.Diff(want, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestProvisionHonoursTheProfilesNodePools(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1)),
		pool("general"), pool("batch", func(np *karpv1.NodePool) { np.Labels = map[string]string{"kind": "batch"} }))
	job := f.pod(t, "job", "1")
	f.prov.Submit([]Submission{{Pod: job, Profile: "tailor-batch", NodePools: NodePoolSelector{Names: []string{"batch"}}}})
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	claims := f.claims(t)
	if len(claims) != 1 || claims[0].Labels[karpv1.NodePoolLabelKey] != "batch" {
		t.Fatalf("NodeClaims %v, want one from NodePool batch", claims)
	}
	f.events() // the first pod's Planned event; events_test.go checks those
	lost := f.pod(t, "lost", "1")
	f.prov.Submit([]Submission{{Pod: lost, NodePools: NodePoolSelector{Names: []string{"gpu"}}}})
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	events := f.events()
	if len(events) != 1 || !strings.Contains(events[0], "no NodePool is available to this pod's scheduler profile") {
		t.Errorf("events %q, want one saying no NodePool is available", events)
	}
}

func TestProvisionCountsExistingNodeClaimsAgainstLimits(t *testing.T) {
	limited := func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
	}
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1)), pool("general", limited))
	first := f.pod(t, "first", "1")
	f.prov.Submit([]Submission{{Pod: first}})
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	claims := f.claims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(claims))
	}
	// Pretend it launched as a 4-vCPU instance: the NodePool's 4 CPUs are used up.
	nc := claims[0]
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	if err := f.kube.Status().Update(context.Background(), &nc); err != nil {
		t.Fatal(err)
	}
	f.events() // the first pod's Planned event; events_test.go checks those
	second := f.pod(t, "second", "1")
	f.prov.Submit([]Submission{{Pod: second}})
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.claims(t)); n != 1 {
		t.Errorf("%d NodeClaims after the limit was reached, want still 1", n)
	}
	events := f.events()
	if len(events) != 1 || !strings.Contains(events[0], `NodePool "general": its limits leave no room`) {
		t.Errorf("events %q, want one about the limits", events)
	}
}

type failingInstanceTypes struct{}

func (failingInstanceTypes) InstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return nil, errors.New("EC2 is unreachable")
}

func TestProvisionRequeuesPodsWhenItFails(t *testing.T) {
	f := newFixture(t, selling(), pool("general"))
	f.prov.instanceTypes = failingInstanceTypes{}
	a := f.pod(t, "a", "1")
	f.prov.Submit([]Submission{{Pod: a}})
	if err := f.prov.Provision(context.Background()); err == nil || !strings.Contains(err.Error(), "EC2 is unreachable") {
		t.Fatalf("Provision() error = %v, want the provider's error", err)
	}
	if n := f.prov.Pending(); n != 1 {
		t.Errorf("%d pods pending after a failed batch, want the pod back in the queue", n)
	}
}

// laggingCache reads a NodeClaim as it was before the last write, once, the way the
// manager's cache can right after the provisioner's previous batch wrote it.
type laggingCache struct {
	client.Client
	stale *karpv1.NodeClaim
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if nc, ok := obj.(*karpv1.NodeClaim); ok && c.stale != nil && key.Name == c.stale.Name {
		c.stale.DeepCopyInto(nc)
		c.stale = nil
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestPodsRecordedOnANodeClaimReadFromALaggingCacheAreAllKept: the API server rejects the
// patch of a stale read, the provisioner reads again, and no pod planned earlier is lost.
func TestPodsRecordedOnANodeClaimReadFromALaggingCacheAreAllKept(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.xlarge", 4, 16, 0.15)), pool("general"))
	ctx := context.Background()
	a, b := f.pod(t, "a", "1"), f.pod(t, "b", "1")
	f.prov.Submit([]Submission{{Pod: a}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	nc := f.claims(t)[0]
	stale := nc.DeepCopy()
	delete(stale.Annotations, nomination.PlannedPodsAnnotationKey)
	stale.ResourceVersion = "1"
	prov := New(&laggingCache{Client: f.kube, stale: stale}, nil, f.tracker, noTrigger{}, f.recorder, Options{Clock: clock.RealClock{}, ReplanWindow: DefaultReplanWindow})
	placement := packing.Placement{Node: &packing.Node{NodeClaim: &nc, Schedulable: true, Node: &corev1.Node{}}, Pods: []*corev1.Pod{b}}
	if err := prov.addToInFlight(ctx, placement); err != nil {
		t.Fatal(err)
	}
	got := &karpv1.NodeClaim{}
	if err := f.kube.Get(ctx, client.ObjectKeyFromObject(&nc), got); err != nil {
		t.Fatal(err)
	}
	planned, err := nomination.DecodePods(got.Annotations[nomination.PlannedPodsAnnotationKey])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]nomination.Pod{{Namespace: f.ns, Name: "a", UID: a.UID}, {Namespace: f.ns, Name: "b", UID: b.UID}}, planned); diff != "" {
		t.Errorf("pods recorded on the NodeClaim (-want +got):\n%s", diff)
	}
}
