package chaos

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
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
