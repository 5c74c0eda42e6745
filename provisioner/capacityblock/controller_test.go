package capacityblock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/interruption"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var kube client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, nil, &kube)
}

// prelaunches records the NodeClaims the controller asked replacements for.
type prelaunches struct {
	mu    sync.Mutex
	names []string
}

func (p *prelaunches) Prelaunch(_ context.Context, nodeClaim string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = append(p.names, nodeClaim)
	return nil
}

func newClaim(t *testing.T, ctx context.Context, name, reservation string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "blocks"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved"}}},
		},
	}
	if reservation != "" {
		nc.Labels[karpv1.CapacityReservationIDLabelKey] = reservation
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), nc) })
	return nc
}

func TestExpiringCapacityBlocksDrainTheirNodeClaims(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	end := metav1.NewTime(now.Add(35 * time.Minute))
	later := metav1.NewTime(now.Add(2 * time.Hour))
	soon := metav1.NewTime(now.Add(39 * time.Minute))
	class := newClass(t, ctx, "blocks")
	class.Status.CapacityReservations = []awsv1.CapacityReservation{
		{ID: "cr-0000000000000000e", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", OwnerID: "123456789012", InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", EndTime: &end, State: "expiring"},
		{ID: "cr-0000000000000000f", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", OwnerID: "123456789012", InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", EndTime: &later, State: "active"},
		// Resolved before it turned expiring: its end says it is.
		{ID: "cr-00000000000000010", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", OwnerID: "123456789012", InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", EndTime: &soon, State: "active"},
		{ID: "cr-00000000000000001", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", OwnerID: "123456789012", InstanceMatchCriteria: "targeted", ReservationType: "default", State: "active"},
	}
	if err := kube.Status().Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	expiring := newClaim(t, ctx, "in-expiring-block", "cr-0000000000000000e")
	newClaim(t, ctx, "in-active-block", "cr-0000000000000000f")
	ending := newClaim(t, ctx, "in-block-ending-soon", "cr-00000000000000010")
	newClaim(t, ctx, "in-default-reservation", "cr-00000000000000001")
	newClaim(t, ctx, "on-demand", "")
	// A finalizer keeps a deleted NodeClaim readable, as the termination finalizer does.
	for _, nc := range []*karpv1.NodeClaim{expiring, ending} {
		patch := client.MergeFrom(nc.DeepCopy())
		nc.Finalizers = []string{"test.tailor.sh/keep"}
		if err := kube.Patch(ctx, nc, patch); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			got := &karpv1.NodeClaim{}
			if kube.Get(context.Background(), types.NamespacedName{Name: nc.Name}, got) == nil {
				p := client.MergeFrom(got.DeepCopy())
				got.Finalizers = nil
				_ = kube.Patch(context.Background(), got, p)
			}
		})
	}

	replacer := &prelaunches{}
	recorder := record.NewFakeRecorder(10)
	c := NewController(kube, recorder, clocktesting.NewFakeClock(now), replacer)
	res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: class.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != recheck {
		t.Errorf("a class with capacity blocks is looked at again after %s, want %s", res.RequeueAfter, recheck)
	}

	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil {
		t.Fatal(err)
	}
	deleting := map[string]bool{}
	for _, nc := range claims.Items {
		deleting[nc.Name] = nc.DeletionTimestamp != nil
		if nc.Name != expiring.Name {
			continue
		}
		if got, want := nc.Annotations[interruption.DeadlineAnnotationKey], "2026-11-28T12:05:00Z"; got != want {
			t.Errorf("deadline annotation %q, want %q: 30 minutes before the block's end", got, want)
		}
		cond := meta.FindStatusCondition(nc.Status.Conditions, interruption.ConditionTypeInterrupted)
		if cond == nil || cond.Reason != ReasonCapacityBlockExpiring || cond.Status != metav1.ConditionTrue {
			t.Errorf("Interrupted condition %+v, want True with reason %s", cond, ReasonCapacityBlockExpiring)
		}
	}
	want := map[string]bool{"in-expiring-block": true, "in-active-block": false, "in-block-ending-soon": true, "in-default-reservation": false, "on-demand": false}
	if diff := cmp.Diff(want, deleting); diff != "" {
		t.Errorf("NodeClaims deleted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"in-expiring-block", "in-block-ending-soon"}, replacer.names); diff != "" {
		t.Errorf("replacements launched for (-want +got):\n%s", diff)
	}
}

// newClass creates an EC2NodeClass, deleted when the test ends.
func newClass(t *testing.T, ctx context.Context, name string) *awsv1.EC2NodeClass {
	t.Helper()
	class := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "NodeRole",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"discovery": "test"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"discovery": "test"}}},
		},
	}
	if err := kube.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), class) })
	return class
}

func TestAClassIsLookedAtAgainWhenItsNextBlockTurnsExpiring(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	end := metav1.NewTime(now.Add(40*time.Minute + 20*time.Second))
	class := newClass(t, ctx, "block-later")
	class.Status.CapacityReservations = []awsv1.CapacityReservation{
		{ID: "cr-00000000000000011", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", OwnerID: "123456789012", InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", EndTime: &end, State: "active"},
	}
	if err := kube.Status().Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	c := NewController(kube, record.NewFakeRecorder(10), clocktesting.NewFakeClock(now), nil)
	res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: class.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 20*time.Second {
		t.Errorf("requeued after %s, want 20s: when the block turns expiring", res.RequeueAfter)
	}
}
