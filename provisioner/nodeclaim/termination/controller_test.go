package termination

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

// m5Cloud is a fake cloud that launches on-demand m5.large instances.
func m5Cloud(clk *clocktesting.FakeClock) *fake.CloudProvider {
	cloud := fake.New(clk)
	cloud.SetInstanceTypes(&cloudprovider.InstanceType{
		Name:      "m5.large",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
		Offerings: []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, Available: true}},
	})
	return cloud
}

// m5Spec is the spec of a NodeClaim m5Cloud launches.
func m5Spec() karpv1.NodeClaimSpec {
	return karpv1.NodeClaimSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
	}
}

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

// TestANodeClaimDeletedDuringItsLaunchKeepsItsFinalizerUntilTheLaunchEnds deletes NodeClaims
// that recorded no instance: one whose launch is in flight is kept while the launch may still
// create an instance, the instance that launch creates is terminated, and the NodeClaim is
// released once the launch's window is over; one never launched is released at once.
func TestANodeClaimDeletedDuringItsLaunchKeepsItsFinalizerUntilTheLaunchEnds(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	// NodeClaim creation times come from the API server's clock: the fake one starts there.
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := m5Cloud(clk)
	deleted := func(name string, annotations map[string]string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer}, Annotations: annotations},
			Spec: karpv1.NodeClaimSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
			},
		}
		if err := kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			got := &karpv1.NodeClaim{}
			if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err == nil {
				got.Finalizers = nil
				_ = kube.Update(context.Background(), got)
			}
		})
		if err := kube.Delete(ctx, nc); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	c := NewController(kube, kube, cloud, drain.New(kube, kube, kubernetes.NewForConfigOrDie(cfg)), record.NewFakeRecorder(10), clk)
	reconcileOnce := func(nc *karpv1.NodeClaim) (requeue time.Duration, released bool) {
		t.Helper()
		res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)})
		if err != nil {
			t.Fatal(err)
		}
		err = kube.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{})
		return res.RequeueAfter, client.IgnoreNotFound(err) == nil && err != nil
	}
	type step struct {
		Requeue  time.Duration
		Released bool
		Live     int
	}
	observe := func(nc *karpv1.NodeClaim) step {
		requeue, released := reconcileOnce(nc)
		live, err := cloud.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return step{Requeue: requeue, Released: released, Live: len(live)}
	}

	inFlight := deleted("in-flight", map[string]string{nodeclaim.LaunchStartedAnnotationKey: clk.Now().UTC().Format(time.RFC3339)})
	var got []step
	got = append(got, observe(inFlight))
	// The launch's CreateFleet returns: an instance tagged for the deleted NodeClaim.
	if _, err := cloud.Create(ctx, inFlight); err != nil {
		t.Fatal(err)
	}
	got = append(got, observe(inFlight), observe(inFlight))
	clk.Step(nodeclaim.InFlightWindow)
	got = append(got, observe(inFlight))
	want := []step{
		{Requeue: pollInterval},               // nothing launched yet: kept
		{Requeue: pollInterval},               // the instance is terminated
		{Requeue: pollInterval},               // the launch may still be in flight: kept
		{Requeue: 0, Released: true, Live: 0}, // past its window: released
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reconciles of a NodeClaim deleted during its launch (-want +got):\n%s", diff)
	}

	never := deleted("never-launched", nil)
	if diff := cmp.Diff(step{Released: true}, observe(never)); diff != "" {
		t.Errorf("a NodeClaim never launched (-want +got):\n%s", diff)
	}
}

// TestADrainHeldByABudgetEndsOnceTheInstanceIsGone deletes a NodeClaim whose node runs a pod
// a PodDisruptionBudget holds: the drain waits while the instance runs, and once the
// instance is gone (reclaimed without notice) the node and the NodeClaim go without it.
func TestADrainHeldByABudgetEndsOnceTheInstanceIsGone(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := m5Cloud(clk)
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec:       m5Spec(),
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	launched, err := cloud.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID, nc.Status.NodeName = launched.Status.ProviderID, "held-node"
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "held-node"}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
	if err := kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "held"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "held", Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// Ready, as a node that died without notice still reports it until its lease lapses.
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// No disruption controller runs here: the budget's status is never computed, and the
	// Eviction API refuses every eviction it covers.
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "held"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if err := kube.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), pdb)
		_ = kube.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
	})
	if err := kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	c := NewController(kube, kube, cloud, drain.New(kube, kube, kubernetes.NewForConfigOrDie(cfg)), record.NewFakeRecorder(10), clk)
	state := func() string {
		t.Helper()
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
			t.Fatal(err)
		}
		ncErr := kube.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{})
		nodeErr := kube.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{})
		switch {
		case apierrors.IsNotFound(ncErr) && apierrors.IsNotFound(nodeErr):
			return "released, node deleted"
		case ncErr == nil && nodeErr == nil:
			return "kept"
		}
		return fmt.Sprintf("NodeClaim: %v, node: %v", ncErr, nodeErr)
	}
	if got := state(); got != "kept" {
		t.Fatalf("while the instance runs and the budget holds its pod: %s, want kept", got)
	}
	if err := cloud.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != "released, node deleted" {
		t.Errorf("once the instance is gone: %s, want released, node deleted", got)
	}
}
