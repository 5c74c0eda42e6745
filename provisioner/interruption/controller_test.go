package interruption

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	tailormetrics "github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

const queueName = "tailor-interruptions"

// fixture is the controller on a real API server, reading it through a cache with the
// sidecar's indexes, and a queue of the local AWS endpoint through the real SDK.
type fixture struct {
	ctx  context.Context
	kube client.Client
	// cached reads through the cache the controller reads.
	cached   client.Client
	url      string
	ec2      *ec2.Client
	ssm      *ssm.Client
	sqs      *sqs.Client
	queueURL *string
	recorder *eventLog
	registry *prometheus.Registry
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
	server, err := localaws.New(localaws.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	httpServer := httptest.NewServer(server)
	t.Cleanup(httpServer.Close)
	creds := credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", "")
	f := &fixture{
		ctx: ctx, kube: kube, url: httpServer.URL,
		ec2:      ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(httpServer.URL), Credentials: creds}),
		ssm:      ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: aws.String(httpServer.URL), Credentials: creds}),
		sqs:      sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(httpServer.URL), Credentials: creds}),
		recorder: &eventLog{},
		registry: prometheus.NewRegistry(),
	}
	created, err := f.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queueName)})
	if err != nil {
		t.Fatal(err)
	}
	f.queueURL = created.QueueUrl
	param, err := f.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/" + localaws.DefaultKubernetesVersion + "/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	f.image = aws.ToString(param.Parameter.Value)
	subnets, err := f.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("describing subnets: %v", err)
	}
	f.subnet = aws.ToString(subnets.Subnets[0].SubnetId)
	mgr := testenv.NewManager(t, cfg)
	if err := nodeclaim.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	f.cached = mgr.GetClient()
	t.Cleanup(func() {
		claims := &karpv1.NodeClaimList{}
		_ = kube.List(context.Background(), claims)
		for i := range claims.Items {
			nc := &claims.Items[i]
			nc.Finalizers = nil
			_ = kube.Update(context.Background(), nc)
			_ = kube.Delete(context.Background(), nc)
		}
		_ = kube.DeleteAllOf(context.Background(), &corev1.Node{})
	})
	return f
}

// start runs the controller until the test ends.
func (f *fixture) start(t *testing.T, opts Options) *Controller {
	t.Helper()
	queue, err := NewSQSQueue(f.sqs, queueName, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	opts.Registerer = f.registry
	c, err := NewController(f.cached, queue, f.recorder, clock.RealClock{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

// launch starts an instance of the capacity type and creates its NodeClaim (with the
// termination finalizer, so a deletion leaves it in place) and its Node.
func (f *fixture) launch(t *testing.T, name string, capacityType ec2types.DefaultTargetCapacityType) (*karpv1.NodeClaim, string) {
	t.Helper()
	lt, err := f.ec2.CreateLaunchTemplate(f.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(f.image)},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.ec2.CreateFleet(f.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(f.subnet)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capacityType},
	})
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("launching: %v %+v", err, out)
	}
	id := out.Instances[0].InstanceIds[0]
	providerID := "aws:///us-east-1a/" + id
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		},
	}
	if err := f.kube.Create(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID, nc.Status.NodeName = providerID, name
	if err := f.kube.Status().Update(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := f.kube.Create(f.ctx, node); err != nil {
		t.Fatal(err)
	}
	// The controller finds the NodeClaim by its instance ID in the cache.
	deadline := time.Now().Add(10 * time.Second)
	for {
		claims := &karpv1.NodeClaimList{}
		err := f.cached.List(f.ctx, claims, client.MatchingFields{nodeclaim.NodeClaimInstanceIDIndex: id})
		if err == nil && len(claims.Items) == 1 && claims.Items[0].Name == name && f.cached.Get(f.ctx, client.ObjectKeyFromObject(node), &corev1.Node{}) == nil {
			return nc, id
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache does not find NodeClaim %s by instance %s: %v, %d found", name, id, err, len(claims.Items))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) inject(t *testing.T, in localaws.Interruption) {
	t.Helper()
	in.Queue = queueName
	body, _ := json.Marshal(in)
	resp, err := http.Post(f.url+"/_admin/interruptions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("injecting %+v: %s", in, resp.Status)
	}
}

func (f *fixture) send(t *testing.T, body string) {
	t.Helper()
	if _, err := f.sqs.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: f.queueURL, MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
}

// queueEmpty reports whether no message is visible or in flight.
func (f *fixture) queueEmpty(t *testing.T) bool {
	t.Helper()
	out, err := f.sqs.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: f.queueURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

// fate is what became of a NodeClaim and its Node.
type fate struct {
	Deleting        bool
	Prelaunched     bool
	Condition       string
	HasDeadline     bool
	NodeCordoned    bool
	NodeClaimEvents []string
	NodeEvents      []string
}

func (f *fixture) fateOf(t *testing.T, name string) fate {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := f.kube.Get(f.ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := f.kube.Get(f.ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	out := fate{Deleting: nc.DeletionTimestamp != nil, HasDeadline: nc.Annotations[DeadlineAnnotationKey] != ""}
	if c := meta.FindStatusCondition(nc.Status.Conditions, ConditionTypeInterrupted); c != nil {
		out.Condition = string(c.Status) + "/" + c.Reason
	}
	for _, taint := range node.Spec.Taints {
		if taint.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			out.NodeCordoned = true
		}
	}
	return out
}

// eventLog records event reasons by the kind of object they are about.
type eventLog struct {
	mu     sync.Mutex
	byKind map[string][]string
}

var _ record.EventRecorder = (*eventLog)(nil)

func (l *eventLog) Event(obj runtime.Object, _, reason, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKind == nil {
		l.byKind = map[string][]string{}
	}
	kind := fmt.Sprintf("%T", obj)
	l.byKind[kind] = append(l.byKind[kind], reason)
}

func (l *eventLog) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	l.Eventf(obj, eventtype, reason, messageFmt, args...)
}

// events moves the recorded reasons into the fate and forgets them.
func (f *fixture) events(out *fate) {
	l := f.recorder
	l.mu.Lock()
	defer l.mu.Unlock()
	out.NodeClaimEvents = l.byKind["*v1.NodeClaim"]
	out.NodeEvents = l.byKind["*v1.Node"]
	l.byKind = nil
}

// replacer records the NodeClaims capacity was launched ahead for.
type replacer struct {
	mu    sync.Mutex
	names map[string]bool
}

func (r *replacer) Prelaunch(_ context.Context, nodeClaim string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[nodeClaim] = true
	return nil
}

func (r *replacer) has(nodeClaim string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names[nodeClaim]
}

func TestInterruptionMessagesDecideTheNodeClaimsFate(t *testing.T) {
	f := newFixture(t)
	prelaunched := &replacer{names: map[string]bool{}}
	f.start(t, Options{Replacer: prelaunched})
	tests := []struct {
		name     string
		capacity ec2types.DefaultTargetCapacityType
		inject   func(id string) localaws.Interruption
		want     fate
	}{
		{
			name:     "spot interruption",
			capacity: ec2types.DefaultTargetCapacityTypeSpot,
			inject: func(id string) localaws.Interruption {
				return localaws.Interruption{Kind: localaws.InterruptionSpot, InstanceID: id}
			},
			want: fate{Deleting: true, Prelaunched: true, Condition: "True/SpotInterrupted", HasDeadline: true, NodeCordoned: true,
				NodeClaimEvents: []string{"SpotInterrupted"}, NodeEvents: []string{"SpotInterrupted"}},
		},
		{
			name:     "rebalance recommendation",
			capacity: ec2types.DefaultTargetCapacityTypeSpot,
			inject: func(id string) localaws.Interruption {
				return localaws.Interruption{Kind: localaws.InterruptionRebalance, InstanceID: id}
			},
			want: fate{Condition: "True/SpotRebalanceRecommendation",
				NodeClaimEvents: []string{"SpotRebalanceRecommendation"}, NodeEvents: []string{"SpotRebalanceRecommendation"}},
		},
		{
			name:     "scheduled change",
			capacity: ec2types.DefaultTargetCapacityTypeOnDemand,
			inject: func(id string) localaws.Interruption {
				return localaws.Interruption{Kind: localaws.InterruptionScheduled, InstanceID: id, StartIn: "2h"}
			},
			want: fate{Deleting: true, Prelaunched: true, Condition: "True/InstanceUnhealthy", HasDeadline: true, NodeCordoned: true,
				NodeClaimEvents: []string{"InstanceUnhealthy"}, NodeEvents: []string{"InstanceUnhealthy"}},
		},
		{
			name:     "state change to stopping",
			capacity: ec2types.DefaultTargetCapacityTypeOnDemand,
			inject: func(id string) localaws.Interruption {
				return localaws.Interruption{Kind: localaws.InterruptionStateChange, InstanceID: id, State: "stopping"}
			},
			want: fate{Deleting: true, Prelaunched: true, Condition: "True/InstanceStopping", HasDeadline: true, NodeCordoned: true,
				NodeClaimEvents: []string{"InstanceStopping"}, NodeEvents: []string{"InstanceStopping"}},
		},
		{
			name:     "state change to terminated",
			capacity: ec2types.DefaultTargetCapacityTypeOnDemand,
			inject: func(id string) localaws.Interruption {
				return localaws.Interruption{Kind: localaws.InterruptionStateChange, InstanceID: id, State: "terminated"}
			},
			want: fate{Deleting: true, Prelaunched: true, Condition: "True/InstanceTerminating", HasDeadline: true, NodeCordoned: true,
				NodeClaimEvents: []string{"InstanceTerminating"}, NodeEvents: []string{"InstanceTerminating"}},
		},
		{
			name:     "state change to running needs nothing",
			capacity: ec2types.DefaultTargetCapacityTypeOnDemand,
			inject: func(id string) localaws.Interruption {
				return localaws.Interruption{Kind: localaws.InterruptionStateChange, InstanceID: id, State: "running"}
			},
			want: fate{},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("interrupted-%d", i)
			_, id := f.launch(t, name, tt.capacity)
			start := time.Now()
			f.inject(t, tt.inject(id))
			deadline := time.Now().Add(10 * time.Second)
			for !f.queueEmpty(t) {
				if time.Now().After(deadline) {
					t.Fatal("the message was not deleted")
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("message handled and deleted %s after injection", time.Since(start).Round(time.Millisecond))
			got := f.fateOf(t, name)
			got.Prelaunched = prelaunched.has(name)
			f.events(&got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknownMessagesAreDeletedAndTheReaderGoesOn(t *testing.T) {
	f := newFixture(t)
	f.start(t, Options{})
	karpenterBefore := karpenterInterruptionCounts()
	for _, body := range []string{"not json", `{"detail-type":"Something Else","source":"aws.ec2"}`, `{"Service":"Amazon S3","Event":"s3:TestEvent"}`} {
		f.send(t, body)
	}
	_, id := f.launch(t, "after-garbage", ec2types.DefaultTargetCapacityTypeSpot)
	f.inject(t, localaws.Interruption{Kind: localaws.InterruptionSpot, InstanceID: id})
	// A message about an instance no NodeClaim has is handled too.
	f.send(t, strings.ReplaceAll(spotInterruptionBody, "i-1234567890abcdef0", "i-0000000000000ffff"))
	deadline := time.Now().Add(10 * time.Second)
	for !f.queueEmpty(t) || !f.fateOf(t, "after-garbage").Deleting {
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained or NodeClaim not deleted: %+v", f.fateOf(t, "after-garbage"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantMetrics := `
# HELP tailor_interruption_actions_total Actions taken on interruption messages, by action (CordonAndDelete, Mark, NoAction).
# TYPE tailor_interruption_actions_total counter
tailor_interruption_actions_total{action="CordonAndDelete"} 1
tailor_interruption_actions_total{action="NoAction"} 4
# HELP tailor_interruption_messages_total Interruption queue messages received, by kind (spot_interruption, rebalance_recommendation, scheduled_change, state_change, unknown).
# TYPE tailor_interruption_messages_total counter
tailor_interruption_messages_total{kind="spot_interruption"} 2
tailor_interruption_messages_total{kind="unknown"} 3
`
	if err := testutil.GatherAndCompare(f.registry, strings.NewReader(wantMetrics), "tailor_interruption_messages_total", "tailor_interruption_actions_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(f.registry, "tailor_interruption_message_latency_seconds"); n != 1 {
		t.Errorf("latency histogram series = %d, want 1", n)
	}
	got := karpenterInterruptionCounts()
	for k := range got {
		got[k] -= karpenterBefore[k]
	}
	want := map[string]float64{
		"received spot_interrupted true": 2, "received no_op false": 3,
		"deleted spot_interrupted": 2, "deleted no_op": 3,
		"disrupted spot_interrupted": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Karpenter's interruption metrics counted (-want +got):\n%s", diff)
	}
}

// karpenterInterruptionCounts reads the Karpenter-named interruption counters this test
// moves; they live on the process-wide registry, so tests compare differences.
func karpenterInterruptionCounts() map[string]float64 {
	return map[string]float64{
		"received spot_interrupted true": testutil.ToFloat64(tailormetrics.KarpenterInterruptionReceived.WithLabelValues("spot_interrupted", "true")),
		"received no_op false":           testutil.ToFloat64(tailormetrics.KarpenterInterruptionReceived.WithLabelValues("no_op", "false")),
		"deleted spot_interrupted":       testutil.ToFloat64(tailormetrics.KarpenterInterruptionDeleted.WithLabelValues("spot_interrupted")),
		"deleted no_op":                  testutil.ToFloat64(tailormetrics.KarpenterInterruptionDeleted.WithLabelValues("no_op")),
		"disrupted spot_interrupted": testutil.ToFloat64(tailormetrics.KarpenterNodeClaimsDisrupted.WithLabelValues(
			"spot_interrupted", "", "", "", tailormetrics.TerminationModeGraceful)),
	}
}
