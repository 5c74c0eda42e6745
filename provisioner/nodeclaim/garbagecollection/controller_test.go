package garbagecollection

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drain"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

const cluster = "gc-test"

// fixture is the controller on a real API server and the AWS provider against the local
// endpoint through the real SDK; the controller and the endpoint share a fake clock.
type fixture struct {
	ctx      context.Context
	kube     client.Client
	clock    *clocktesting.FakeClock
	endpoint *localaws.Server
	provider *aws.Provider
	ec2      *ec2.Client
	gc       *Controller
	recorder *eventLog
	image    string
	subnet   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	// NodeClaim creation times come from the API server's clock: the fake one starts there.
	clk := clocktesting.NewFakeClock(time.Now())
	server, err := localaws.New(localaws.Options{ClusterName: cluster, Clock: clk, Logger: logger, ShutdownDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	httpServer := httptest.NewServer(server)
	t.Cleanup(httpServer.Close)
	awsCfg := awssdk.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
		BaseEndpoint: awssdk.String(httpServer.URL),
		Retryer: func() awssdk.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
	clients := aws.NewClients(awsCfg)
	provider, err := aws.New(aws.Options{
		Cluster:           aws.ClusterInfo{Name: cluster, Endpoint: "https://127.0.0.1:6443", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
		Region:            "us-east-1",
		KubernetesVersion: localaws.DefaultKubernetesVersion,
	}, clients, kube, kube, clock.RealClock{}) // its batching windows are short real waits
	if err != nil {
		t.Fatal(err)
	}
	recorder := &eventLog{}
	gc, err := NewController(kube, kube, provider, recorder, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ctx: ctx, kube: kube, clock: clk, endpoint: server, provider: provider, ec2: clients.EC2, gc: gc, recorder: recorder}
	param, err := clients.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: awssdk.String("/aws/service/eks/optimized-ami/" + localaws.DefaultKubernetesVersion + "/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	f.image = awssdk.ToString(param.Parameter.Value)
	subnets, err := f.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("describing subnets: %v", err)
	}
	f.subnet = awssdk.ToString(subnets.Subnets[0].SubnetId)
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
	return f
}

// launch starts an instance tagged as this cluster's for the NodeClaim name, as the provider
// tags them, and returns its provider ID.
func (f *fixture) launch(t *testing.T, nodeClaim string) string {
	t.Helper()
	lt, err := f.ec2.CreateLaunchTemplate(f.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: awssdk.String("lt-" + nodeClaim),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: awssdk.String(f.image)},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.ec2.CreateFleet(f.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: awssdk.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: awssdk.String(f.subnet)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: awssdk.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: awssdk.String("kubernetes.io/cluster/" + cluster), Value: awssdk.String("owned")},
			{Key: awssdk.String("karpenter.sh/nodeclaim"), Value: awssdk.String(nodeClaim)},
		}}},
	})
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("launching: %v %+v", err, out)
	}
	described, err := f.ec2.DescribeInstances(f.ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})
	if err != nil {
		t.Fatal(err)
	}
	inst := described.Reservations[0].Instances[0]
	return aws.ProviderID(awssdk.ToString(inst.Placement.AvailabilityZone), awssdk.ToString(inst.InstanceId))
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
		_, err := f.provider.Get(f.ctx, id)
		switch {
		case err == nil:
			out[id] = "live"
		default:
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
	f.clock.Step(time.Second) // the shutdown delay of the local endpoint
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

// TestAnOrphanThatCannotBeTerminatedIsTriedWithBackoff denies TerminateInstances for good:
// the passes every 30 s try the orphan at most 7 times in its first ten minutes, then once
// every five, and the NodeClaims' collection goes on meanwhile.
func TestAnOrphanThatCannotBeTerminatedIsTriedWithBackoff(t *testing.T) {
	f := newFixture(t)
	orphan := f.launch(t, "deleted-claim")
	if err := f.endpoint.SetFaults(localaws.Faults{FailActions: map[string]localaws.ActionFailure{"TerminateInstances": {Code: "UnauthorizedOperation"}}}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(DefaultOrphanGrace)
	f.endpoint.ResetRequestCounts()
	start := f.clock.Now()
	var attempts []time.Duration
	for f.clock.Since(start) <= 20*time.Minute {
		before := f.endpoint.RequestCounts()["TerminateInstances"]
		if err := f.gc.Collect(f.ctx); err != nil && !strings.Contains(err.Error(), "UnauthorizedOperation") {
			t.Fatal(err)
		}
		if f.endpoint.RequestCounts()["TerminateInstances"] > before {
			attempts = append(attempts, f.clock.Since(start))
		}
		f.clock.Step(DefaultPeriod)
	}
	want := []time.Duration{0, 30 * time.Second, 60 * time.Second, 90 * time.Second, 150 * time.Second, 240 * time.Second, 420 * time.Second, 720 * time.Second, 1020 * time.Second}
	if diff := cmp.Diff(want, attempts); diff != "" {
		t.Errorf("times of the TerminateInstances attempts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{orphan: "live"}, f.states(t, orphan)); diff != "" {
		t.Errorf("instance state (-want +got):\n%s", diff)
	}
}

func TestNodeClaimsWhoseInstanceIsGoneAreDeletedAndReleased(t *testing.T) {
	f := newFixture(t)
	gone := f.launch(t, "gone")
	f.nodeClaim(t, "gone", gone)
	never := f.nodeClaim(t, "never-existed", "aws:///us-east-1a/i-00000000000000dead")
	live := f.launch(t, "live")
	f.nodeClaim(t, "live", live)
	// Someone terminates the instance behind Tailor's back.
	if _, err := f.ec2.TerminateInstances(f.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{gone[strings.LastIndex(gone, "/")+1:]}}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(2 * time.Second)

	f.collect(t)
	if diff := cmp.Diff(map[string]bool{"gone": true, "never-existed": true, "live": false}, f.deleting(t, "gone", "never-existed", "live")); diff != "" {
		t.Errorf("deleting (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"InstanceGone", "InstanceGone"}, f.recorder.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Termination does not wait for an instance that is not there: it releases at once.
	term := termination.NewController(f.kube, f.kube, f.provider, drain.New(f.kube, f.kube, kubernetes.NewForConfigOrDie(cfg)), record.NewFakeRecorder(10), f.clock)
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
