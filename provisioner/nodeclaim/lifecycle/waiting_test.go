package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// waitingClaim is a NodeClaim of the NodePool whose conditions turned true at the given
// times (zero: not true).
func waitingClaim(name, pool string, launched, registered, initialized time.Time) karpv1.NodeClaim {
	nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}}}
	for _, c := range []struct {
		kind string
		at   time.Time
	}{{karpv1.ConditionTypeLaunched, launched}, {karpv1.ConditionTypeRegistered, registered}, {karpv1.ConditionTypeInitialized, initialized}} {
		// The API server wants a transition time on every condition.
		status, at := metav1.ConditionUnknown, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if !c.at.IsZero() {
			status, at = metav1.ConditionTrue, c.at
		}
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: c.kind, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(at)})
	}
	return nc
}

func TestLongestWaits(t *testing.T) {
	now := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	deleted := waitingClaim("deleted", "general", ago(time.Hour), time.Time{}, time.Time{})
	deleted.DeletionTimestamp = &metav1.Time{Time: now}
	tests := []struct {
		name   string
		claims []karpv1.NodeClaim
		want   map[waitKey]time.Duration
	}{
		{name: "none", want: map[waitKey]time.Duration{}},
		{
			name: "not launched, ready or being deleted: no wait",
			claims: []karpv1.NodeClaim{
				waitingClaim("new", "general", time.Time{}, time.Time{}, time.Time{}),
				waitingClaim("ready", "general", ago(time.Hour), ago(50*time.Minute), ago(49*time.Minute)),
				deleted,
			},
			want: map[waitKey]time.Duration{},
		},
		{
			name: "the longest wait per NodePool and condition",
			claims: []karpv1.NodeClaim{
				waitingClaim("a", "general", ago(10*time.Minute), time.Time{}, time.Time{}),
				waitingClaim("b", "general", ago(3*time.Minute), time.Time{}, time.Time{}),
				waitingClaim("c", "general", ago(20*time.Minute), ago(2*time.Minute), time.Time{}),
				waitingClaim("d", "gpu", ago(time.Minute), time.Time{}, time.Time{}),
			},
			want: map[waitKey]time.Duration{
				{"general", karpv1.ConditionTypeRegistered}:  10 * time.Minute,
				{"general", karpv1.ConditionTypeInitialized}: 2 * time.Minute,
				{"gpu", karpv1.ConditionTypeRegistered}:      time.Minute,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, longestWaits(tt.claims, now), cmp.AllowUnexported(waitKey{})); diff != "" {
				t.Errorf("longestWaits (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitingCollectorReadsNodeClaimsFromTheAPIServer scrapes the collector over NodeClaims
// stored in a real API server.
func TestWaitingCollectorReadsNodeClaimsFromTheAPIServer(t *testing.T) {
	ctx := context.Background()
	launched := time.Now().Add(-90 * time.Second).Truncate(time.Second)
	nc := waitingClaim("waiting-collector", "waiting-pool", launched, time.Time{}, time.Time{})
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}
	status := nc.Status
	if err := kube.Create(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(ctx, &nc) })
	nc.Status = status
	if err := kube.Status().Update(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(launched.Add(5 * time.Minute))
	// Other tests of the package leave NodeClaims of no NodePool: only this one's is read.
	ch := make(chan prometheus.Metric, 100)
	NewWaitingCollector(kube, clk).Collect(ch)
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["nodepool"] == "waiting-pool" {
			got[labels["condition"]] = pb.GetGauge().GetValue()
		}
	}
	if diff := cmp.Diff(map[string]float64{karpv1.ConditionTypeRegistered: 300}, got); diff != "" {
		t.Errorf("tailor_nodeclaims_waiting_seconds of the NodePool by condition (-want +got):\n%s", diff)
	}
}
