// Package requestbudget holds each object that fails on a persistent AWS error to a budget
// of AWS requests: at most 20 of each action in the first ten minutes, then one attempt every
// five minutes. The real EC2NodeClass status and NodeClaim lifecycle controllers run in a
// manager on a real API server (envtest), the AWS provider talks to the local endpoint through
// the real SDK over HTTP, and one fake clock drives the controllers' backoff, their work
// queues, the provider and the endpoint; the tests step it through twenty minutes and read
// the endpoint's request counts per action.
package requestbudget

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/lifecycle"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclass"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.Background())
	testenv.Main(m, &cfg, nil)
}

const cluster = "budget-test"

// Budget of a failing object: requests of one action in its first ten minutes, and the
// least time between two attempts after that (the clock moves in steps of step).
const (
	firstTenMinutes = 20
	laterInterval   = 5 * time.Minute
	step            = 5 * time.Second
)

// fixture is the controllers and the provider on one fake clock, against the local endpoint.
type fixture struct {
	ctx      context.Context
	kube     client.Client
	clock    *clocktesting.FakeClock
	endpoint *localaws.Server
	ec2      *ec2.Client
	provider *aws.Provider
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	endpoint, err := localaws.New(localaws.Options{ClusterName: cluster, Clock: clk, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(endpoint)
	t.Cleanup(srv.Close)
	clients := aws.NewClients(awssdk.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
		BaseEndpoint: awssdk.String(srv.URL),
		// The provider's retryer and its attempts, without the real waits between them.
		Retryer: func() awssdk.Retryer {
			return aws.NewRetryer(retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil }))
		},
	})
	mgr := testenv.NewManager(t, cfg)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &karpv1.NodeClaim{}, nodeclaim.NodeClaimProviderIDIndex, nodeclaim.NodeClaimProviderID); err != nil {
		t.Fatal(err)
	}
	provider, err := aws.New(aws.Options{
		Cluster:           aws.ClusterInfo{Name: cluster, Endpoint: "https://127.0.0.1:6443", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
		Region:            "us-east-1",
		KubernetesVersion: localaws.DefaultKubernetesVersion,
	}, clients, mgr.GetAPIReader(), mgr.GetClient(), clk)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface{ Register(ctrl.Manager) error }{
		nodeclass.NewController(mgr.GetClient(), provider, provider, mgr.GetEventRecorderFor("tailor-provisioner"), clk),
		lifecycle.NewController(mgr.GetClient(), provider, mgr.GetEventRecorderFor("tailor-provisioner"), clk),
	} {
		if err := c.Register(mgr); err != nil {
			t.Fatal(err)
		}
	}
	testenv.StartManager(t, mgr)
	return &fixture{ctx: ctx, kube: mgr.GetClient(), clock: clk, endpoint: endpoint, ec2: clients.EC2, provider: provider}
}

// create creates the object and deletes it when the test ends, so that the next test's
// controllers do not reconcile it.
func (f *fixture) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := f.kube.Create(f.ctx, obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = f.kube.Delete(ctx, obj)
		// The next test's class has the same name: its finalizer is not waited for.
		if err := f.kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err == nil && len(obj.GetFinalizers()) > 0 {
			patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
			obj.SetFinalizers(nil)
			_ = f.kube.Patch(ctx, obj, patch)
		}
	})
}

// settle waits for the work a clock step started: until the endpoint has received no
// request for a while.
func (f *fixture) settle() {
	total := func() int {
		n := 0
		for _, c := range f.endpoint.RequestCounts() {
			n += c
		}
		return n
	}
	time.Sleep(20 * time.Millisecond)
	last, quiet := total(), 0
	for quiet < 4 {
		time.Sleep(10 * time.Millisecond)
		if n := total(); n != last {
			last, quiet = n, 0
			continue
		}
		quiet++
	}
}

// timeline is what the tests watch while the clock moves: the request counts of some actions
// after each step, and what observe returned.
type timeline struct {
	at       []time.Duration
	counts   []map[string]int
	observed []string
}

// run steps the clock through d from now, in steps, recording the counts of the actions and
// what observe says after each step.
func (f *fixture) run(d time.Duration, actions []string, observe func() string) *timeline {
	tl := &timeline{}
	start := f.clock.Now()
	for {
		f.settle()
		counts := f.endpoint.RequestCounts()
		snapshot := map[string]int{}
		for _, a := range actions {
			snapshot[a] = counts[a]
		}
		tl.at = append(tl.at, f.clock.Since(start))
		tl.counts = append(tl.counts, snapshot)
		tl.observed = append(tl.observed, observe())
		if f.clock.Since(start) >= d {
			return tl
		}
		f.clock.Step(step)
	}
}

// within returns the count of the action by the time t (the last snapshot at or before it).
func (tl *timeline) within(action string, t time.Duration) int {
	n := 0
	for i, at := range tl.at {
		if at <= t {
			n = tl.counts[i][action]
		}
	}
	return n
}

// attempts returns when the action's count grew.
func (tl *timeline) attempts(action string) []time.Duration {
	var out []time.Duration
	prev := 0
	for i, at := range tl.at {
		if tl.counts[i][action] > prev {
			out = append(out, at)
		}
		prev = tl.counts[i][action]
	}
	return out
}

// checkBudget fails the test when an action exceeds the budget: more than firstTenMinutes
// requests in the first ten minutes, or two attempts less than laterInterval apart after
// them. It returns the action's attempt times.
func checkBudget(t *testing.T, tl *timeline, action string) []time.Duration {
	t.Helper()
	if n := tl.within(action, 10*time.Minute); n > firstTenMinutes {
		t.Errorf("%d %s requests in the first ten minutes, want at most %d", n, action, firstTenMinutes)
	}
	attempts := tl.attempts(action)
	for i := 1; i < len(attempts); i++ {
		if attempts[i] > 10*time.Minute && attempts[i]-attempts[i-1] < laterInterval-step {
			t.Errorf("%s attempts at %s and %s, want at least %s apart after ten minutes", action, attempts[i-1], attempts[i], laterInterval)
		}
	}
	return attempts
}

// checkStableMessage fails the test unless every observed message is the same, carries no
// request id and contains want.
func checkStableMessage(t *testing.T, observed []string, want string) {
	t.Helper()
	distinct := map[string]bool{}
	for _, m := range observed {
		distinct[m] = true
	}
	if len(distinct) != 1 {
		keys := make([]string, 0, len(distinct))
		for k := range distinct {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("the message changed across attempts: %q", keys)
	}
	for m := range distinct {
		if !strings.Contains(m, want) {
			t.Errorf("message %q, want it to contain %q", m, want)
		}
		if strings.Contains(m, "RequestID") || strings.Contains(strings.ToLower(m), "request id") {
			t.Errorf("message %q carries a request id", m)
		}
	}
}

func discoveryTerms() ([]awsv1.SubnetSelectorTerm, []awsv1.SecurityGroupSelectorTerm) {
	tags := map[string]string{"karpenter.sh/discovery": cluster}
	return []awsv1.SubnetSelectorTerm{{Tags: tags}}, []awsv1.SecurityGroupSelectorTerm{{Tags: tags}}
}

func brokenClass(name string, ami awsv1.AMISelectorTerm) *awsv1.EC2NodeClass {
	subnets, groups := discoveryTerms()
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role: "NodeRole", AMIFamily: awssdk.String("AL2023"), AMISelectorTerms: []awsv1.AMISelectorTerm{ami},
			SubnetSelectorTerms: subnets, SecurityGroupSelectorTerms: groups,
		},
	}
}

// readyMessage returns the class's Ready condition as "status reason: message", and its
// resourceVersion.
func (f *fixture) readyMessage(t *testing.T, name string) (string, string) {
	t.Helper()
	class := &awsv1.EC2NodeClass{}
	if err := f.kube.Get(f.ctx, client.ObjectKey{Name: name}, class); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(class.Status.Conditions, awsv1.ConditionTypeReady)
	if c == nil {
		return "", class.ResourceVersion
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message), class.ResourceVersion
}

func TestAnEC2NodeClassThatCannotResolve(t *testing.T) {
	tests := []struct {
		name string
		ami  awsv1.AMISelectorTerm
		// actions are the requests of one resolution attempt, one each.
		actions []string
		want    string
	}{
		{
			name:    "missing AMI id",
			ami:     awsv1.AMISelectorTerm{ID: "ami-0000000000000dead"},
			actions: []string{"DescribeSubnets", "DescribeSecurityGroups", "DescribeImages"},
			want:    "False ResolutionFailed: resolving amiSelectorTerms: describing images: EC2 DescribeImages: InvalidAMIID.NotFound: The image id '[ami-0000000000000dead]' does not exist",
		},
		{
			name:    "mistyped ssmParameter",
			ami:     awsv1.AMISelectorTerm{SSMParameter: "/aws/service/eks/optimized-ami/" + localaws.DefaultKubernetesVersion + "/amazon-linux-2023/x86_64/standard/recomended/image_id"},
			actions: []string{"DescribeSubnets", "DescribeSecurityGroups", "GetParameter"},
			want:    "False ResolutionFailed: resolving amiSelectorTerms: reading SSM parameter /aws/service/eks/optimized-ami/" + localaws.DefaultKubernetesVersion + "/amazon-linux-2023/x86_64/standard/recomended/image_id: SSM GetParameter: ParameterNotFound",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			name := "broken-" + strings.ReplaceAll(tt.name, " ", "-")
			f.create(t, brokenClass(strings.ToLower(name), tt.ami))
			var versions []string
			tl := f.run(20*time.Minute, tt.actions, func() string {
				message, version := f.readyMessage(t, strings.ToLower(name))
				versions = append(versions, version)
				return message
			})
			var first []time.Duration
			for i, action := range tt.actions {
				attempts := checkBudget(t, tl, action)
				if i == 0 {
					first = attempts
					t.Logf("%s: %d requests in 10 minutes, %d in 20, at %v", action, tl.within(action, 10*time.Minute), tl.within(action, 20*time.Minute), attempts)
				} else if diff := cmp.Diff(first, attempts); diff != "" {
					t.Errorf("%s attempts differ from %s's, want one request of each per attempt (-%s +%s):\n%s", action, tt.actions[0], tt.actions[0], action, diff)
				}
			}
			// Attempts 0, 5, 15, 35, 75, 155 and 315 s after the first failure.
			if n := tl.within(tt.actions[0], 10*time.Minute); n != 7 {
				t.Errorf("%d attempts in the first ten minutes, want 7", n)
			}
			// The first observation may precede the first status write.
			checkStableMessage(t, tl.observed[1:], tt.want)
			// One status write: the resourceVersion does not move after the first attempt.
			if diff := cmp.Diff(versions[1], versions[len(versions)-1]); diff != "" {
				t.Errorf("the EC2NodeClass was written after its first attempt (-first +last):\n%s", diff)
			}
		})
	}
}

// defaultClass creates the EC2NodeClass the NodeClaims launch from.
func (f *fixture) defaultClass(t *testing.T) {
	t.Helper()
	subnets, groups := discoveryTerms()
	f.create(t, &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: awsv1.EC2NodeClassSpec{
			Role: "NodeRole", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms: subnets, SecurityGroupSelectorTerms: groups,
		},
	})
}

// nodeClaim creates a NodeClaim of the general NodePool for an on-demand m5.large.
func (f *fixture) nodeClaim(t *testing.T, name string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			},
		},
	}
	f.create(t, nc)
	return nc
}

// launched waits (in real time: a launch needs no clock step) until the NodeClaim records
// its instance.
func (f *fixture) launched(t *testing.T, name string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	err := wait.PollUntilContextTimeout(f.ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return f.kube.Get(ctx, client.ObjectKey{Name: name}, nc) == nil && nc.Status.ProviderID != "", nil
	})
	if err != nil {
		t.Fatalf("NodeClaim %s was not launched: %v (conditions %+v)", name, err, nc.Status.Conditions)
	}
	return nc
}

// launchCondition returns the NodeClaim's Launched condition as "status reason: message".
func (f *fixture) launchCondition(t *testing.T, name string) string {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := f.kube.Get(f.ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

// launchActions are the requests a launch may make besides resolving its class.
var launchActions = []string{"CreateFleet", "DescribeInstances", "DescribeLaunchTemplates", "CreateLaunchTemplate", "GetInstanceProfile"}

func TestANodeClaimWhoseLaunchTemplateWasDeletedOutsideTailor(t *testing.T) {
	f := newFixture(t)
	f.defaultClass(t)
	f.nodeClaim(t, "first")
	template := f.launched(t, "first").Annotations[awsv1.LaunchTemplateAnnotationKey]
	if _, err := f.ec2.DeleteLaunchTemplate(f.ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: awssdk.String(template)}); err != nil {
		t.Fatal(err)
	}
	f.endpoint.ResetRequestCounts()
	f.nodeClaim(t, "second")
	second := f.launched(t, "second")
	tl := f.run(20*time.Minute, launchActions, func() string { return f.launchCondition(t, "second") })
	for _, action := range launchActions {
		checkBudget(t, tl, action)
	}
	// The launch recovers at once: CreateFleet finds no template, the provider creates it
	// again and the second CreateFleet launches.
	want := map[string]int{"CreateFleet": 2, "DescribeInstances": 2, "DescribeLaunchTemplates": 1, "CreateLaunchTemplate": 1, "GetInstanceProfile": 1}
	if diff := cmp.Diff(want, tl.counts[len(tl.counts)-1]); diff != "" {
		t.Errorf("requests in twenty minutes (-want +got):\n%s", diff)
	}
	if got := second.Annotations[awsv1.LaunchTemplateAnnotationKey]; got != template {
		t.Errorf("the relaunch used template %q, want %q created again", got, template)
	}
	checkStableMessage(t, tl.observed, "True Launched: ")
}

func TestANodeClaimWhoseLaunchIsDenied(t *testing.T) {
	f := newFixture(t)
	f.defaultClass(t)
	f.nodeClaim(t, "allowed")
	f.launched(t, "allowed")
	if err := f.endpoint.SetFaults(localaws.Faults{FailActions: map[string]localaws.ActionFailure{
		"CreateFleet": {Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation.", Status: 403},
	}}); err != nil {
		t.Fatal(err)
	}
	f.endpoint.ResetRequestCounts()
	f.nodeClaim(t, "denied")
	tl := f.run(20*time.Minute, launchActions, func() string { return f.launchCondition(t, "denied") })
	attempts := checkBudget(t, tl, "CreateFleet")
	t.Logf("CreateFleet: %d requests in 10 minutes, %d in 20, at %v", tl.within("CreateFleet", 10*time.Minute), tl.within("CreateFleet", 20*time.Minute), attempts)
	if n := tl.within("CreateFleet", 10*time.Minute); n != 7 {
		t.Errorf("%d CreateFleet attempts in the first ten minutes, want 7", n)
	}
	for _, action := range launchActions[1:] {
		checkBudget(t, tl, action)
	}
	// Each attempt looks for an instance left by a previous one, then asks CreateFleet; the
	// template and its instance profile are known.
	last := tl.counts[len(tl.counts)-1]
	want := map[string]int{"CreateFleet": len(attempts), "DescribeInstances": len(attempts), "DescribeLaunchTemplates": 0, "CreateLaunchTemplate": 0, "GetInstanceProfile": 0}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("requests in twenty minutes (-want +got):\n%s", diff)
	}
	checkStableMessage(t, tl.observed[1:], "Unknown LaunchFailed: creating fleet: EC2 CreateFleet: UnauthorizedOperation: You are not authorized to perform this operation. Encoded authorization failure message in the log")
	// One Warning event per attempt, all with that message (aggregated into one Event).
	var events []string
	err := wait.PollUntilContextTimeout(f.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &corev1.EventList{}
		if err := f.kube.List(ctx, list); err != nil {
			return false, err
		}
		events = nil
		count := 0
		for _, e := range list.Items {
			if e.InvolvedObject.Name == "denied" && e.Reason == lifecycle.ReasonLaunchFailed {
				events = append(events, e.Message)
				count += int(e.Count)
			}
		}
		return count == len(attempts), nil
	})
	if err != nil {
		t.Errorf("LaunchFailed events %q, want %d", events, len(attempts))
	}
	checkStableMessage(t, events, "creating fleet: EC2 CreateFleet: UnauthorizedOperation")
}

func TestPricingOutage(t *testing.T) {
	f := newFixture(t)
	if err := f.endpoint.SetFaults(localaws.Faults{FailActions: map[string]localaws.ActionFailure{
		"GetProducts": {Code: "InternalErrorException", Message: "An internal error occurred.", Status: 500},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := f.provider.CatalogReady(nil); err == nil {
		t.Error("ready before the catalog was read, want not ready")
	}
	start := time.Now()
	if err := f.provider.LoadCatalog(f.ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the first catalog took %s, want it at once from the embedded prices", took)
	}
	if err := f.provider.CatalogReady(nil); err != nil {
		t.Errorf("not ready with a usable catalog: %v", err)
	}
	if got := f.provider.PriceSources().OnDemand; got != aws.PriceSourceEmbedded {
		t.Errorf("on-demand prices from %q, want %q", got, aws.PriceSourceEmbedded)
	}
	// The housekeeping of the leader, on the fake clock.
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.provider.Start(ctx) // what Start returns once cancelled says only that it stopped
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	tl := f.run(20*time.Minute, []string{"GetProducts"}, func() string { return f.provider.PriceSources().OnDemand })
	attempts := checkBudget(t, tl, "GetProducts")
	t.Logf("GetProducts: %d requests in 10 minutes, %d in 20, at %v", tl.within("GetProducts", 10*time.Minute), tl.within("GetProducts", 20*time.Minute), attempts)
	// The first read made one request; background reads of 3 follow 1, 2, 4, then 5 minutes apart.
	want := []time.Duration{0, time.Minute, 3 * time.Minute, 7 * time.Minute, 12 * time.Minute, 17 * time.Minute}
	if diff := cmp.Diff(want, attempts); diff != "" {
		t.Errorf("GetProducts attempts (-want +got):\n%s", diff)
	}
	if got := tl.within("GetProducts", 10*time.Minute); got != 10 {
		t.Errorf("%d GetProducts requests in the first ten minutes, want 10", got)
	}
	checkStableMessage(t, tl.observed, aws.PriceSourceEmbedded)
}
