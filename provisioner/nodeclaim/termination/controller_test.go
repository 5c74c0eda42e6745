package termination

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cloud := fake.New(clk)
	cloud.SetInstanceTypes(&cloudprovider.InstanceType{
		Name:      "m5.large",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
		Offerings: []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, Available: true}},
	})
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
