package garbagecollection

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/fake"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drain"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

// fixture is the controller on a real API server and an in-memory cloud; they share a
// fake clock.
type fixture struct {
	ctx      context.Context
	kube     client.Client
	clock    *clocktesting.FakeClock
	cloud    *fake.CloudProvider
	gc       *Controller
	recorder *eventLog
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	// NodeClaim creation times come from the API server's clock: the fake one starts there.
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(clk)
	cloud.SetInstanceTypes(&cloudprovider.InstanceType{
		Name:      "m5.large",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
		Offerings: []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, Available: true}},
	})
	recorder := &eventLog{}
	gc, err := NewController(kube, kube, cloud, recorder, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		claims := &karpv1.NodeClaimList{}
		_ = kube.List(context.Background(), claims)
		for i := range claims.Items {
			nc := &claims.Items[i]
			nc.Finalizers = nil
			_ = kube.Update(context.Background(), nc)
			_ = kube.Delete(context.Background(), nc)
		}
	})
	return &fixture{ctx: ctx, kube: kube, clock: clk, cloud: cloud, gc: gc, recorder: recorder}
}

// launch starts an instance for the NodeClaim name, which the API server need not have, and
// returns its provider ID.
func (f *fixture) launch(t *testing.T, nodeClaim string) string {
	t.Helper()
	nc, err := f.cloud.Create(f.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nodeClaim}})
	if err != nil {
		t.Fatal(err)
	}
	return nc.Status.ProviderID
}

// nodeClaim creates a NodeClaim with the termination finalizer; a provider ID marks it
// launched now.
func (f *fixture) nodeClaim(t *testing.T, name, providerID string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		},
	}
	if err := f.kube.Create(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	if providerID != "" {
		nc.Status.ProviderID = providerID
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
		nc.Status.Conditions[0].LastTransitionTime = metav1.NewTime(f.clock.Now())
		if err := f.kube.Status().Update(f.ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	return nc
}

func (f *fixture) collect(t *testing.T) {
	t.Helper()
	if err := f.gc.Collect(f.ctx); err != nil {
		t.Fatal(err)
	}
}

// states returns the state of each instance by provider ID.
func (f *fixture) states(t *testing.T, providerIDs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range providerIDs {
		_, err := f.cloud.Get(f.ctx, id)
		if err == nil {
			out[id] = "live"
		} else {
			out[id] = "gone"
		}
	}
	return out
}

// deleting names the NodeClaims with a deletion timestamp, and "absent" for those gone.
func (f *fixture) deleting(t *testing.T, names ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range names {
		nc := &karpv1.NodeClaim{}
		err := f.kube.Get(f.ctx, client.ObjectKey{Name: n}, nc)
		out[n] = client.IgnoreNotFound(err) == nil && (err != nil || nc.DeletionTimestamp != nil)
	}
	return out
}

func TestOrphanedInstancesAreTerminatedAfterTheGrace(t *testing.T) {
	f := newFixture(t)
	orphan := f.launch(t, "deleted-claim")
	owned := f.launch(t, "owned")
	f.nodeClaim(t, "owned", owned)
	// A NodeClaim whose launch has not recorded its instance yet.
	launching := f.launch(t, "launching")
	f.nodeClaim(t, "launching", "")

	terminatedBefore := testutil.ToFloat64(orphansTerminated)
	type orphanMetrics struct{ Found, Terminated float64 }
	metricsNow := func() orphanMetrics {
		return orphanMetrics{Found: testutil.ToFloat64(orphanedInstances), Terminated: testutil.ToFloat64(orphansTerminated) - terminatedBefore}
	}

	f.clock.Step(29 * time.Second)
	f.collect(t)
	want := map[string]string{orphan: "live", owned: "live", launching: "live"}
	if diff := cmp.Diff(want, f.states(t, orphan, owned, launching)); diff != "" {
		t.Errorf("within the grace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orphanMetrics{Found: 1}, metricsNow()); diff != "" {
		t.Errorf("orphan metrics within the grace (-want +got):\n%s", diff)
	}

	f.clock.Step(2 * time.Second)
	f.collect(t)
	want[orphan] = "gone"
	if diff := cmp.Diff(want, f.states(t, orphan, owned, launching)); diff != "" {
		t.Errorf("after the grace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orphanMetrics{Found: 1, Terminated: 1}, metricsNow()); diff != "" {
		t.Errorf("orphan metrics on the pass that terminated it (-want +got):\n%s", diff)
	}

	f.collect(t)
	if diff := cmp.Diff(orphanMetrics{Found: 0, Terminated: 1}, metricsNow()); diff != "" {
		t.Errorf("orphan metrics once it is gone (-want +got):\n%s", diff)
	}
}

// TestAnOrphanThatCannotBeTerminatedIsTriedWithBackoff denies its termination for good:
// the passes every 30 s try the orphan at most 7 times in its first ten minutes, then once
// every five, and the NodeClaims' collection goes on meanwhile.
func TestAnOrphanThatCannotBeTerminatedIsTriedWithBackoff(t *testing.T) {
	f := newFixture(t)
	orphan := f.launch(t, "deleted-claim")
	denied := errors.New("terminating instance: UnauthorizedOperation")
	f.cloud.FailDeletes(fake.Always, denied)
	f.clock.Step(DefaultOrphanGrace)
	start := f.clock.Now()
	var attempts []time.Duration
	for f.clock.Since(start) <= 20*time.Minute {
		before := len(f.cloud.Calls().Delete)
		if err := f.gc.Collect(f.ctx); err != nil && !errors.Is(err, denied) {
			t.Fatal(err)
		}
		if len(f.cloud.Calls().Delete) > before {
			attempts = append(attempts, f.clock.Since(start))
		}
		f.clock.Step(DefaultPeriod)
	}
	want := []time.Duration{0, 30 * time.Second, 60 * time.Second, 90 * time.Second, 150 * time.Second, 240 * time.Second, 420 * time.Second, 720 * time.Second, 1020 * time.Second}
	if diff := cmp.Diff(want, attempts); diff != "" {
		t.Errorf("times of the termination attempts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{orphan: "live"}, f.states(t, orphan)); diff != "" {
		t.Errorf("instance state (-want +got):\n%s", diff)
	}
}

func TestNodeClaimsWhoseInstanceIsGoneAreDeletedAndReleased(t *testing.T) {
	f := newFixture(t)
	gone := f.launch(t, "gone")
	f.nodeClaim(t, "gone", gone)
	never := f.nodeClaim(t, "never-existed", "fake:///us-east-1a/i-dead")
	live := f.launch(t, "live")
	f.nodeClaim(t, "live", live)
	// Someone terminates the instance behind Tailor's back.
	if !f.cloud.Terminate(gone) {
		t.Fatalf("instance %s was not live", gone)
	}

	f.collect(t)
	if diff := cmp.Diff(map[string]bool{"gone": true, "never-existed": true, "live": false}, f.deleting(t, "gone", "never-existed", "live")); diff != "" {
		t.Errorf("deleting (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"InstanceGone", "InstanceGone"}, f.recorder.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Termination does not wait for an instance that is not there: it releases at once.
	term := termination.NewController(f.kube, f.kube, f.cloud, drain.New(f.kube, f.kube, kubernetes.NewForConfigOrDie(cfg)), record.NewFakeRecorder(10), f.clock)
	for _, name := range []string{"gone", never.Name} {
		res, err := term.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		if err != nil || res.RequeueAfter != 0 {
			t.Fatalf("terminating %s: %v, requeue after %s", name, err, res.RequeueAfter)
		}
	}
	claims := &karpv1.NodeClaimList{}
	if err := f.kube.List(f.ctx, claims); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nc := range claims.Items {
		names = append(names, nc.Name)
	}
	if diff := cmp.Diff([]string{"live"}, names); diff != "" {
		t.Errorf("NodeClaims left (-want +got):\n%s", diff)
	}
}

func TestNodeClaimsNotLaunchedOrRegisteredInTimeAreDeleted(t *testing.T) {
	f := newFixture(t)
	f.nodeClaim(t, "unlaunched", "")
	unregistered := f.launch(t, "unregistered")
	f.nodeClaim(t, "unregistered", unregistered)
	registered := f.launch(t, "registered")
	nc := f.nodeClaim(t, "registered", registered)
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	if err := f.kube.Status().Update(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	// Its node joined, but its registration is not recorded yet (the lifecycle controller's
	// cache lagged the API server after an outage): no registration failure.
	joined := f.launch(t, "joined")
	nc = f.nodeClaim(t, "joined", joined)
	nc.Status.NodeName = "ip-10-0-0-9.ec2.internal"
	if err := f.kube.Status().Update(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Create(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName}, Spec: corev1.NodeSpec{ProviderID: joined}}); err != nil {
		t.Fatal(err)
	}
	names := []string{"unlaunched", "unregistered", "registered", "joined"}

	f.clock.Step(4 * time.Minute)
	f.collect(t)
	if diff := cmp.Diff(map[string]bool{"unlaunched": false, "unregistered": false, "registered": false, "joined": false}, f.deleting(t, names...)); diff != "" {
		t.Errorf("at 4m (-want +got):\n%s", diff)
	}
	f.clock.Step(time.Minute + 2*time.Second)
	f.collect(t)
	if diff := cmp.Diff(map[string]bool{"unlaunched": true, "unregistered": false, "registered": false, "joined": false}, f.deleting(t, names...)); diff != "" {
		t.Errorf("past the launch timeout (-want +got):\n%s", diff)
	}
	f.clock.Step(10 * time.Minute)
	f.collect(t)
	if diff := cmp.Diff(map[string]bool{"unlaunched": true, "unregistered": true, "registered": false, "joined": false}, f.deleting(t, names...)); diff != "" {
		t.Errorf("past the registration timeout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"LaunchTimeout", "RegistrationTimeout"}, f.recorder.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The unregistered NodeClaim's instance is still there: termination ends it.
	if diff := cmp.Diff(map[string]string{unregistered: "live", registered: "live"}, f.states(t, unregistered, registered)); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
}

// eventLog records event reasons.
type eventLog struct {
	mu   sync.Mutex
	list []string
}

var _ record.EventRecorder = (*eventLog)(nil)

func (l *eventLog) Event(_ runtime.Object, _, reason, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, reason)
}

func (l *eventLog) Eventf(obj runtime.Object, eventtype, reason, _ string, _ ...any) {
	l.Event(obj, eventtype, reason, "")
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, _ string, _ ...any) {
	l.Event(obj, eventtype, reason, "")
}

func (l *eventLog) reasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.list...)
}
