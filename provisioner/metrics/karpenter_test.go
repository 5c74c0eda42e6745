package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestSnakeCaseSpellsLabelValuesAsKarpenter(t *testing.T) {
	for in, want := range map[string]string{
		"Underutilized":            "underutilized",
		"WhenEmptyOrUnderutilized": "when_empty_or_underutilized",
		"Drifted":                  "drifted",
		"spot_interrupted":         "spot_interrupted",
		"":                         "",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTerminationModeFollowsTheGracePeriod(t *testing.T) {
	for _, tt := range []struct {
		grace *metav1.Duration
		want  string
	}{
		{nil, TerminationModeGraceful},
		{&metav1.Duration{}, TerminationModeForceful},
		{&metav1.Duration{Duration: time.Hour}, TerminationModeEventual},
	} {
		nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{TerminationGracePeriod: tt.grace}}
		if got := TerminationMode(nc); got != tt.want {
			t.Errorf("grace period %v: mode %q, want %q", tt.grace, got, tt.want)
		}
	}
}

func TestNodeClaimCreatedCountsUnderBothNames(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{karpv1.NodePoolLabelKey: "created-test"},
		Annotations: map[string]string{karpv1.NodeClaimMinValuesRelaxedAnnotationKey: "true"},
	}}
	NodeClaimCreated(nc, string(karpv1.DisruptionReasonUnderutilized))
	NodeClaimCreated(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: nc.Labels}}, ReasonProvisioned)
	got := []float64{
		testutil.ToFloat64(NodeClaimsCreated.WithLabelValues("created-test")),
		testutil.ToFloat64(KarpenterNodeClaimsCreated.WithLabelValues("underutilized", "created-test", "true")),
		testutil.ToFloat64(KarpenterNodeClaimsCreated.WithLabelValues("provisioned", "created-test", "false")),
	}
	if diff := cmp.Diff([]float64{2, 1, 1}, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

func TestPodStateLabelsDescribeThePodAndItsNode(t *testing.T) {
	nodes := map[string]*corev1.Node{"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		karpv1.NodePoolLabelKey: "default", corev1.LabelTopologyZone: "us-east-1a", corev1.LabelArchStable: "arm64",
		karpv1.CapacityTypeLabelKey: "spot", corev1.LabelInstanceTypeStable: "m7g.large",
	}}}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{
			name: "running on a NodePool's node",
			pod: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7f"}}},
				Spec:       corev1.PodSpec{NodeName: "n1"},
				Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
			},
			want: []string{"web-1", "shop", "/apis/apps/v1/namespaces/shop/replicasets/web-7f", "n1", "true", "default", "us-east-1a", "arm64", "spot", "m7g.large", "Running", "true", "true"},
		},
		{
			name: "pending",
			pod:  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "batch"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			want: []string{"job", "batch", "", "", "false", "", "", "", "", "", "Pending", "false", "false"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, podStateLabels(tt.pod, nodes)); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnsyncedTimeCountsFromTheFirstUnsyncedScrape(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	c := NewClusterCollector(nil, nil, clk)
	var got []time.Duration
	got = append(got, c.unsynced(false))
	clk.SetTime(clk.Now().Add(30 * time.Second))
	got = append(got, c.unsynced(false), c.unsynced(true))
	clk.SetTime(clk.Now().Add(time.Minute))
	got = append(got, c.unsynced(false))
	if diff := cmp.Diff([]time.Duration{0, 30 * time.Second, 0, 0}, got); diff != "" {
		t.Errorf("unsynced times (-want +got):\n%s", diff)
	}
}

func TestPodTimingsObserveOnTheLeaderOnce(t *testing.T) {
	created := time.Unix(1000, 0)
	clk := clocktesting.NewFakePassiveClock(created.Add(40 * time.Second))
	leading := false
	h := NewPodTimings(clk, func() bool { return leading }).Handler()
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "n1"
	running := bound.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	boundBefore, startupBefore := histogramCount(t)
	h.OnUpdate(pending, bound)
	leading = true
	h.OnUpdate(pending, bound)
	h.OnUpdate(bound, running)
	h.OnUpdate(running, running)
	boundAfter, startupAfter := histogramCount(t)
	if boundAfter-boundBefore != 1 || startupAfter-startupBefore != 40 {
		t.Errorf("bound observations %d (want 1), startup seconds observed %.0f (want 40, once)", boundAfter-boundBefore, startupAfter-startupBefore)
	}
}

// histogramCount reads the bound histogram's sample count and the startup summary's sum.
func histogramCount(t *testing.T) (bound uint64, startupSum float64) {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "karpenter_pods_bound_duration_seconds":
				bound += m.GetHistogram().GetSampleCount()
			case "karpenter_pods_startup_duration_seconds":
				startupSum += m.GetSummary().GetSampleSum()
			}
		}
	}
	return bound, startupSum
}
