package nodeprovisioning

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	provisionerv1 "github.com/tailor-autoscaler/tailor/proto/tailor/provisioner/v1"
)

func nominationOf(uid, nodeClaim, node string) *provisionerv1.Nomination {
	return &provisionerv1.Nomination{Pod: &provisionerv1.PodReference{Uid: uid}, NodeClaim: nodeClaim, NodeName: node}
}

// TestSidecarHoldsNodesForTheirNominatedPods follows the count of pods held per node through
// plans, launches, withdrawals, bindings and a snapshot.
func TestSidecarHoldsNodesForTheirNominatedPods(t *testing.T) {
	s := newSidecar(nil, sidecarOptions{})
	held := func() map[string]int {
		return map[string]int{"node-a": s.Held("node-a"), "node-b": s.Held("node-b")}
	}
	steps := []struct {
		name  string
		apply func()
		want  map[string]int
	}{
		{
			name: "pods planned onto NodeClaims not launched yet hold no node",
			apply: func() {
				s.apply(&provisionerv1.WatchNominationsResponse{Nominations: []*provisionerv1.Nomination{
					nominationOf("u0", "claim-a", ""), nominationOf("u1", "claim-a", ""), nominationOf("u2", "claim-b", ""),
				}})
			},
			want: map[string]int{"node-a": 0, "node-b": 0},
		},
		{
			name: "launching a NodeClaim holds its node for its pods",
			apply: func() {
				s.apply(&provisionerv1.WatchNominationsResponse{Nominations: []*provisionerv1.Nomination{
					nominationOf("u0", "claim-a", "node-a"), nominationOf("u1", "claim-a", "node-a"),
				}})
			},
			want: map[string]int{"node-a": 2, "node-b": 0},
		},
		{
			name: "a pod moved to another node is held there only",
			apply: func() {
				s.apply(&provisionerv1.WatchNominationsResponse{Nominations: []*provisionerv1.Nomination{nominationOf("u1", "claim-b", "node-b")}})
			},
			want: map[string]int{"node-a": 1, "node-b": 1},
		},
		{
			name:  "a bound pod no longer holds its node",
			apply: func() { s.Forget("u0") },
			want:  map[string]int{"node-a": 0, "node-b": 1},
		},
		{
			name: "a withdrawn plan no longer holds its node",
			apply: func() {
				s.apply(&provisionerv1.WatchNominationsResponse{Withdrawn: []*provisionerv1.PodReference{{Uid: "u1"}}})
			},
			want: map[string]int{"node-a": 0, "node-b": 0},
		},
		{
			name: "a snapshot replaces every hold",
			apply: func() {
				s.apply(&provisionerv1.WatchNominationsResponse{Nominations: []*provisionerv1.Nomination{nominationOf("u2", "claim-b", "node-b")}})
				s.apply(&provisionerv1.WatchNominationsResponse{Snapshot: true, Nominations: []*provisionerv1.Nomination{nominationOf("u3", "claim-a", "node-a")}})
			},
			want: map[string]int{"node-a": 1, "node-b": 0},
		},
	}
	for _, step := range steps {
		step.apply()
		if diff := cmp.Diff(step.want, held()); diff != "" {
			t.Errorf("%s: held pods per node (-want +got):\n%s", step.name, diff)
		}
	}
	if _, ok := s.Nomination(types.UID("u2")); ok {
		t.Error("the snapshot kept u2's nomination, want it withdrawn")
	}
}

// TestSidecarIgnoresNominationsOfPodsNoLongerWaiting: a nomination that arrives after its pod
// was bound or deleted (the provisioner read the pod from a cache that lagged) holds no node:
// nothing would ever lift that hold.
func TestSidecarIgnoresNominationsOfPodsNoLongerWaiting(t *testing.T) {
	waiting := map[types.UID]bool{"u0": true, "u1": true}
	s := newSidecar(nil, sidecarOptions{waiting: func(uid types.UID) bool { return waiting[uid] }})
	s.apply(&provisionerv1.WatchNominationsResponse{Nominations: []*provisionerv1.Nomination{
		nominationOf("u0", "claim-a", "node-a"), nominationOf("u1", "claim-a", "node-a"), nominationOf("bound", "claim-a", "node-a"),
	}})
	if got := s.Held("node-a"); got != 2 {
		t.Errorf("held on node-a = %d, want 2: the bound pod holds nothing", got)
	}
	waiting["u1"] = false
	s.apply(&provisionerv1.WatchNominationsResponse{Nominations: []*provisionerv1.Nomination{nominationOf("u1", "claim-b", "node-b")}})
	if diff := cmp.Diff(map[string]int{"node-a": 1, "node-b": 0}, map[string]int{"node-a": s.Held("node-a"), "node-b": s.Held("node-b")}); diff != "" {
		t.Errorf("held pods per node once u1 was bound (-want +got):\n%s", diff)
	}
	for _, uid := range []types.UID{"u1", "bound"} {
		if n, ok := s.Nomination(uid); ok {
			t.Errorf("Nomination(%s) = %+v, want none", uid, n)
		}
	}
}
