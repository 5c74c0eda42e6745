package disruption

import (
	"testing"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// TestDecideDrift: a drifted node is replaced before anything else, as its budget for drift
// allows.
func TestDecideDrift(t *testing.T) {
	testDecide(t, []decideCase{
		{
			name:   "a drifted node is replaced, whatever it saves",
			nodes:  []node{{name: "old", instanceType: "small.xlarge", capacityType: "spot", drifted: true, pods: []string{"3"}}},
			budget: tenAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonDrifted, Originals: []string{"old"}, Replacements: []string{"spot small.xlarge"}},
		},
		{
			name:   "a drifted node goes first; its pods move to room elsewhere",
			nodes:  []node{{name: "old", instanceType: "small.xlarge", capacityType: "on-demand", drifted: true, pods: []string{"3"}}, {name: "idle", instanceType: "small.xlarge", capacityType: "on-demand"}},
			budget: tenAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonDrifted, Originals: []string{"old"}, Targets: []string{"idle"}},
		},
		{
			name:  "a drifted node waits while its budget for drift is spent; the empty node goes",
			nodes: []node{{name: "old", instanceType: "small.xlarge", capacityType: "on-demand", drifted: true, pods: []string{"3"}}, {name: "idle", instanceType: "small.xlarge", capacityType: "on-demand"}},
			budget: func(_ string, r karpv1.DisruptionReason) int {
				if r == karpv1.DisruptionReasonDrifted {
					return 0
				}
				return 10
			},
			want: &summary{Reason: karpv1.DisruptionReasonEmpty, Originals: []string{"idle"}},
		},
		{
			name: "a drifted node's pods do not move onto another drifted node, replaced in turn",
			nodes: []node{
				{name: "a", instanceType: "small.xlarge", capacityType: "on-demand", drifted: true, pods: []string{"3"}},
				{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", drifted: true, pods: []string{"1"}},
			},
			budget: tenAtATime,
			want:   &summary{Reason: karpv1.DisruptionReasonDrifted, Originals: []string{"a"}, Replacements: []string{"spot small.xlarge"}},
		},
	})
}
