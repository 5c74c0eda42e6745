package expiration

import (
	"context"
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

// nodeClaim stores a NodeClaim of the NodePool "expiry" with expireAfter. (A zero
// NillableDuration is sent as "Never", so Go clients set it as provisioning does.)
func nodeClaim(t *testing.T, name, expireAfter string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "expiry"}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		},
	}
	nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration(expireAfter)
	if err := kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), nc) })
	return nc
}

func TestNodeClaimsAreDeletedOnceTheirExpireAfterHasPassed(t *testing.T) {
	ctx := context.Background()
	expiring := nodeClaim(t, "expires", "720h")
	never := nodeClaim(t, "never-expires", "Never")
	// The API server sets creation times to the second; the fake clock starts there.
	clk := clocktesting.NewFakeClock(expiring.CreationTimestamp.Time)
	recorder := record.NewFakeRecorder(10)
	c := NewController(kube, recorder, clk)
	expired := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues("expiry", "expired"))

	type outcome struct {
		Deleted      bool
		RequeueAfter time.Duration
	}
	reconcileAt := func(t *testing.T, nc *karpv1.NodeClaim) outcome {
		t.Helper()
		res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)})
		if err != nil {
			t.Fatal(err)
		}
		got := &karpv1.NodeClaim{}
		err = kube.Get(ctx, client.ObjectKeyFromObject(nc), got)
		return outcome{Deleted: client.IgnoreNotFound(err) == nil && err != nil, RequeueAfter: res.RequeueAfter}
	}

	clk.SetTime(expiring.CreationTimestamp.Add(719*time.Hour + 59*time.Minute))
	if diff := cmp.Diff(outcome{RequeueAfter: time.Minute}, reconcileAt(t, expiring)); diff != "" {
		t.Errorf("at 719h59m (-want +got):\n%s", diff)
	}
	clk.SetTime(expiring.CreationTimestamp.Add(720 * time.Hour))
	if diff := cmp.Diff(outcome{Deleted: true}, reconcileAt(t, expiring)); diff != "" {
		t.Errorf("at 720h (-want +got):\n%s", diff)
	}
	clk.SetTime(never.CreationTimestamp.Add(100 * 720 * time.Hour))
	if diff := cmp.Diff(outcome{}, reconcileAt(t, never)); diff != "" {
		t.Errorf("Never, 100 expiries later (-want +got):\n%s", diff)
	}

	close(recorder.Events)
	var events []string
	for e := range recorder.Events {
		events = append(events, e)
	}
	if diff := cmp.Diff([]string{"Normal Expired expired after 720h; replacing"}, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues("expiry", "expired")) - expired; got != 1 {
		t.Errorf("tailor_nodeclaims_disrupted_total{nodepool=expiry,reason=expired} grew by %v, want 1", got)
	}
}
