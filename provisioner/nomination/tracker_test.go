package nomination

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

var (
	web0 = Pod{Namespace: "default", Name: "web-0", UID: "u0"}
	web1 = Pod{Namespace: "default", Name: "web-1", UID: "u1"}
)

func sortNominations(n []Nomination) []Nomination {
	sort.Slice(n, func(i, j int) bool { return n[i].Pod.UID < n[j].Pod.UID })
	return n
}

func TestNominationsFollowTheNodeClaimLifecycle(t *testing.T) {
	tr := NewTracker()
	snapshot, updates, cancel := tr.Subscribe()
	defer cancel()
	if len(snapshot) != 0 {
		t.Fatalf("snapshot of an empty tracker = %v", snapshot)
	}

	tr.Plan("general-a", "", []Pod{web0, web1})
	if !tr.Planned(web0.UID) {
		t.Error("Planned(web-0) = false after Plan")
	}
	got := <-updates
	want := []Nomination{{Pod: web0, NodeClaim: "general-a"}, {Pod: web1, NodeClaim: "general-a"}}
	if diff := cmp.Diff(want, sortNominations(got.Nominated)); diff != "" {
		t.Errorf("plans before the node name is known (-want +got):\n%s", diff)
	}

	tr.SetNode("general-a", "ip-10-0-0-1.ec2.internal")
	got = <-updates
	want = []Nomination{
		{Pod: web0, NodeClaim: "general-a", NodeName: "ip-10-0-0-1.ec2.internal"},
		{Pod: web1, NodeClaim: "general-a", NodeName: "ip-10-0-0-1.ec2.internal"},
	}
	if diff := cmp.Diff(want, sortNominations(got.Nominated)); diff != "" {
		t.Errorf("nominations (-want +got):\n%s", diff)
	}

	tr.Forget(web0.UID)
	tr.DropClaim("general-a")
	got = <-updates
	if diff := cmp.Diff([]Pod{web1}, got.Withdrawn); diff != "" {
		t.Errorf("withdrawn (-want +got):\n%s", diff)
	}
	if tr.Planned(web1.UID) {
		t.Error("Planned(web-1) = true after its NodeClaim was dropped")
	}
}

func TestSubscribeSnapshotsPlansLaunchedOrNot(t *testing.T) {
	tr := NewTracker()
	tr.Plan("a", "node-a", []Pod{web0})
	tr.Plan("b", "", []Pod{web1})
	snapshot, _, cancel := tr.Subscribe()
	defer cancel()
	want := []Nomination{{Pod: web0, NodeClaim: "a", NodeName: "node-a"}, {Pod: web1, NodeClaim: "b"}}
	if diff := cmp.Diff(want, sortNominations(snapshot)); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
}

func TestSlowSubscriberIsDropped(t *testing.T) {
	tr := NewTracker()
	_, updates, cancel := tr.Subscribe()
	defer cancel()
	for i := 0; i <= subscriberBuffer; i++ {
		tr.Plan("a", "node", []Pod{{Namespace: "ns", Name: fmt.Sprintf("p-%d", i), UID: types.UID(fmt.Sprintf("u-%d", i))}})
	}
	n := 0
	for range updates {
		n++
	}
	if n != subscriberBuffer {
		t.Errorf("received %d updates before the channel closed, want %d", n, subscriberBuffer)
	}
}

func TestSyncRecoversPlansOfPendingPodsFromNodeClaims(t *testing.T) {
	bound := Pod{Namespace: "default", Name: "web-2", UID: "u2"}
	value, err := EncodePods([]Pod{web0, web1, bound})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker()
	err = tr.Sync(&karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-a", Annotations: map[string]string{PlannedPodsAnnotationKey: value}},
		Status:     karpv1.NodeClaimStatus{NodeName: "node-a"},
	}, func(p Pod) bool { return p != bound })
	if err != nil {
		t.Fatal(err)
	}
	snapshot, _, cancel := tr.Subscribe()
	defer cancel()
	want := []Nomination{{Pod: web0, NodeClaim: "general-a", NodeName: "node-a"}, {Pod: web1, NodeClaim: "general-a", NodeName: "node-a"}}
	if diff := cmp.Diff(want, sortNominations(snapshot)); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
}

func TestSyncLeavesPodsWhereTheyWerePlannedSince(t *testing.T) {
	value, err := EncodePods([]Pod{web0, web1})
	if err != nil {
		t.Fatal(err)
	}
	first := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-a", Annotations: map[string]string{PlannedPodsAnnotationKey: value}},
		Status:     karpv1.NodeClaimStatus{NodeName: "node-a"},
	}
	pending := func(Pod) bool { return true }
	tests := []struct {
		name string
		// since happens after the pods were planned onto general-a.
		since func(tr *Tracker)
		want  []Nomination
	}{{
		name:  "nothing changed",
		since: func(*Tracker) {},
		want:  []Nomination{{Pod: web0, NodeClaim: "general-a", NodeName: "node-a"}, {Pod: web1, NodeClaim: "general-a", NodeName: "node-a"}},
	}, {
		name:  "web-0 planned onto another NodeClaim",
		since: func(tr *Tracker) { tr.Plan("general-b", "", []Pod{web0}) },
		want:  []Nomination{{Pod: web0, NodeClaim: "general-b"}, {Pod: web1, NodeClaim: "general-a", NodeName: "node-a"}},
	}, {
		name: "node-a rejected web-0, which waits for its new plan",
		since: func(tr *Tracker) {
			if claim, ok := tr.Replan(web0.UID); !ok || claim != "general-a" {
				t.Errorf("Replan(web-0) = %q, %t, want general-a, true", claim, ok)
			}
		},
		want: []Nomination{{Pod: web1, NodeClaim: "general-a", NodeName: "node-a"}},
	}, {
		name: "web-0 planned back onto general-a after it rejected it once",
		since: func(tr *Tracker) {
			tr.Replan(web0.UID)
			tr.Plan("general-a", "node-a", []Pod{web0})
		},
		want: []Nomination{{Pod: web0, NodeClaim: "general-a", NodeName: "node-a"}, {Pod: web1, NodeClaim: "general-a", NodeName: "node-a"}},
	}, {
		name: "general-a dropped, its stale marks with it",
		since: func(tr *Tracker) {
			tr.Replan(web0.UID)
			tr.DropClaim("general-a")
		},
		want: []Nomination{{Pod: web0, NodeClaim: "general-a", NodeName: "node-a"}, {Pod: web1, NodeClaim: "general-a", NodeName: "node-a"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker()
			if err := tr.Sync(first, pending); err != nil {
				t.Fatal(err)
			}
			tt.since(tr)
			if err := tr.Sync(first, pending); err != nil {
				t.Fatal(err)
			}
			snapshot, _, cancel := tr.Subscribe()
			defer cancel()
			if diff := cmp.Diff(tt.want, sortNominations(snapshot)); diff != "" {
				t.Errorf("plans after syncing general-a again (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSyncKeepsAPlanMadeWhileItReadsThePods: a batch that plans a pod elsewhere while Sync
// asks the API server whether the pod still waits wins; Sync does not undo it.
func TestSyncKeepsAPlanMadeWhileItReadsThePods(t *testing.T) {
	value, err := EncodePods([]Pod{web0})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker()
	err = tr.Sync(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-a", Annotations: map[string]string{PlannedPodsAnnotationKey: value}}}, func(p Pod) bool {
		tr.Plan("general-b", "", []Pod{p})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if plan, _ := tr.Get(web0.UID); plan.NodeClaim != "general-b" {
		t.Errorf("web-0 is planned onto %q, want general-b, where the batch planned it during the sync", plan.NodeClaim)
	}
}

func TestDecodePodsRejectsMalformedEntries(t *testing.T) {
	for _, value := range []string{"not json", `["default/web-0"]`} {
		if _, err := DecodePods(value); err == nil {
			t.Errorf("DecodePods(%q) error = nil, want an error", value)
		}
	}
}
