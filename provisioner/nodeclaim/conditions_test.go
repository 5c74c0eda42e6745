package nodeclaim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// TestReadySumsUpLaunchedRegisteredAndInitialized sets conditions one after the other, as the
// lifecycle controller does, and reads Ready after each as Karpenter v1 computes it.
func TestReadySumsUpLaunchedRegisteredAndInitialized(t *testing.T) {
	type set struct {
		condition, status, reason string
	}
	type ready struct{ Status, Reason, Message string }
	tests := []struct {
		name string
		sets []set
		want ready
	}{
		{
			name: "launched: the others await reconciliation",
			sets: []set{{karpv1.ConditionTypeLaunched, "True", "Launched"}},
			want: ready{"Unknown", "ReconcilingDependents", "Registered=Unknown, Initialized=Unknown"},
		},
		{
			name: "a launch failing",
			sets: []set{{karpv1.ConditionTypeLaunched, "Unknown", "LaunchFailed"}},
			want: ready{"Unknown", "ReconcilingDependents", "Launched=Unknown, Registered=Unknown, Initialized=Unknown"},
		},
		{
			name: "two nodes of one instance",
			sets: []set{{karpv1.ConditionTypeLaunched, "True", "Launched"}, {karpv1.ConditionTypeRegistered, "False", "MultipleNodesFound"}},
			want: ready{"False", "UnhealthyDependents", "Registered=False, Initialized=Unknown"},
		},
		{
			name: "all three True",
			sets: []set{
				{karpv1.ConditionTypeLaunched, "True", "Launched"},
				{karpv1.ConditionTypeRegistered, "True", "Registered"},
				{karpv1.ConditionTypeInitialized, "True", "Initialized"},
			},
			want: ready{"True", "Ready", ""},
		},
		{
			name: "Drifted leaves Ready alone",
			sets: []set{
				{karpv1.ConditionTypeLaunched, "True", "Launched"},
				{karpv1.ConditionTypeRegistered, "True", "Registered"},
				{karpv1.ConditionTypeInitialized, "True", "Initialized"},
				{karpv1.ConditionTypeDrifted, "True", "AMIDrifted"},
			},
			want: ready{"True", "Ready", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{}
			for _, s := range tt.sets {
				SetCondition(nc, s.condition, metav1.ConditionStatus(s.status), s.reason, "")
			}
			var got ready
			for _, c := range nc.Status.Conditions {
				if c.Type == karpv1.ConditionTypeReady {
					got = ready{string(c.Status), c.Reason, c.Message}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadyListsTheLatestChangedFirst: the message names first the condition that changed
// last, as Karpenter's does.
func TestReadyListsTheLatestChangedFirst(t *testing.T) {
	nc := &karpv1.NodeClaim{}
	SetCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
	for i := range nc.Status.Conditions {
		nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(nc.Status.Conditions[i].LastTransitionTime.Add(-time.Minute))
	}
	SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "NodeNotReady", "Node status is NotReady")
	SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionFalse, "Broken", "")
	ready := nc.Status.Conditions[len(nc.Status.Conditions)-1]
	if diff := cmp.Diff("Initialized=False, Registered=Unknown", ready.Message); diff != "" {
		t.Errorf("Ready's message (-want +got):\n%s", diff)
	}
}
