package nomination

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

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
	tr := NewTracker(clock.RealClock{})
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
	tr := NewTracker(clock.RealClock{})
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
	tr := NewTracker(clock.RealClock{})
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
	tr := NewTracker(clock.RealClock{})
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
			tr := NewTracker(clock.RealClock{})
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
	tr := NewTracker(clock.RealClock{})
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

// TestAPodBoundOrDeletedIsNotPlannedAgain: a plan made from a read older than the pod's
// binding or deletion (Sync asking whether the pod still waits as it binds, a batch that
// planned it before it bound elsewhere) is not taken. Such a plan was kept for good: its
// NodeClaim's node looked awaited by a pod already running, and consolidation never took it.
func TestAPodBoundOrDeletedIsNotPlannedAgain(t *testing.T) {
	value, err := EncodePods([]Pod{web0, web1})
	if err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-a", Annotations: map[string]string{PlannedPodsAnnotationKey: value}},
		Status:     karpv1.NodeClaimStatus{NodeName: "node-a"},
	}
	tests := []struct {
		name string
		plan func(t *testing.T, tr *Tracker)
	}{{
		name: "bound while Sync reads whether it waits",
		plan: func(t *testing.T, tr *Tracker) {
			err := tr.Sync(nc, func(p Pod) bool {
				if p == web0 {
					tr.Forget(web0.UID)
				}
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "bound after a batch read it pending",
		plan: func(t *testing.T, tr *Tracker) {
			tr.Forget(web0.UID)
			tr.Plan("general-a", "", []Pod{web0, web1})
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(clock.RealClock{})
			tt.plan(t, tr)
			if diff := cmp.Diff([]Pod{web1}, tr.PodsOf("general-a")); diff != "" {
				t.Errorf("pods planned onto general-a (-want +got):\n%s", diff)
			}
		})
	}
}

// TestForgottenPodsAreKeptForALimitedTime: the pods forgotten are kept goneFor, then let go
// as later pods are forgotten, so the tracker does not grow with every pod ever bound.
func TestForgottenPodsAreKeptForALimitedTime(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	tr := NewTracker(clk)
	tr.Forget(web0.UID)
	clk.SetTime(clk.Now().Add(goneFor / 2))
	tr.Forget(web1.UID)
	clk.SetTime(clk.Now().Add(goneFor / 2))
	tr.Forget("u2")
	want := map[types.UID]bool{web1.UID: true, "u2": true}
	if diff := cmp.Diff(want, tr.gone); diff != "" {
		t.Errorf("pods kept as gone, %s after web-0 was forgotten (-want +got):\n%s", goneFor, diff)
	}
	tr.Plan("general-a", "", []Pod{web0})
	if !tr.Planned(web0.UID) {
		t.Errorf("web-0 forgotten %s ago: a plan for it is refused, want taken", goneFor)
	}
}

func TestDecodePodsRejectsMalformedEntries(t *testing.T) {
	for _, value := range []string{"not json", `["default/web-0"]`} {
		if _, err := DecodePods(value); err == nil {
			t.Errorf("DecodePods(%q) error = nil, want an error", value)
		}
	}
}
