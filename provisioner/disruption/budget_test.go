package disruption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestAllowed(t *testing.T) {
	// Monday 2026-11-23 10:30 UTC.
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	pool := func(budgets ...karpv1.Budget) *karpv1.NodePool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
		np.Spec.Disruption.Budgets = budgets
		return np
	}
	window := func(nodes, schedule string, d time.Duration, reasons ...karpv1.DisruptionReason) karpv1.Budget {
		return karpv1.Budget{Nodes: nodes, Schedule: ptr.To(schedule), Duration: &metav1.Duration{Duration: d}, Reasons: reasons}
	}
	tests := []struct {
		name       string
		np         *karpv1.NodePool
		reason     karpv1.DisruptionReason
		total      int
		disrupting int
		want       int
		wantErr    string
	}{
		{name: "no budgets: 10% rounded up", np: pool(), reason: karpv1.DisruptionReasonUnderutilized, total: 15, want: 2},
		{name: "10% of a small pool is one node", np: pool(), reason: karpv1.DisruptionReasonEmpty, total: 3, want: 1},
		{name: "nodes being disrupted count against the budget", np: pool(karpv1.Budget{Nodes: "3"}), reason: karpv1.DisruptionReasonDrifted, total: 20, disrupting: 2, want: 1},
		{name: "never below zero", np: pool(karpv1.Budget{Nodes: "1"}), reason: karpv1.DisruptionReasonDrifted, total: 20, disrupting: 4, want: 0},
		{
			name:   "the most restrictive active budget wins",
			np:     pool(karpv1.Budget{Nodes: "50%"}, karpv1.Budget{Nodes: "4"}),
			reason: karpv1.DisruptionReasonUnderutilized, total: 20, want: 4,
		},
		{
			name:   "a budget for other reasons does not apply",
			np:     pool(karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, karpv1.Budget{Nodes: "5"}),
			reason: karpv1.DisruptionReasonEmpty, total: 20, want: 5,
		},
		{
			name:   "a business-hours freeze is active at 10:30 on a Monday",
			np:     pool(window("0", "0 9 * * mon-fri", 8*time.Hour), karpv1.Budget{Nodes: "10"}),
			reason: karpv1.DisruptionReasonUnderutilized, total: 20, want: 0,
		},
		{
			name:   "a nightly window is inactive in the morning",
			np:     pool(window("0", "0 22 * * *", 4*time.Hour), karpv1.Budget{Nodes: "10"}),
			reason: karpv1.DisruptionReasonUnderutilized, total: 20, want: 10,
		},
		{
			name:   "a window that began yesterday and still runs applies",
			np:     pool(window("1", "0 22 * * *", 13*time.Hour)),
			reason: karpv1.DisruptionReasonUnderutilized, total: 20, want: 1,
		},
		{
			name:   "no budget covers the reason now: nothing limits it",
			np:     pool(window("0", "0 22 * * *", time.Hour)),
			reason: karpv1.DisruptionReasonEmpty, total: 7, want: 7,
		},
		{
			name:   "a bad schedule names the budget",
			np:     pool(window("1", "every day", time.Hour)),
			reason: karpv1.DisruptionReasonEmpty, total: 7,
			wantErr: `NodePool general spec.disruption.budgets[0]: schedule "every day": expected exactly 5 fields, found 2: [every day]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Allowed(tt.np, tt.reason, tt.total, tt.disrupting, now)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("allowed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBudgetBlockedCountsCandidatesTheBudgetsHoldBack(t *testing.T) {
	frozen := map[string]bool{"frozen": true}
	budget := func(pool string, reason karpv1.DisruptionReason) int {
		if frozen[pool] || (pool == "no-drift" && reason == karpv1.DisruptionReasonDrifted) {
			return 0
		}
		return 1
	}
	pod := &corev1.Pod{}
	tests := []struct {
		name       string
		candidates []Candidate
		want       map[blockedKey]int
	}{
		{name: "no candidates", want: map[blockedKey]int{}},
		{
			name: "each reason held back by a budget of zero",
			candidates: []Candidate{
				{Node: "a", NodePool: "frozen", Drifted: true, Pods: []*corev1.Pod{pod}},
				{Node: "b", NodePool: "frozen", MayRemoveEmpty: true, MayConsolidate: true},
				{Node: "c", NodePool: "frozen", MayRemoveEmpty: true, MayConsolidate: true},
				{Node: "d", NodePool: "frozen", MayRemoveEmpty: true, MayConsolidate: true, Pods: []*corev1.Pod{pod}},
			},
			want: map[blockedKey]int{
				{"frozen", karpv1.DisruptionReasonDrifted}: 1, {"frozen", karpv1.DisruptionReasonEmpty}: 2, {"frozen", karpv1.DisruptionReasonUnderutilized}: 1,
			},
		},
		{
			name: "allowed reasons count zero, nodes not yet consolidatable not at all",
			candidates: []Candidate{
				{Node: "a", NodePool: "no-drift", Drifted: true},
				{Node: "b", NodePool: "no-drift", MayRemoveEmpty: true},
				{Node: "c", NodePool: "no-drift", Pods: []*corev1.Pod{pod}},
				{Node: "d", NodePool: "frozen", Pods: []*corev1.Pod{pod}},
			},
			want: map[blockedKey]int{{"no-drift", karpv1.DisruptionReasonDrifted}: 1, {"no-drift", karpv1.DisruptionReasonEmpty}: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, budgetBlocked(tt.candidates, budget), cmp.AllowUnexported(blockedKey{})); diff != "" {
				t.Errorf("budgetBlocked (-want +got):\n%s", diff)
			}
		})
	}
}
