package disruption

import (
	"context"
	"fmt"
	"slices"
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
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
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

func TestEmptyNodeIsRemovedAndDoNotDisruptHolds(t *testing.T) {
	f := newFixture(t, "empty")
	f.node("idle", "small.xlarge")
	f.node("pinned", "small.xlarge", "100m")
	f.pods[f.prefix+"-pinned"][0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	f.pass()
	if diff := cmp.Diff(map[string]string{"idle": "deleted", "pinned": "kept"}, f.state("idle", "pinned")); diff != "" {
		t.Errorf("after a pass (-want +got):\n%s", diff)
	}
}

func TestUnderusedNodesAreReplacedOnceTheReplacementIsUp(t *testing.T) {
	f := newFixture(t, "replace")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.pods[f.prefix+"-b"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	passes := countPasses()
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("after the decision (-want +got):\n%s", diff)
	}
	if f.launched != 1 {
		t.Fatalf("launched %d replacements, want 1 small node for both", f.launched)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("while the replacement is not initialized (-want +got):\n%s", diff)
	}
	f.initializeReplacement(1)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "deleted"}, f.state("a", "b")); diff != "" {
		t.Errorf("once the replacement is up (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{PassDecided: 1, PassBusy: 2, PassIdle: 0, PassPlanning: 0, PassFailed: 0}, passes()); diff != "" {
		t.Errorf("passes by result (-want +got):\n%s", diff)
	}
	want := map[string]map[types.UID]int{f.prefix + "-replacement-1": {webReplicaSet.UID: 2}}
	if diff := cmp.Diff(want, f.reservations(f.prefix+"-replacement-1")); diff != "" {
		t.Errorf("reservations for the pods of a and b (-want +got):\n%s", diff)
	}
}

// TestNodesRunningAGangAreNotConsolidated: of two underused nodes, each of which could take
// the other's pod, the one running a member of a gang stays, and takes the other's pod.
func TestNodesRunningAGangAreNotConsolidated(t *testing.T) {
	f := newFixture(t, "gang")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	// Alike but for their names, a would go first.
	f.pods[f.prefix+"-a"][0].Labels = map[string]string{gang.Label: "train"}
	f.pods[f.prefix+"-b"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "deleted"}, f.state("a", "b")); diff != "" {
		t.Errorf("after a pass (-want +got):\n%s", diff)
	}
	if f.launched != 0 {
		t.Errorf("launched %d replacements, want none", f.launched)
	}
}

// TestStaticNodePoolsAreNotConsolidated: with the StaticCapacity gate, an empty node and
// two underused ones of a static NodePool stay; without it, spec.replicas changes nothing.
func TestStaticNodePoolsAreNotConsolidated(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("StaticCapacity=%t", gate), func(t *testing.T) {
			f := newFixture(t, fmt.Sprintf("static-%t", gate))
			f.pool.Spec.Replicas = ptr.To[int64](3)
			f.ctrl.opts.StaticCapacity = gate
			f.node("idle", "small.xlarge")
			f.node("a", "big.2xlarge", "1")
			f.node("b", "big.2xlarge", "1")
			f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
			f.pods[f.prefix+"-b"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
			f.pass()
			f.pass()
			want := map[string]string{"idle": "kept", "a": "kept", "b": "kept"}
			if !gate {
				want = map[string]string{"idle": "deleted", "a": "cordoned", "b": "cordoned"}
			}
			if diff := cmp.Diff(want, f.state("idle", "a", "b")); diff != "" {
				t.Errorf("after two passes (-want +got):\n%s", diff)
			}
		})
	}
}

// webReplicaSet controls the fixture's pods that have it as owner.
var webReplicaSet = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "uid-rs-web", Controller: ptr.To(true)}

// reservations returns, per node that has an active reservation, its pod counts.
func (f *fixture) reservations(nodes ...string) map[string]map[types.UID]int {
	f.t.Helper()
	out := map[string]map[types.UID]int{}
	for _, name := range nodes {
		node := &corev1.Node{}
		if err := kube.Get(f.ctx, client.ObjectKey{Name: name}, node); err != nil {
			f.t.Fatal(err)
		}
		r, ok, err := reservation.Of(node)
		if err != nil {
			f.t.Fatal(err)
		}
		if ok && r.Active(f.clock.Now()) {
			out[name] = r.Pods
		}
	}
	return out
}

func TestTheNodesMovedPodsGoToAreReservedUntilTheyLand(t *testing.T) {
	f := newFixture(t, "reserve")
	api := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api", UID: "uid-rs-api", Controller: ptr.To(true)}
	f.node("a", "big.2xlarge", "500m", "250m", "250m")
	f.node("c", "big.2xlarge", "5", "1")
	for i, owner := range []metav1.OwnerReference{webReplicaSet, webReplicaSet, api} {
		f.pods[f.prefix+"-a"][i].OwnerReferences = []metav1.OwnerReference{owner}
	}
	f.pods[f.prefix+"-c"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "c": "kept"}, f.state("a", "c")); diff != "" {
		t.Fatalf("a's pods fit on c (-want +got):\n%s", diff)
	}
	// c runs one web pod and takes a's two, and a's api pod.
	want := map[string]map[types.UID]int{f.prefix + "-c": {webReplicaSet.UID: 3, api.UID: 1}}
	if diff := cmp.Diff(want, f.reservations(f.prefix+"-c")); diff != "" {
		t.Errorf("reservations while a drains (-want +got):\n%s", diff)
	}
	// The room kept for each pod to come is the most a pod of its controller requests.
	node := &corev1.Node{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-c"}, node); err != nil {
		t.Fatal(err)
	}
	r, _, err := reservation.Of(node)
	if err != nil {
		t.Fatal(err)
	}
	requests := func(cpu string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
	}
	wantRequests := map[types.UID]corev1.ResourceList{webReplicaSet.UID: requests("500m"), api.UID: requests("250m")}
	if diff := cmp.Diff(wantRequests, r.Requests, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("room kept per pod to come (-want +got):\n%s", diff)
	}
	// a is gone and no moved pod is pending: the reservation is lifted.
	delete(f.pods, f.prefix+"-a")
	f.pass()
	if diff := cmp.Diff(map[string]map[types.UID]int{}, f.reservations(f.prefix+"-c")); diff != "" {
		t.Errorf("reservations once the moves are over (-want +got):\n%s", diff)
	}
}

func TestAFailedReplacementLeavesTheNodesInPlace(t *testing.T) {
	f := newFixture(t, "abort")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	f.pass()
	if err := kube.Delete(f.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: f.prefix + "-replacement-1"}}); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("after the replacement failed (-want +got):\n%s", diff)
	}
}

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

func TestAReplacementWaitsOutDoNotDisruptAddedMeanwhile(t *testing.T) {
	f := newFixture(t, "revalidate")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	f.pass()
	node := &corev1.Node{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-a"}, node); err != nil {
		t.Fatal(err)
	}
	node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	if err := kube.Update(f.ctx, node); err != nil {
		t.Fatal(err)
	}
	f.initializeReplacement(1)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("after do-not-disrupt was set during the replacement (-want +got):\n%s", diff)
	}
}

func TestPrelaunchLaunchesRoomForTheInterruptedNodesPods(t *testing.T) {
	f := newFixture(t, "prelaunch")
	f.node("spot", "small.xlarge", "3")
	f.node("idle", "small.xlarge")
	f.node("busy", "small.xlarge", "3")
	// The idle node takes one of the two nodes' pods; the other needs new capacity.
	if err := f.ctrl.Prelaunch(f.ctx, f.prefix+"-spot"); err != nil {
		t.Fatal(err)
	}
	if f.launched != 0 {
		t.Fatalf("launched %d NodeClaims for pods that fit on the idle node, want 0", f.launched)
	}
	f.pods[f.prefix+"-idle"] = f.pods[f.prefix+"-busy"]
	if err := f.ctrl.Prelaunch(f.ctx, f.prefix+"-spot"); err != nil {
		t.Fatal(err)
	}
	if f.launched != 1 {
		t.Errorf("launched %d NodeClaims when no node has room, want 1", f.launched)
	}
	if diff := cmp.Diff(map[string]string{"spot": "kept", "idle": "kept", "busy": "kept"}, f.state("spot", "idle", "busy")); diff != "" {
		t.Errorf("Prelaunch touched nodes (-want +got):\n%s", diff)
	}
}

// TestALeaderHoldsThePodsItsPredecessorMayHaveMoved: a sidecar that takes over does not
// know what the one before it moved, so pods created before it led stay put until they are
// MovedPodsHold old; pods created since are judged on what it moved itself.
func TestALeaderHoldsThePodsItsPredecessorMayHaveMoved(t *testing.T) {
	f := newFixture(t, "takeover")
	f.ctrl.opts.MovedPodsHold = time.Minute
	f.ctrl.leadingSince = f.clock.Now()
	pod := func(name string, age time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{webReplicaSet},
			CreationTimestamp: metav1.NewTime(f.clock.Now().Add(-age))}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		at   time.Duration
		want bool
	}{
		{name: "created 10s before the takeover", pod: pod("young", 10*time.Second), want: true},
		{name: "the same pod once a minute old", pod: pod("young", 10*time.Second), at: 50 * time.Second, want: false},
		{name: "created 2m before the takeover", pod: pod("old", 2*time.Minute), want: false},
		{name: "created after the takeover", pod: pod("new", -5*time.Second), at: 10 * time.Second, want: false},
	}
	start := f.clock.Now()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.SetTime(start.Add(tt.at))
			if got := f.ctrl.wasMoved(tt.pod); got != tt.want {
				t.Errorf("wasMoved() = %t, want %t", got, tt.want)
			}
		})
	}
}

// TestASidecarWithoutLeaderElectionLeadsFromItsStart: a pod created after the process
// started but before the disruption controller's first pass (the sidecar is ready before
// its caches sync) was moved by no one, so it is not held, also when it was created in the
// same second as the process started (its creation timestamp, in whole seconds, then reads
// earlier than the start: CI's TestConsolidationPolicies failed on that); with leader
// election, a pod created before the controller was elected may have been moved by the
// previous leader.
func TestASidecarWithoutLeaderElectionLeadsFromItsStart(t *testing.T) {
	for _, tt := range []struct {
		name           string
		leaderElection bool
		// created is when the pod is created, after the process started at 0.6 s past a
		// whole second; its creation timestamp keeps the whole seconds.
		created time.Duration
		want    bool
	}{
		{name: "one replica, a pod created a second later", created: time.Second, want: false},
		{name: "one replica, a pod created in the same second", created: 200 * time.Millisecond, want: false},
		{name: "replicas taking turns, a pod created before the election", leaderElection: true, created: time.Second, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second).Add(600 * time.Millisecond))
			c := NewController(kube, kube, nil, nil, nil, record.NewFakeRecorder(10), clk, ControllerOptions{Interval: time.Second, MovedPodsHold: time.Hour, LeaderElection: tt.leaderElection})
			clk.Step(tt.created)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: []metav1.OwnerReference{webReplicaSet}, CreationTimestamp: metav1.NewTime(clk.Now().Truncate(time.Second))}}
			clk.Step(2 * time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if got := c.wasMoved(pod); got != tt.want {
				t.Errorf("wasMoved() = %t, want %t", got, tt.want)
			}
		})
	}
}

// TestCordonsOfDecisionsNoLongerUnderWayAreLifted: a node a disruption cordoned for a
// decision that is not under way takes pods again; a node cordoned by anything else, whose
// interruption is announced or whose NodeClaim is going stays cordoned, also when the cache
// has not caught up with the API server; and a cordon the cache does not show yet is lifted
// once it does.
func TestCordonsOfDecisionsNoLongerUnderWayAreLifted(t *testing.T) {
	f := newFixture(t, "abandoned")
	names := []string{"left", "interrupted", "others", "going", "late"}
	for _, name := range names {
		f.node(name, "small.xlarge", "1")
		if name != "others" {
			if err := f.ctrl.cordon(f.ctx, f.prefix+"-"+name); err != nil {
				t.Fatal(err)
			}
		}
	}
	other := &corev1.Node{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-others"}, other); err != nil {
		t.Fatal(err)
	}
	if err := nodeclaim.Cordon(f.ctx, kube, other); err != nil {
		t.Fatal(err)
	}
	f.patchNodeClaim("interrupted", false, func(nc *karpv1.NodeClaim) {
		nc.Annotations = map[string]string{termination.InterruptionDeadlineAnnotationKey: "2026-11-27T12:00:00Z"}
	})
	f.patchNodeClaim("going", false, func(nc *karpv1.NodeClaim) { nc.Finalizers = []string{"test.tailor.sh/hold"} })
	if err := kube.Delete(f.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: f.prefix + "-going"}}); err != nil {
		t.Fatal(err)
	}
	// lagging is the cluster as a cache that has not caught up shows it: no cordon on "late"
	// yet, and "going" not being deleted yet.
	lagging := func() []packing.Node {
		in, err := f.ClusterInput(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range in.Nodes {
			switch n.Node.Name {
			case f.prefix + "-late":
				in.Nodes[i].Node = n.Node.DeepCopy()
				delete(in.Nodes[i].Node.Annotations, CordonedAnnotationKey)
				in.Nodes[i].Node.Spec.Taints = nil
			case f.prefix + "-going":
				in.Nodes[i].NodeClaim = n.NodeClaim.DeepCopy()
				in.Nodes[i].NodeClaim.DeletionTimestamp = nil
			}
		}
		return in.Nodes
	}
	if err := f.ctrl.releaseAbandoned(f.ctx, lagging()); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"left": false, "interrupted": true, "others": true, "going": true, "late": true}
	if diff := cmp.Diff(want, f.tainted(karpv1.DisruptedNoScheduleTaint, names...)); diff != "" {
		t.Errorf("cordoned, after a sweep over a lagging cache (-want +got):\n%s", diff)
	}
	in, err := f.ClusterInput(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ctrl.releaseAbandoned(f.ctx, in.Nodes); err != nil {
		t.Fatal(err)
	}
	want["late"] = false
	if diff := cmp.Diff(want, f.tainted(karpv1.DisruptedNoScheduleTaint, names...)); diff != "" {
		t.Errorf("cordoned, once the cache caught up (-want +got):\n%s", diff)
	}
}

// TestASuccessorReplacesTheDriftedNodeItsPredecessorLeftCordoned replays the randomized
// fault trials' seed 5091: a leader cordons a drifted node and launches its replacement, then
// stops; its successor lifts the cordon and replaces the node itself.
func TestASuccessorReplacesTheDriftedNodeItsPredecessorLeftCordoned(t *testing.T) {
	f := newFixture(t, "succession")
	f.node("drifted", "small.xlarge", "1")
	f.patchNodeClaim("drifted", true, func(nc *karpv1.NodeClaim) {
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeDrifted, metav1.ConditionTrue, "AMIDrifted", "")
	})
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "cordoned"}, f.state("drifted")); diff != "" || f.launched != 1 {
		t.Fatalf("the predecessor's decision launched %d replacements, want 1; (-want +got):\n%s", f.launched, diff)
	}
	f.ctrl = NewController(kube, kube, f, f, f, record.NewFakeRecorder(100), f.clock, f.ctrl.opts)
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "kept"}, f.state("drifted")); diff != "" || f.launched != 1 {
		t.Fatalf("the successor's first pass launched %d replacements in all, want 1; (-want +got):\n%s", f.launched, diff)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "cordoned"}, f.state("drifted")); diff != "" || f.launched != 2 {
		t.Fatalf("the successor's drift decision launched %d replacements in all, want 2; (-want +got):\n%s", f.launched, diff)
	}
	f.initializeReplacement(2)
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "deleted"}, f.state("drifted")); diff != "" {
		t.Errorf("once the successor's replacement is up (-want +got):\n%s", diff)
	}
}

func TestPodsMovedByConsolidationAreNotMovedAgainWithinTheHold(t *testing.T) {
	f := newFixture(t, "hold")
	f.ctrl.opts.MovedPodsHold = time.Hour
	web := webReplicaSet
	f.node("a", "big.2xlarge", "500m")
	f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{web}
	f.node("b", "big.2xlarge", "1")
	in, err := f.ClusterInput(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	cluster, _, err := f.ctrl.view(f.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var a Candidate
	for _, cand := range cluster.Candidates {
		if cand.Node == f.prefix+"-a" {
			a = cand
		}
	}
	if err := f.ctrl.execute(f.ctx, Decision{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []Candidate{a}}); err != nil {
		t.Fatal(err)
	}
	// The ReplicaSet makes up for the evicted pod; the scheduler puts it on b.
	f.clock.Step(time.Second)
	moved := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-2", UID: "uid-web-2", OwnerReferences: []metav1.OwnerReference{web},
			CreationTimestamp: metav1.NewTime(f.clock.Now())},
		Spec: corev1.PodSpec{NodeName: f.prefix + "-b", Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}},
	}
	f.pods[f.prefix+"-b"] = append(f.pods[f.prefix+"-b"], moved)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("within the hold (-want +got):\n%s", diff)
	}
	// A later decision moves another pod of the same ReplicaSet: the pod moved first is no
	// less moved for it.
	f.clock.Step(time.Minute)
	f.node("c", "big.2xlarge", "500m")
	f.pods[f.prefix+"-c"][0].OwnerReferences = []metav1.OwnerReference{web}
	if err := f.ctrl.deleteOriginals(f.ctx, Decision{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []Candidate{{
		Node: f.prefix + "-c", NodeClaim: f.prefix + "-c", NodePool: f.pool.Name, Pods: f.pods[f.prefix+"-c"],
	}}}, nil); err != nil {
		t.Fatal(err)
	}
	delete(f.pods, f.prefix+"-c")
	f.clock.Step(30 * time.Minute)
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "kept"}, f.state("b")); diff != "" {
		t.Errorf("within the hold, after another pod of the ReplicaSet moved (-want +got):\n%s", diff)
	}
	if f.launched != 0 {
		t.Errorf("launched %d replacements for a node holding a moved pod, want 0", f.launched)
	}
	f.clock.Step(time.Hour)
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "cordoned"}, f.state("b")); diff != "" {
		t.Errorf("after the hold, b is replaced by a smaller node (-want +got):\n%s", diff)
	}
}

func TestNodesThePlanTakesLaterArePreferredAgainst(t *testing.T) {
	f := newFixture(t, "planned")
	f.setBudget("1")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1500m")
	f.node("c", "big.2xlarge", "5")
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "kept", "c": "kept"}, f.state("a", "b", "c")); diff != "" {
		t.Errorf("a plan of a and b with a budget of one node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"a": false, "b": true, "c": false}, f.tainted(PlannedTaint, "a", "b", "c")); diff != "" {
		t.Errorf("PlannedTaint while a goes and the plan takes b later (-want +got):\n%s", diff)
	}
	f.setBudget("0")
	f.pass()
	if diff := cmp.Diff(map[string]bool{"b": false, "c": false}, f.tainted(PlannedTaint, "b", "c")); diff != "" {
		t.Errorf("PlannedTaint once nothing may be disrupted (-want +got):\n%s", diff)
	}
}

func (f *fixture) setBudget(nodes string) {
	f.t.Helper()
	f.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: nodes}}
	if err := kube.Update(f.ctx, f.pool); err != nil {
		f.t.Fatal(err)
	}
}

// tainted says, per node of the fixture, whether it carries the taint.
func (f *fixture) tainted(taint corev1.Taint, names ...string) map[string]bool {
	f.t.Helper()
	out := map[string]bool{}
	for _, name := range names {
		node := &corev1.Node{}
		if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-" + name}, node); err != nil {
			f.t.Fatal(err)
		}
		out[name] = slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
	}
	return out
}

func TestReplacementsAreNotConsolidatedWithinTheHold(t *testing.T) {
	f := newFixture(t, "replacement-hold")
	f.ctrl.opts.MovedPodsHold = time.Hour
	// x was launched by an earlier replacement; its pods did not all come.
	f.ctrl.replacements[f.prefix+"-x"] = f.clock.Now()
	f.node("x", "big.2xlarge", "1")
	f.pass()
	if diff := cmp.Diff(map[string]string{"x": "kept"}, f.state("x")); diff != "" {
		t.Errorf("within the hold (-want +got):\n%s", diff)
	}
	f.clock.Step(time.Hour)
	f.pass()
	if diff := cmp.Diff(map[string]string{"x": "cordoned"}, f.state("x")); diff != "" {
		t.Errorf("after the hold, x is replaced by a smaller node (-want +got):\n%s", diff)
	}
}

func TestNoDecisionWhileTheLastOneIsUnderWay(t *testing.T) {
	f := newFixture(t, "motion")
	f.ctrl.opts.MovedPodsHold = time.Hour
	f.setBudget("1")
	f.node("a", "big.2xlarge", "500m")
	f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.node("b", "big.2xlarge", "1")
	f.node("c", "big.2xlarge", "1")
	a := &karpv1.NodeClaim{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-a"}, a); err != nil {
		t.Fatal(err)
	}
	// Termination's finalizer keeps a deleted NodeClaim until its node is drained.
	a.Finalizers = []string{"test.tailor.sh/draining"}
	if err := kube.Update(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	// The plan takes all three, a first onto a small replacement.
	f.pass()
	f.initializeReplacement(1)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "kept", "c": "kept"}, f.state("a", "b", "c")); diff != "" {
		t.Fatalf("first decision (-want +got):\n%s", diff)
	}
	delete(f.pods, f.prefix+"-a")
	// The budget would allow the rest of the plan now.
	f.setBudget("100%")
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "kept", "c": "kept"}, f.state("b", "c")); diff != "" {
		t.Errorf("while a is still draining (-want +got):\n%s", diff)
	}
	if err := kube.Get(f.ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	a.Finalizers = nil
	if err := kube.Update(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	// The ReplicaSet made up for the pod evicted from a; the new pod waits for a node.
	f.clock.Step(time.Second)
	moved := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-2", UID: "uid-web-2", OwnerReferences: []metav1.OwnerReference{webReplicaSet},
			CreationTimestamp: metav1.NewTime(f.clock.Now())},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}},
	}
	f.pending = []*corev1.Pod{moved}
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "kept", "c": "kept"}, f.state("b", "c")); diff != "" {
		t.Errorf("while the pod moved from a waits for a node (-want +got):\n%s", diff)
	}
	f.pending = nil
	moved.Spec.NodeName = f.prefix + "-c"
	f.pods[f.prefix+"-c"] = append(f.pods[f.prefix+"-c"], moved)
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "deleted", "c": "kept"}, f.state("b", "c")); diff != "" {
		t.Errorf("once the moved pod landed on c, b goes (-want +got):\n%s", diff)
	}
}
