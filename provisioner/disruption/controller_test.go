package disruption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var kube client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, nil, &kube)
}

// instanceType is a machine of cpu cores and 4Gi per core at an on-demand price in one zone.
func instanceType(name string, cpu int64, price float64) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{
		Name: name,
		Labels: map[string]string{
			corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: *resource.NewQuantity(cpu*4<<30, resource.BinarySI),
			corev1.ResourcePods: resource.MustParse("110"),
		},
		Offerings: []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true}},
	}
}

// fixture is a cluster of NodeClaims and Nodes on a real API server, seen by the controller
// through a ClusterReader built from them, with replacements launched as NodeClaims.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	prefix string
	pool   *karpv1.NodePool
	types  []*cloudprovider.InstanceType
	pods   map[string][]*corev1.Pod
	// pending are the pods bound to no node.
	pending  []*corev1.Pod
	clock    *clocktesting.FakeClock
	launched int
	ctrl     *Controller
}

func newFixture(t *testing.T, name string) *fixture {
	f := &fixture{t: t, ctx: context.Background(), prefix: name, pods: map[string][]*corev1.Pod{},
		// The API server stamps the objects with the real time: the clock starts past it,
		// so the nodes are old enough to be disrupted whenever the test runs.
		clock: clocktesting.NewFakeClock(time.Now().Add(time.Hour).Truncate(time.Second)),
		types: []*cloudprovider.InstanceType{instanceType("big.2xlarge", 8, 1.0), instanceType("small.xlarge", 4, 0.2)},
	}
	f.pool = &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	f.pool.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	f.pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}
	f.pool.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	f.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	if err := kube.Create(f.ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	f.ctrl = NewController(kube, kube, f, f, f, record.NewFakeRecorder(100), f.clock, ControllerOptions{Options: DefaultOptions, Interval: time.Second, ReplacementTimeout: time.Minute})
	return f
}

// node creates an initialized NodeClaim of the instance type and its Node, with pods of
// the given CPU requests.
func (f *fixture) node(name, instanceType string, podCPU ...string) {
	f.t.Helper()
	full := f.prefix + "-" + name
	labels := map[string]string{
		karpv1.NodePoolLabelKey: f.pool.Name, corev1.LabelInstanceTypeStable: instanceType,
		corev1.LabelTopologyZone: "us-east-1a", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand,
		corev1.LabelHostname: full, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: full, Labels: labels},
		Spec:       karpv1.NodeClaimSpec{NodeClassRef: f.pool.Spec.Template.Spec.NodeClassRef, Requirements: f.pool.Spec.Template.Spec.Requirements},
	}
	if err := kube.Create(f.ctx, nc); err != nil {
		f.t.Fatal(err)
	}
	nc.Status.NodeName, nc.Status.ProviderID = full, "aws:///us-east-1a/i-"+full
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	if err := kube.Status().Update(f.ctx, nc); err != nil {
		f.t.Fatal(err)
	}
	var it *cloudprovider.InstanceType
	for _, candidate := range f.types {
		if candidate.Name == instanceType {
			it = candidate
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: full, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
	if err := kube.Create(f.ctx, node); err != nil {
		f.t.Fatal(err)
	}
	// The API server taints a new Node not-ready; a kubelet would report it Ready and the
	// node lifecycle controller lift the taint.
	node.Spec.Taints = nil
	if err := kube.Update(f.ctx, node); err != nil {
		f.t.Fatal(err)
	}
	node.Status.Allocatable = it.Allocatable()
	if err := kube.Status().Update(f.ctx, node); err != nil {
		f.t.Fatal(err)
	}
	for i, cpu := range podCPU {
		f.pods[full] = append(f.pods[full], &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-pod-%d", full, i), UID: types.UID(fmt.Sprint("uid-", full, i))},
			Spec: corev1.PodSpec{NodeName: full, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}}},
		})
	}
}

// initializeReplacement registers the n-th replacement launched as a Node of its name and
// marks it Initialized, as the lifecycle controller would once its node is ready.
func (f *fixture) initializeReplacement(n int) {
	f.t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: fmt.Sprintf("%s-replacement-%d", f.prefix, n)}, nc); err != nil {
		f.t.Fatal(err)
	}
	if err := kube.Create(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}); err != nil {
		f.t.Fatal(err)
	}
	nc.Status.NodeName = nc.Name
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	if err := kube.Status().Update(f.ctx, nc); err != nil {
		f.t.Fatal(err)
	}
}

// ClusterInput builds the planner's view from the API server's NodeClaims and Nodes.
func (f *fixture) ClusterInput(ctx context.Context) (packing.Input, error) {
	in := packing.Input{NodePools: []packing.NodePool{{NodePool: f.pool, InstanceTypes: f.types}}, Pods: f.pending}
	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: f.pool.Name}); err != nil {
		return in, err
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
			continue
		}
		schedulable := nc.DeletionTimestamp == nil && !nodeclaim.Cordoned(node)
		in.Nodes = append(in.Nodes, packing.Node{Node: node, NodeClaim: nc, Pods: f.pods[node.Name], Schedulable: schedulable})
	}
	return in, nil
}

// Launch creates the replacement's NodeClaim.
func (f *fixture) Launch(ctx context.Context, planned packing.NewNodeClaim, _ karpv1.DisruptionReason) (*karpv1.NodeClaim, error) {
	f.launched++
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-replacement-%d", f.prefix, f.launched), Labels: map[string]string{"replaces": f.prefix}},
		Spec:       karpv1.NodeClaimSpec{NodeClassRef: f.pool.Spec.Template.Spec.NodeClassRef, Requirements: planned.Requirements},
	}
	return nc, kube.Create(ctx, nc)
}

// PodsOf: no pods wait for the fixture's NodeClaims.
func (f *fixture) PodsOf(string) []nomination.Pod { return nil }

// state says, per node of the fixture, whether its NodeClaim is gone or going and whether it
// is cordoned.
func (f *fixture) state(names ...string) map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for _, name := range names {
		full := f.prefix + "-" + name
		nc := &karpv1.NodeClaim{}
		node := &corev1.Node{}
		if err := kube.Get(f.ctx, client.ObjectKey{Name: full}, node); err != nil {
			f.t.Fatal(err)
		}
		err := kube.Get(f.ctx, client.ObjectKey{Name: full}, nc)
		switch {
		case client.IgnoreNotFound(err) != nil:
			f.t.Fatal(err)
		case err != nil || nc.DeletionTimestamp != nil:
			out[name] = "deleted"
		case nodeclaim.Cordoned(node):
			out[name] = "cordoned"
		default:
			out[name] = "kept"
		}
	}
	return out
}

// patchNodeClaim edits the NodeClaim of a node of the fixture, its status when status is set.
func (f *fixture) patchNodeClaim(name string, status bool, edit func(*karpv1.NodeClaim)) {
	f.t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-" + name}, nc); err != nil {
		f.t.Fatal(err)
	}
	patch := client.MergeFrom(nc.DeepCopy())
	edit(nc)
	var err error
	if status {
		err = kube.Status().Patch(f.ctx, nc, patch)
	} else {
		err = kube.Patch(f.ctx, nc, patch)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) pass() {
	f.t.Helper()
	if err := f.ctrl.Pass(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// webReplicaSet controls the fixture's pods that have it as owner.
var webReplicaSet = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "uid-rs-web", Controller: ptr.To(true)}

func TestBudgetOfZeroDisruptsNothing(t *testing.T) {
	f := newFixture(t, "frozen")
	f.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	if err := kube.Update(f.ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	f.node("idle", "small.xlarge")
	passes := countPasses()
	f.pass()
	if diff := cmp.Diff(map[string]string{"idle": "kept"}, f.state("idle")); diff != "" {
		t.Errorf("after a pass (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{PassDecided: 0, PassBusy: 0, PassIdle: 1, PassPlanning: 0, PassFailed: 0}, passes()); diff != "" {
		t.Errorf("passes by result (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(budgetBlockedCandidates.WithLabelValues(f.pool.Name, string(karpv1.DisruptionReasonEmpty))); got != 1 {
		t.Errorf("tailor_disruption_budget_blocked_candidates{reason=Empty} = %v, want 1", got)
	}
}

// countPasses returns a function that reports the passes, by result, since it was made.
func countPasses() func() map[string]float64 {
	results := []string{PassDecided, PassIdle, PassBusy, PassPlanning, PassFailed}
	start := map[string]float64{}
	for _, r := range results {
		start[r] = testutil.ToFloat64(passesTotal.WithLabelValues(r))
	}
	return func() map[string]float64 {
		out := map[string]float64{}
		for _, r := range results {
			out[r] = testutil.ToFloat64(passesTotal.WithLabelValues(r)) - start[r]
		}
		return out
	}
}

// TestAPlanLongerThanAPassIsCarriedOn: with a pass time that allows one step of a plan,
// the first passes weigh part of it and touch nothing, and a later one carries out the
// same decision as a controller planning to the end in one pass.
func TestAPlanLongerThanAPassIsCarriedOn(t *testing.T) {
	underused := func(f *fixture) {
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			f.node(name, "big.2xlarge", "1")
		}
	}
	oneShot := newFixture(t, "oneshot")
	underused(oneShot)
	oneShot.ctrl.opts.PassTime = 0
	oneShot.pass()
	want := oneShot.state("a", "b", "c", "d", "e")

	f := newFixture(t, "carried")
	underused(f)
	f.ctrl.opts.PassTime = time.Nanosecond
	passes := countPasses()
	for range 20 {
		f.pass()
		if !f.ctrl.planning() {
			break
		}
		if diff := cmp.Diff(map[string]string{"a": "kept", "b": "kept", "c": "kept", "d": "kept", "e": "kept"}, f.state("a", "b", "c", "d", "e")); diff != "" {
			t.Fatalf("while the plan is made (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff(want, f.state("a", "b", "c", "d", "e")); diff != "" {
		t.Errorf("once the plan is made, against one made in one pass (-want +got):\n%s", diff)
	}
	got := passes()
	if got[PassPlanning] == 0 || got[PassDecided] != 1 {
		t.Errorf("passes by result %v, want some planning and one decided", got)
	}
}
