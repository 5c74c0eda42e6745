package termination

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestDrainDeadline(t *testing.T) {
	deleted := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	claim := func(tgp time.Duration, reclaim string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: deleted}, Annotations: map[string]string{}}}
		if tgp > 0 {
			nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tgp}
		}
		if reclaim != "" {
			nc.Annotations[InterruptionDeadlineAnnotationKey] = reclaim
		}
		return nc
	}
	repaired := func(nc *karpv1.NodeClaim, at string) *karpv1.NodeClaim {
		nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = at
		return nc
	}
	tests := []struct {
		name string
		nc   *karpv1.NodeClaim
		want time.Time
	}{
		{name: "no grace period and no interruption: budgets are waited for", nc: claim(0, "")},
		{name: "the termination grace period", nc: claim(time.Hour, ""), want: deleted.Add(time.Hour)},
		{name: "an announced reclaim, less the margin", nc: claim(0, "2026-11-23T12:02:00Z"), want: deleted.Add(2*time.Minute - interruptionMargin)},
		{name: "the reclaim comes before the grace period ends", nc: claim(time.Hour, "2026-11-23T12:02:00Z"), want: deleted.Add(2*time.Minute - interruptionMargin)},
		{name: "the grace period ends before the reclaim", nc: claim(time.Minute, "2026-11-23T12:02:00Z"), want: deleted.Add(time.Minute)},
		{name: "an unreadable reclaim time is ignored", nc: claim(time.Hour, "soon"), want: deleted.Add(time.Hour)},
		{name: "a repair's termination timestamp comes first", nc: repaired(claim(time.Hour, "2026-11-23T12:02:00Z"), "2026-11-23T12:00:00Z"), want: deleted},
		{name: "a termination timestamp after the grace period", nc: repaired(claim(time.Minute, ""), "2026-11-23T13:00:00Z"), want: deleted.Add(time.Minute)},
		{name: "an unreadable termination timestamp is ignored", nc: repaired(claim(0, ""), "now")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, drainDeadline(tt.nc)); diff != "" {
				t.Errorf("deadline (-want +got):\n%s", diff)
			}
		})
	}
}
