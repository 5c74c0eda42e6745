package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/fake"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var (
	restConfig *rest.Config
	kube       client.Client
)

func TestMain(m *testing.M) {
	testenv.Main(m, &restConfig, &kube)
}

// cloudSelling is an in-memory cloud that sells an amd64 m7i.large with the offerings, an
// on-demand one in us-east-1a when none are given.
func cloudSelling(offerings ...cloudprovider.Offering) *fake.CloudProvider {
	if len(offerings) == 0 {
		offerings = []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.1008, Available: true}}
	}
	c := fake.New(nil)
	c.SetInstanceTypes(&cloudprovider.InstanceType{
		Name:      "m7i.large",
		Labels:    map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
		Offerings: offerings,
	})
	return c
}

// launcher starts the sidecar's shutdown in the middle of a launch, records whether the
// launch could still reach the cloud, and launches.
type launcher struct {
	shutdown  context.CancelFunc
	cancelled bool
}

func (l *launcher) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	l.shutdown()
	l.cancelled = ctx.Err() != nil
	out := nc.DeepCopy()
	out.Labels = map[string]string{corev1.LabelInstanceTypeStable: "m7i.large"}
	out.Annotations = map[string]string{awsv1.SubnetAnnotationKey: "subnet-a"}
	out.Status.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
	out.Status.NodeName = "ip-10-0-0-1.ec2.internal"
	return out, nil
}

func (l *launcher) Adopt(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, nil
}

// TestLaunchFinishesWhileTheSidecarShutsDown shuts the sidecar down while a launch is in
// flight: the launch still reaches the cloud and is recorded on the NodeClaim.
func TestLaunchFinishesWhileTheSidecarShutsDown(t *testing.T) {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shutdown"},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		},
	}
	if err := kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	ctx, shutdown := context.WithCancel(context.Background())
	l := &launcher{shutdown: shutdown}
	c := NewController(kube, l, record.NewFakeRecorder(10), clocktesting.NewFakeClock(nc.CreationTimestamp.Time))
	if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
		t.Fatal(err)
	}
	if l.cancelled {
		t.Error("the launch saw the shutdown's cancellation")
	}
	got := &karpv1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"aws:///us-east-1a/i-0123456789abcdef0", "m7i.large", "subnet-a"},
		[]string{got.Status.ProviderID, got.Labels[corev1.LabelInstanceTypeStable], got.Annotations[awsv1.SubnetAnnotationKey]}); diff != "" {
		t.Errorf("recorded launch (-want +got):\n%s", diff)
	}
}

// TestALaunchRecordsWhatTheNodeCosts launches a NodeClaim planned as a type whose DaemonSet
// pods took a tenth of the instance as a type twice as dear: its status.price is the launched
// node's, the DaemonSets' share split off as planned.
func TestALaunchRecordsWhatTheNodeCosts(t *testing.T) {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "priced", Annotations: map[string]string{
			cloudprovider.PlannedPriceAnnotationKey: `{"instance":0.09,"volumes":0.002192,"publicIPv4":0.005,"monitoring":0,"daemonSets":0.01}`,
		}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		},
	}
	if err := kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	// The launched node: status.price {perHour: 0.207192, instance: 0.2, volumes: 0.002192, publicIPv4: 0.005}.
	l := cloudSelling(cloudprovider.Offering{
		Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.2, NodeCosts: cloudprovider.NodeCosts{Volumes: 0.002192, PublicIPv4: 0.005}, Available: true,
	})
	c := NewController(kube, l, record.NewFakeRecorder(10), clocktesting.NewFakeClock(nc.CreationTimestamp.Time))
	if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
		t.Fatal(err)
	}
	got := &karpv1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	want := &karpv1.Price{PerHour: "0.207192", Instance: "0.18", Volumes: "0.002192", PublicIPv4: "0.005", DaemonSets: "0.02"}
	if diff := cmp.Diff(want, got.Status.Price); diff != "" {
		t.Errorf("status.price (-want +got):\n%s", diff)
	}
}

// TestALaunchAnotherSidecarBeganIsAdoptedNotRepeated reconciles NodeClaims whose launch
// another sidecar marked as begun (it was killed while CreateFleet took tens of seconds):
// within InFlightWindow nothing is launched again, the instance is adopted once the cloud
// shows it; past the window, one that never showed is launched.
func TestALaunchAnotherSidecarBeganIsAdoptedNotRepeated(t *testing.T) {
	ctx := context.Background()
	newClaim := func(name string) (*karpv1.NodeClaim, reconcile.Request) {
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: karpv1.NodeClaimSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
			},
		}
		if err := kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		nc.Annotations = map[string]string{nodeclaim.LaunchStartedAnnotationKey: nc.CreationTimestamp.UTC().Format(time.RFC3339)}
		if err := kube.Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
		return nc, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}
	}
	providerID := func(req reconcile.Request) string {
		got := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got.Status.ProviderID
	}

	nc, req := newClaim("in-flight")
	l := cloudSelling()
	clk := clocktesting.NewFakeClock(nc.CreationTimestamp.Add(10 * time.Second))
	c := NewController(kube, l, record.NewFakeRecorder(10), clk)
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if calls := l.Calls(); len(calls.Create) != 0 || len(calls.Adopt) != 1 || res.RequeueAfter != inFlightPoll || providerID(req) != "" {
		t.Fatalf("while the other launch may be in flight: %d launches, %d adoptions, requeue after %s, provider ID %q; want 0, 1, %s, none",
			len(calls.Create), len(calls.Adopt), res.RequeueAfter, providerID(req), inFlightPoll)
	}
	// The other sidecar's launch finishes.
	other, err := l.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	// Its Create is the only one.
	if launches := len(l.Calls().Create) - 1; launches != 0 || providerID(req) != other.Status.ProviderID {
		t.Errorf("once the cloud shows the instance: %d launches, provider ID %q; want it adopted", launches, providerID(req))
	}

	_, req = newClaim("never-shown")
	l = cloudSelling()
	clk.Step(nodeclaim.InFlightWindow)
	c = NewController(kube, l, record.NewFakeRecorder(10), clk)
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if launches := len(l.Calls().Create); launches != 1 || providerID(req) == "" {
		t.Errorf("past the window: %d launches, provider ID %q; want it launched", launches, providerID(req))
	}
}

// staleReads reads every NodeClaim as it was before its launch, as a cache does between a
// launch's patches and their watch events.
type staleReads struct {
	client.Client
	before *karpv1.NodeClaim
}

func (s staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if nc, ok := obj.(*karpv1.NodeClaim); ok && key.Name == s.before.Name {
		s.before.DeepCopyInto(nc)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestAStaleCopyOfALaunchedNodeClaimLaunchesNothing reconciles a NodeClaim again from a copy
// read before its launch was recorded: the launcher is not asked again (on EC2 that would be
// another DescribeInstances to adopt the instance just launched), and once a copy shows the
// launch it is forgotten.
func TestAStaleCopyOfALaunchedNodeClaimLaunchesNothing(t *testing.T) {
	ctx := context.Background()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "stale"},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		},
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	before := nc.DeepCopy()
	l := cloudSelling()
	clk := clocktesting.NewFakeClock(nc.CreationTimestamp.Time)
	c := NewController(kube, l, record.NewFakeRecorder(10), clk)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	c.kube = staleReads{Client: kube, before: before}
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if launches := len(l.Calls().Create); launches != 1 || res.RequeueAfter <= 0 {
		t.Errorf("a stale copy: %d launches, requeued after %s; want 1 launch and a requeue", launches, res.RequeueAfter)
	}
	fresh := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, req.NamespacedName, fresh); err != nil {
		t.Fatal(err)
	}
	if c.recorded.pending(fresh) || c.recorded.pending(before) {
		t.Error("the launch is still awaited once a copy showed it")
	}
}

// failingCloud fails every launch with err.
func failingCloud(err error) *fake.CloudProvider {
	c := cloudSelling()
	c.FailCreates(fake.Always, err)
	return c
}

// TestALaunchIntoFullSubnetsIsReportedOnTheNodePool: when every subnet is out of addresses,
// the NodePool says so, besides the NodeClaim, since every NodeClaim of the pool fails alike.
func TestALaunchIntoFullSubnetsIsReportedOnTheNodePool(t *testing.T) {
	ctx := context.Background()
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "full-subnets"},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		}}},
	}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "full-subnets", Labels: map[string]string{karpv1.NodePoolLabelKey: np.Name}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		},
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	err := cloudprovider.NewInsufficientCapacityError(fmt.Errorf(`EC2NodeClass "default": %w: subnet-a (us-east-1a)`, cloudprovider.ErrSubnetsFull))
	recorder := record.NewFakeRecorder(10)
	c := NewController(kube, failingCloud(err), recorder, clocktesting.NewFakeClock(nc.CreationTimestamp.Time))
	if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
		t.Fatal(err)
	}
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	message := `insufficient capacity: EC2NodeClass "default": every subnet is out of free IP addresses: subnet-a (us-east-1a)`
	want := []string{"Warning InsufficientCapacity " + message, "Warning SubnetsFull " + message}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestLaunchConditions: a launch leaves the NodeClaim's conditions as Karpenter's do, whether
// it succeeded or is tried again.
func TestLaunchConditions(t *testing.T) {
	tests := []struct {
		name     string
		launcher Launcher
		want     []condition
	}{
		{
			name:     "launched, awaiting its node",
			launcher: cloudSelling(),
			want: []condition{
				{"Launched", "True", "Launched", ""},
				{"Registered", "Unknown", "NodeNotFound", "Node not registered with cluster"},
				{"Initialized", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
				{"Ready", "Unknown", "ReconcilingDependents", "Registered=Unknown, Initialized=Unknown"},
			},
		},
		{
			name:     "a launch that failed and is tried again",
			launcher: failingCloud(errors.New("creating fleet: EC2 CreateFleet: UnauthorizedOperation")),
			want: []condition{
				{"Launched", "Unknown", "LaunchFailed", "creating fleet: EC2 CreateFleet: UnauthorizedOperation"},
				{"Registered", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
				{"Initialized", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
				{"Ready", "Unknown", "ReconcilingDependents", "Launched=Unknown, Registered=Unknown, Initialized=Unknown"},
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			nc := &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("conditions-%d", i)},
				Spec: karpv1.NodeClaimSpec{
					NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
				},
			}
			if err := kube.Create(ctx, nc); err != nil {
				t.Fatal(err)
			}
			c := NewController(kube, tt.launcher, record.NewFakeRecorder(10), clocktesting.NewFakeClock(nc.CreationTimestamp.Time))
			if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
				t.Fatal(err)
			}
			got := &karpv1.NodeClaim{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, conditionsOf(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// deletedDuringLaunch deletes the NodeClaim while its instance launches, as a batch that
// plans its pods again takes a NodeClaim back.
type deletedDuringLaunch struct {
	*fake.CloudProvider
	kube client.Client
}

func (d deletedDuringLaunch) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	launched, err := d.CloudProvider.Create(ctx, nc)
	if err != nil {
		return nil, err
	}
	if err := d.kube.Delete(ctx, nc.DeepCopy()); err != nil {
		return nil, err
	}
	return launched, nil
}

// TestANodeClaimDeletedDuringItsLaunchGetsItsInstanceRecorded deletes a NodeClaim while
// CreateFleet runs: the launch cannot label it any more, and the next reconcile records the
// instance on its status, so that termination ends that instance instead of releasing the
// NodeClaim and leaving the instance to garbage collection.
func TestANodeClaimDeletedDuringItsLaunchGetsItsInstanceRecorded(t *testing.T) {
	ctx := context.Background()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "taken-back", Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		},
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		got := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err == nil {
			got.Finalizers = nil
			_ = kube.Update(ctx, got)
		}
	})
	cloud := cloudSelling()
	c := NewController(kube, deletedDuringLaunch{cloud, kube}, record.NewFakeRecorder(10), clocktesting.NewFakeClock(nc.CreationTimestamp.Time))
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}
	var results []reconcile.Result
	for range 2 {
		res, err := c.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	got := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	live, err := cloud.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 {
		t.Fatalf("%d instances launched, want 1", len(live))
	}
	if diff := cmp.Diff([]reconcile.Result{{Requeue: true}, {}}, results); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if got.DeletionTimestamp == nil || got.Status.ProviderID != live[0].Status.ProviderID {
		t.Errorf("NodeClaim deleted %v, provider ID %q; want deleted with the launched instance %q recorded", got.DeletionTimestamp != nil, got.Status.ProviderID, live[0].Status.ProviderID)
	}
	if _, inFlight := nodeclaim.LaunchInFlight(got, nc.CreationTimestamp.Time); inFlight {
		t.Error("the launch is still in flight once its instance is recorded")
	}
}
