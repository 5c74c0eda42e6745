package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestEligibleNodesAreCountedUnderOneReasonEach(t *testing.T) {
	pod := []*corev1.Pod{{}}
	candidates := []Candidate{
		{Drifted: true, MayRemoveEmpty: true},                   // drift comes first
		{MayRemoveEmpty: true, MayConsolidate: true},            // empty
		{MayRemoveEmpty: true},                                  // empty under WhenEmpty
		{MayRemoveEmpty: true, MayConsolidate: true, Pods: pod}, // underutilized
		{MayRemoveEmpty: true, Pods: pod},                       // WhenEmpty with pods: nothing
		{Pods: pod},                                             // consolidateAfter not elapsed: nothing
	}
	want := map[karpv1.DisruptionReason]int{
		karpv1.DisruptionReasonDrifted: 1, karpv1.DisruptionReasonEmpty: 2, karpv1.DisruptionReasonUnderutilized: 1,
	}
	if diff := cmp.Diff(want, eligible(candidates)); diff != "" {
		t.Errorf("eligible (-want +got):\n%s", diff)
	}
}

func TestConsolidationTypeOfADecision(t *testing.T) {
	one, two := []Candidate{{}}, []Candidate{{}, {}}
	for _, tt := range []struct {
		d    Decision
		want string
	}{
		{Decision{Reason: karpv1.DisruptionReasonEmpty, Originals: two}, ConsolidationTypeEmpty},
		{Decision{Reason: karpv1.DisruptionReasonUnderutilized, Originals: one}, ConsolidationTypeSingle},
		{Decision{Reason: karpv1.DisruptionReasonUnderutilized, Originals: two}, ConsolidationTypeMulti},
		{Decision{Reason: karpv1.DisruptionReasonDrifted, Originals: one}, ""},
	} {
		if got := consolidationType(tt.d); got != tt.want {
			t.Errorf("%s of %d nodes: %q, want %q", tt.d.Reason, len(tt.d.Originals), got, tt.want)
		}
	}
}
