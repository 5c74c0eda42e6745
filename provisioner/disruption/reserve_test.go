package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

// reservations returns, per node that has an active reservation, its pod counts.
func (f *fixture) reservations(nodes ...string) map[string]map[types.UID]int {
	f.t.Helper()
	out := map[string]map[types.UID]int{}
	for _, name := range nodes {
		node := &corev1.Node{}
		if err := kube.Get(f.ctx, client.ObjectKey{Name: name}, node); err != nil {
			f.t.Fatal(err)
		}
		r, ok, err := reservation.Of(node)
		if err != nil {
			f.t.Fatal(err)
		}
		if ok && r.Active(f.clock.Now()) {
			out[name] = r.Pods
		}
	}
	return out
}

func TestTheNodesMovedPodsGoToAreReservedUntilTheyLand(t *testing.T) {
	f := newFixture(t, "reserve")
	api := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api", UID: "uid-rs-api", Controller: ptr.To(true)}
	f.node("a", "big.2xlarge", "500m", "250m", "250m")
	f.node("c", "big.2xlarge", "5", "1")
	for i, owner := range []metav1.OwnerReference{webReplicaSet, webReplicaSet, api} {
		f.pods[f.prefix+"-a"][i].OwnerReferences = []metav1.OwnerReference{owner}
	}
	f.pods[f.prefix+"-c"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "c": "kept"}, f.state("a", "c")); diff != "" {
		t.Fatalf("a's pods fit on c (-want +got):\n%s", diff)
	}
	// c runs one web pod and takes a's two, and a's api pod.
	want := map[string]map[types.UID]int{f.prefix + "-c": {webReplicaSet.UID: 3, api.UID: 1}}
	if diff := cmp.Diff(want, f.reservations(f.prefix+"-c")); diff != "" {
		t.Errorf("reservations while a drains (-want +got):\n%s", diff)
	}
	// The room kept for each pod to come is the most a pod of its controller requests.
	node := &corev1.Node{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-c"}, node); err != nil {
		t.Fatal(err)
	}
	r, _, err := reservation.Of(node)
	if err != nil {
		t.Fatal(err)
	}
	requests := func(cpu string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
	}
	wantRequests := map[types.UID]corev1.ResourceList{webReplicaSet.UID: requests("500m"), api.UID: requests("250m")}
	if diff := cmp.Diff(wantRequests, r.Requests, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("room kept per pod to come (-want +got):\n%s", diff)
	}
	// a is gone and no moved pod is pending: the reservation is lifted.
	delete(f.pods, f.prefix+"-a")
	f.pass()
	if diff := cmp.Diff(map[string]map[types.UID]int{}, f.reservations(f.prefix+"-c")); diff != "" {
		t.Errorf("reservations once the moves are over (-want +got):\n%s", diff)
	}
}
