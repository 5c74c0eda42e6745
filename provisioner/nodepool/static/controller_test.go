package static

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var kube client.Client

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	testenv.Main(m, nil, &kube)
}

// keepFinalizer holds deleted NodeClaims, as the termination finalizer does while a node
// drains.
const keepFinalizer = "test.tailor.sh/keep"

// fakeLauncher creates NodeClaims of the NodePool on the API server, as LaunchStatic does
// after planning them.
type fakeLauncher struct{ launched int }

func (f *fakeLauncher) LaunchStatic(ctx context.Context, np *karpv1.NodePool, n int) ([]*karpv1.NodeClaim, error) {
	var out []*karpv1.NodeClaim
	for range n {
		nc := newClaim(np.Name, fmt.Sprintf("%s-%d", np.Name, f.launched))
		f.launched++
		if err := kube.Create(ctx, nc); err != nil {
			return out, err
		}
		out = append(out, nc)
	}
	return out, nil
}

func newClaim(pool, name string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}, Finalizers: []string{keepFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		},
	}
}

// staticPool stores a static NodePool and removes it and its NodeClaims when the test ends.
func staticPool(t *testing.T, name string, replicas int64, nodeLimit string) *karpv1.NodePool {
	t.Helper()
	ctx := context.Background()
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{
			Replicas: ptr.To(replicas),
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{},
				NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			}},
		},
	}
	if nodeLimit != "" {
		np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse(nodeLimit)}
	}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(ctx, np)
		list := &karpv1.NodeClaimList{}
		_ = kube.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: name})
		for i := range list.Items {
			nc := &list.Items[i]
			nc.Finalizers = nil
			_ = kube.Update(ctx, nc)
			_ = kube.Delete(ctx, nc)
		}
	})
	return np
}

// pool is what a test reads of a NodePool: its NodeClaims not being deleted and those
// being deleted.
type pool struct {
	Active, Deleting []string
}

func readPool(t *testing.T, name string) pool {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := kube.List(context.Background(), list, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
		t.Fatal(err)
	}
	var p pool
	for _, nc := range list.Items {
		if nc.DeletionTimestamp != nil {
			p.Deleting = append(p.Deleting, nc.Name)
		} else {
			p.Active = append(p.Active, nc.Name)
		}
	}
	slices.Sort(p.Active)
	slices.Sort(p.Deleting)
	return p
}

func setReplicas(t *testing.T, np *karpv1.NodePool, replicas int64) {
	t.Helper()
	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Replicas = ptr.To(replicas)
	if err := kube.Patch(context.Background(), np, patch); err != nil {
		t.Fatal(err)
	}
}

func reconcileOnce(t *testing.T, c *Controller, name string) reconcile.Result {
	t.Helper()
	res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for len(r.Events) > 0 {
		out = append(out, <-r.Events)
	}
	return out
}

func TestStaticNodePoolsKeepTheirReplicas(t *testing.T) {
	np := staticPool(t, "fixed", 3, "")
	launcher := &fakeLauncher{}
	recorder := record.NewFakeRecorder(10)
	c := NewController(kube, launcher, recorder, clocktesting.NewFakePassiveClock(time.Now()))

	reconcileOnce(t, c, "fixed")
	if diff := cmp.Diff(pool{Active: []string{"fixed-0", "fixed-1", "fixed-2"}}, readPool(t, "fixed")); diff != "" {
		t.Errorf("after creating a NodePool of 3 (-want +got):\n%s", diff)
	}
	reconcileOnce(t, c, "fixed")
	if launcher.launched != 3 {
		t.Errorf("a second pass launched %d more", launcher.launched-3)
	}

	// fixed-0 registered and runs a pod, fixed-1 registered and runs only a DaemonSet pod,
	// fixed-2 has not registered: scaling to one deletes fixed-2, then fixed-1.
	ctx := context.Background()
	for name, node := range map[string]string{"fixed-0": "node-0", "fixed-1": "node-1"} {
		nc := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			t.Fatal(err)
		}
		nc.Status.NodeName = node
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
		if err := kube.Status().Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	runPod(t, "web", "node-0", nil)
	runPod(t, "agent", "node-1", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-agent", Controller: ptr.To(true)}})
	drainEvents(recorder)
	setReplicas(t, np, 1)
	reconcileOnce(t, c, "fixed")
	if diff := cmp.Diff(pool{Active: []string{"fixed-0"}, Deleting: []string{"fixed-1", "fixed-2"}}, readPool(t, "fixed")); diff != "" {
		t.Errorf("after scaling to 1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Normal ScaledDown deleting 2 NodeClaims for 1 replicas: [fixed-2 fixed-1]"}, drainEvents(recorder)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	setReplicas(t, np, 2)
	reconcileOnce(t, c, "fixed")
	if diff := cmp.Diff(pool{Active: []string{"fixed-0", "fixed-3"}, Deleting: []string{"fixed-1", "fixed-2"}}, readPool(t, "fixed")); diff != "" {
		t.Errorf("after scaling back to 2 (-want +got):\n%s", diff)
	}
}

func TestStaticNodePoolsStayWithinLimitsNodes(t *testing.T) {
	np := staticPool(t, "capped", 4, "3")
	launcher := &fakeLauncher{}
	recorder := record.NewFakeRecorder(10)
	c := NewController(kube, launcher, recorder, clocktesting.NewFakePassiveClock(time.Now()))
	reconcileOnce(t, c, "capped")
	if diff := cmp.Diff(pool{Active: []string{"capped-0", "capped-1", "capped-2"}}, readPool(t, "capped")); diff != "" {
		t.Errorf("4 replicas under limits.nodes 3 (-want +got):\n%s", diff)
	}
	want := []string{
		"Warning AtNodeLimit 0 of 4 replicas run and limits.nodes 3 allows 3 more NodeClaims (0 exist, those being deleted included)",
		"Normal ScaledUp launching 3 NodeClaims for 4 replicas: [capped-0 capped-1 capped-2]",
	}
	if diff := cmp.Diff(want, drainEvents(recorder)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// A NodeClaim being deleted still holds an instance: its replacement waits for it.
	if err := kube.Delete(context.Background(), &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "capped-0"}}); err != nil {
		t.Fatal(err)
	}
	setReplicas(t, np, 3)
	reconcileOnce(t, c, "capped")
	if diff := cmp.Diff(pool{Active: []string{"capped-1", "capped-2"}, Deleting: []string{"capped-0"}}, readPool(t, "capped")); diff != "" {
		t.Errorf("a replacement past limits.nodes (-want +got):\n%s", diff)
	}
}

func TestCountWaitsForTheCacheToShowWhatWasCreated(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := NewController(kube, &fakeLauncher{}, record.NewFakeRecorder(1), clk)
	c.expect(c.created, "lag", []*karpv1.NodeClaim{newClaim("lag", "lag-0")})
	c.expect(c.deleted, "lag", []*karpv1.NodeClaim{newClaim("lag", "lag-1")})
	seen := []karpv1.NodeClaim{*newClaim("lag", "lag-1"), *newClaim("lag", "lag-2")}

	active, total, caughtUp := c.count("lag", seen)
	if diff := cmp.Diff([]string{"lag-2"}, names(active)); diff != "" || total != 2 || caughtUp {
		t.Errorf("before the cache shows lag-0: active %v (diff %s), total %d, caught up %t; want lag-2 only, 2, false", names(active), diff, total, caughtUp)
	}
	_, _, caughtUp = c.count("lag", append(seen, *newClaim("lag", "lag-0")))
	if !caughtUp {
		t.Error("not caught up once the cache shows lag-0")
	}
	c.expect(c.created, "lag", []*karpv1.NodeClaim{newClaim("lag", "lag-9")})
	clk.SetTime(clk.Now().Add(cacheGiveUp + time.Second))
	if _, _, caughtUp = c.count("lag", seen); !caughtUp {
		t.Errorf("still waiting for lag-9 %s after creating it", cacheGiveUp)
	}
}

// runPod stores a running pod bound to node.
func runPod(t *testing.T, name, node string, owners []metav1.OwnerReference) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, OwnerReferences: owners},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "pause"}}},
	}
	if err := kube.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(ctx, p, client.GracePeriodSeconds(0)) })
}
