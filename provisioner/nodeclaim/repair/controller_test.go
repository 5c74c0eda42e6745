package repair

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var kube client.Client

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	testenv.Main(m, nil, &kube)
}

// keepFinalizer holds a deleted NodeClaim so a test can read what was written on it.
const keepFinalizer = "test.tailor.sh/keep"

// now is the fake clock's time; conditions are dated relative to it.
var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// condition is a node condition that has held for the given time.
type condition struct {
	Type   corev1.NodeConditionType
	Status corev1.ConditionStatus
	For    time.Duration
}

// managedNode stores a NodeClaim of pool and its node, owned by it as registration makes
// it, with conds on the node (Ready=True when none).
func managedNode(t *testing.T, pool, name string, conds ...condition) (*corev1.Node, *karpv1.NodeClaim) {
	t.Helper()
	ctx := context.Background()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}, Finalizers: []string{keepFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		},
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID}},
	}}
	if err := kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if len(conds) == 0 {
		conds = []condition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, For: time.Hour}}
	}
	for _, c := range conds {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type: c.Type, Status: c.Status, Reason: "Test", LastTransitionTime: metav1.NewTime(now.Add(-c.For)), LastHeartbeatTime: metav1.NewTime(now),
		})
	}
	if err := kube.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(ctx, node)
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err == nil {
			controllerutil.RemoveFinalizer(nc, keepFinalizer)
			_ = kube.Update(ctx, nc)
			_ = kube.Delete(ctx, nc)
		}
	})
	return node, nc
}

// outcome is what one reconcile of a node did.
type outcome struct {
	Replaced             bool
	TerminationTimestamp string
	RequeueAfter         time.Duration
	Events               []string
}

func reconcileNode(t *testing.T, c *Controller, recorder *record.FakeRecorder, node *corev1.Node, nc *karpv1.NodeClaim) outcome {
	t.Helper()
	ctx := context.Background()
	res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(node)})
	if err != nil {
		t.Fatal(err)
	}
	got := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	out := outcome{Replaced: got.DeletionTimestamp != nil, TerminationTimestamp: got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey], RequeueAfter: res.RequeueAfter}
	for len(recorder.Events) > 0 {
		out.Events = append(out.Events, <-recorder.Events)
	}
	return out
}

func TestUnhealthyNodesAreReplacedOnceTheirConditionOutlastsItsToleration(t *testing.T) {
	replacing := func(cond, held, tolerated string) []string {
		msg := fmt.Sprintf("Warning Unhealthy %s for %s (tolerated for %s); replacing the node without waiting for PodDisruptionBudgets", cond, held, tolerated)
		return []string{msg, msg}
	}
	tests := []struct {
		name  string
		conds []condition
		want  outcome
	}{
		{name: "ready", want: outcome{}},
		{name: "not ready for 29m", conds: []condition{{corev1.NodeReady, corev1.ConditionFalse, 29 * time.Minute}},
			want: outcome{RequeueAfter: time.Minute}},
		{name: "not ready for 30m", conds: []condition{{corev1.NodeReady, corev1.ConditionFalse, 30 * time.Minute}},
			want: outcome{Replaced: true, TerminationTimestamp: "2026-11-27T12:00:00Z", Events: replacing("Ready=False", "30m", "30m")}},
		{name: "not heard from for 45m", conds: []condition{{corev1.NodeReady, corev1.ConditionUnknown, 45 * time.Minute}},
			want: outcome{Replaced: true, TerminationTimestamp: "2026-11-27T12:00:00Z", Events: replacing("Ready=Unknown", "45m", "30m")}},
		{name: "a broken accelerator on a ready node", conds: []condition{
			{corev1.NodeReady, corev1.ConditionTrue, time.Hour}, {"AcceleratedHardwareReady", corev1.ConditionFalse, 10 * time.Minute}},
			want: outcome{Replaced: true, TerminationTimestamp: "2026-11-27T12:00:00Z", Events: replacing("AcceleratedHardwareReady=False", "10m", "10m")}},
		{name: "storage broken for 5m", conds: []condition{
			{corev1.NodeReady, corev1.ConditionTrue, time.Hour}, {"StorageReady", corev1.ConditionFalse, 5 * time.Minute}},
			want: outcome{RequeueAfter: 25 * time.Minute}},
		{name: "memory pressure is no policy's", conds: []condition{
			{corev1.NodeReady, corev1.ConditionTrue, time.Hour}, {corev1.NodeMemoryPressure, corev1.ConditionTrue, 2 * time.Hour}},
			want: outcome{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := fmt.Sprintf("repair-%d", i)
			node, nc := managedNode(t, pool, fmt.Sprintf("repair-%d-node", i), tt.conds...)
			recorder := record.NewFakeRecorder(10)
			c := NewController(kube, recorder, clocktesting.NewFakePassiveClock(now), DefaultPolicies())
			before := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues(pool, metricReason))
			got := reconcileNode(t, c, recorder, node, nc)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reconcile (-want +got):\n%s", diff)
			}
			replaced := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues(pool, metricReason)) - before
			if want := map[bool]float64{true: 1}[tt.want.Replaced]; replaced != want {
				t.Errorf("tailor_nodeclaims_disrupted_total{reason=%q} rose by %v, want %v", metricReason, replaced, want)
			}
		})
	}
}

func TestRepairLeavesANodePoolAloneWhenMoreThanAFifthOfItsNodesAreUnhealthy(t *testing.T) {
	notReady := condition{corev1.NodeReady, corev1.ConditionFalse, time.Hour}
	tests := []struct {
		name             string
		nodes, unhealthy int
		replaced         bool
	}{
		{name: "the only node of a pool", nodes: 1, unhealthy: 1, replaced: true},
		{name: "one of five", nodes: 5, unhealthy: 1, replaced: true},
		{name: "two of five", nodes: 5, unhealthy: 2},
		{name: "two of ten", nodes: 10, unhealthy: 2, replaced: true},
		{name: "three of ten", nodes: 10, unhealthy: 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := fmt.Sprintf("cap-%d", i)
			var first *corev1.Node
			var firstClaim *karpv1.NodeClaim
			for n := range tt.nodes {
				var conds []condition
				if n < tt.unhealthy {
					conds = []condition{notReady}
				}
				node, nc := managedNode(t, pool, fmt.Sprintf("cap-%d-%d", i, n), conds...)
				if n == 0 {
					first, firstClaim = node, nc
				}
			}
			recorder := record.NewFakeRecorder(10)
			c := NewController(kube, recorder, clocktesting.NewFakePassiveClock(now), DefaultPolicies())
			got := reconcileNode(t, c, recorder, first, firstClaim)
			if got.Replaced != tt.replaced {
				t.Fatalf("replaced = %t, want %t (events %q)", got.Replaced, tt.replaced, got.Events)
			}
			if tt.replaced {
				return
			}
			want := fmt.Sprintf("Warning RepairBlocked Ready=False for 1h, but %d of the %d nodes of NodePool %s are unhealthy, more than the %d repair may replace: not replacing it",
				tt.unhealthy, tt.nodes, pool, maxUnhealthy(tt.nodes))
			if diff := cmp.Diff(outcome{RequeueAfter: blockedRecheck, Events: []string{want}}, got); diff != "" {
				t.Errorf("reconcile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRepairSkipsNodesItDoesNotOwnAndNodeClaimsAlreadyGoing(t *testing.T) {
	ctx := context.Background()
	notReady := condition{corev1.NodeReady, corev1.ConditionFalse, time.Hour}
	recorder := record.NewFakeRecorder(10)
	c := NewController(kube, recorder, clocktesting.NewFakePassiveClock(now), DefaultPolicies())

	orphan, orphanClaim := managedNode(t, "skip", "skip-orphan", notReady)
	orphan.OwnerReferences = nil
	if err := kube.Update(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	if got := reconcileNode(t, c, recorder, orphan, orphanClaim); got.Replaced || len(got.Events) > 0 {
		t.Errorf("a node no NodeClaim owns: %+v, want nothing done", got)
	}

	going, goingClaim := managedNode(t, "skip-going", "skip-going", notReady)
	if err := kube.Delete(ctx, goingClaim); err != nil {
		t.Fatal(err)
	}
	if got := reconcileNode(t, c, recorder, going, goingClaim); got.TerminationTimestamp != "" || len(got.Events) > 0 {
		t.Errorf("a NodeClaim already deleted: %+v, want nothing done", got)
	}
}

func TestPoliciesFlag(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  string
	}{
		{in: "Ready=False:30m,AcceleratedHardwareReady=False:10m", want: "Ready=False:30m,AcceleratedHardwareReady=False:10m"},
		{in: " Ready=Unknown:1h30m ", want: "Ready=Unknown:1h30m"},
		{in: "Ready=False", err: `policy "Ready=False" is not Type=Status:toleration, e.g. Ready=False:30m`},
		{in: "Ready=Maybe:30m", err: `policy "Ready=Maybe:30m": status "Maybe" is not True, False or Unknown`},
		{in: "Ready=False:-1m", err: `policy "Ready=False:-1m": toleration "-1m" is not a positive duration such as 30m`},
		{in: ",", err: `no policy in ",": write Type=Status:toleration, e.g. Ready=False:30m`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var ps Policies
			err := ps.Set(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("Set(%q) = %v, want error %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ps.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
	defaults := DefaultPolicies()
	var parsed Policies
	if err := parsed.Set(defaults.String()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(defaults, parsed); diff != "" {
		t.Errorf("the defaults do not read back (-want +got):\n%s", diff)
	}
}
