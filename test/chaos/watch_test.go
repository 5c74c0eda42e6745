package chaos

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// TestAMissedDeletionIsJudgedByThePodsLastState: a deletion the watch missed (a tombstone)
// counts like any other, by the pod's last known state.
func TestAMissedDeletionIsJudgedByThePodsLastState(t *testing.T) {
	pod := func(name string, evicted bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{DeploymentLabel: "web"}}, Spec: corev1.PodSpec{NodeName: "n1"}}
		if evicted {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: evictedReason}}
		}
		return p
	}
	w := &podWatch{}
	w.podDeleted(pod("seen-evicted", true))
	w.podDeleted(toolscache.DeletedFinalStateUnknown{Key: "default/missed-evicted", Obj: pod("missed-evicted", true)})
	w.podDeleted(toolscache.DeletedFinalStateUnknown{Key: "default/missed-deleted", Obj: pod("missed-deleted", false)})
	w.podDeleted(toolscache.DeletedFinalStateUnknown{Key: "default/gone", Obj: nil})
	type seen struct {
		Pod       string
		Tombstone bool
	}
	summary := func(es []eviction) []seen {
		var out []seen
		for _, e := range es {
			out = append(out, seen{e.pod, e.tombstone})
		}
		return out
	}
	if diff := cmp.Diff([]seen{{"seen-evicted", false}, {"missed-evicted", true}}, summary(w.evicted)); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]seen{{"missed-deleted", true}}, summary(w.deleted)); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

// TestAPodReplacedBeforeItsEvictionIsJudgedByWhatServedWhenItWent: the watch follows the
// pods' states in order, so that a pod its ReplicaSet deleted once its copy was handed over
// is known as replaced, and by the copy that was Ready then.
func TestAPodReplacedBeforeItsEvictionIsJudgedByWhatServedWhenItWent(t *testing.T) {
	pod := func(name, uid string, change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Labels: map[string]string{DeploymentLabel: "solo"}}, Spec: corev1.PodSpec{NodeName: "n1"}}
		if change != nil {
			change(p)
		}
		return p
	}
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	copyOf := func(uid string, isReady bool) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels[surge.ReplacesLabelKey], p.Spec.NodeName = uid, "n2"
			if isReady {
				ready(p)
			}
		}
	}
	handedOver := func(p *corev1.Pod) {
		ready(p)
		p.Annotations = map[string]string{deletioncost.PodDeletionCostAnnotationKey: handedOverCost}
	}
	type judged struct {
		Pod                       string
		Copy, Replaced, Tombstone bool
		ServedBy                  string
	}
	summary := func(es []eviction) []judged {
		var out []judged
		for _, e := range es {
			out = append(out, judged{e.pod, e.copy, e.replaced, e.tombstone, e.servedBy})
		}
		return out
	}
	tests := []struct {
		name    string
		events  func(w *podWatch)
		deleted []judged
		copies  []string
	}{{
		name: "replaced once its copy was Ready and handed over",
		events: func(w *podWatch) {
			w.podSeen(pod("solo-1", "u1", ready))
			w.podSeen(pod("solo-c1", "u2", copyOf("u1", false)))
			w.podSeen(pod("solo-c1", "u2", copyOf("u1", true)))
			w.podSeen(pod("solo-c1", "u2", ready))
			w.podDeleted(pod("solo-1", "u1", handedOver))
		},
		deleted: []judged{{Pod: "solo-1", Replaced: true, ServedBy: "solo-c1"}},
		copies:  []string{"solo-c1"},
	}, {
		name: "a pod deleted while its copy was not handed over was not replaced",
		events: func(w *podWatch) {
			w.podSeen(pod("solo-1", "u1", ready))
			w.podSeen(pod("solo-c1", "u2", copyOf("u1", true)))
			w.podDeleted(pod("solo-1", "u1", nil))
		},
		deleted: []judged{{Pod: "solo-1"}},
		copies:  []string{"solo-c1"},
	}, {
		name: "a copy deleted before it was handed over",
		events: func(w *podWatch) {
			w.podSeen(pod("solo-1", "u1", ready))
			w.podSeen(pod("solo-c1", "u2", copyOf("u1", false)))
			w.podDeleted(toolscache.DeletedFinalStateUnknown{Key: "default/solo-c1", Obj: pod("solo-c1", "u2", copyOf("u1", false))})
		},
		deleted: []judged{{Pod: "solo-c1", Copy: true, Tombstone: true}},
		copies:  []string{"solo-c1"},
	}, {
		// The watch was down while the copy was made and handed over: the deletion cost
		// surge.Release gives still tells.
		name: "a copy the watch missed",
		events: func(w *podWatch) {
			w.podSeen(pod("solo-1", "u1", ready))
			w.podSeen(pod("solo-c1", "u2", ready))
			w.podDeleted(toolscache.DeletedFinalStateUnknown{Key: "default/solo-1", Obj: pod("solo-1", "u1", handedOver)})
		},
		deleted: []judged{{Pod: "solo-1", Replaced: true, Tombstone: true, ServedBy: "solo-c1"}},
	}, {
		// The watch was down while the old pod got its deletion cost: the copy it saw
		// handed over still tells.
		name: "a deletion cost the watch missed",
		events: func(w *podWatch) {
			w.podSeen(pod("solo-1", "u1", ready))
			w.podSeen(pod("solo-c1", "u2", copyOf("u1", true)))
			w.podSeen(pod("solo-c1", "u2", ready))
			w.podDeleted(toolscache.DeletedFinalStateUnknown{Key: "default/solo-1", Obj: pod("solo-1", "u1", ready)})
		},
		deleted: []judged{{Pod: "solo-1", Replaced: true, Tombstone: true, ServedBy: "solo-c1"}},
		copies:  []string{"solo-c1"},
	}, {
		name: "a deletion that was no replacement",
		events: func(w *podWatch) {
			w.podSeen(pod("solo-1", "u1", ready))
			w.podSeen(pod("solo-2", "u2", ready))
			w.podDeleted(pod("solo-1", "u1", ready))
		},
		deleted: []judged{{Pod: "solo-1"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &podWatch{}
			tt.events(w)
			if diff := cmp.Diff(tt.deleted, summary(w.deleted)); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			var copies []string
			for _, e := range w.copies {
				copies = append(copies, e.pod)
			}
			if diff := cmp.Diff(tt.copies, copies); diff != "" {
				t.Errorf("copies (-want +got):\n%s", diff)
			}
		})
	}
}
