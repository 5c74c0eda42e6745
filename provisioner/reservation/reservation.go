// Package reservation is how consolidation tells tailor-scheduler where the pods it moves
// belong. When consolidation takes nodes away, their controllers (ReplicaSets,
// StatefulSets, ...) create pods in place of the evicted ones. The consolidation plan put
// each evicted pod on a node it keeps or on a replacement it launched; the disruption
// controller writes, on each of those nodes, how many pods of each controller the node is
// to run once the pods have moved, and what one of those pods requests. The scheduler
// plugin scores such a node first for a pod of that controller while the node runs fewer,
// so the new pods land where the plan expects, and not on nodes the plan takes away next;
// and it keeps the room of the pods still to come from pods of other controllers, so no pod
// that lands elsewhere than planned takes the room of another.
//
// The reservation lives on the Node, in the API server, so every scheduler replica sees it
// and it outlives a restart; it lapses at its deadline even if nothing lifts it.
package reservation

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AnnotationKey on a Node holds its Reservation as JSON.
const AnnotationKey = "tailor.sh/reserved-for"

// Reservation is room a node keeps for the pods of some controllers, until a deadline.
type Reservation struct {
	// Until is when the reservation lapses.
	Until metav1.Time `json:"until"`
	// Pods is, per controller UID, how many of its pods the node is to run.
	Pods map[types.UID]int `json:"pods"`
	// Requests is, per controller UID, what one of its pods requests: the room the node
	// keeps for each of its pods still to come.
	Requests map[types.UID]corev1.ResourceList `json:"requests,omitempty"`
}

// Active reports whether the reservation holds at the time.
func (r Reservation) Active(now time.Time) bool { return now.Before(r.Until.Time) }

// Wants reports whether the node, running running pods of the controller, keeps room for
// more of them at the time.
func (r Reservation) Wants(controller types.UID, running int, now time.Time) bool {
	return r.Active(now) && running < r.Pods[controller]
}

// KeptFor returns the room the node keeps at the time for the pods still to come of every
// controller but except (a pod's own controller, or "" for none): what they request
// together, and how many they are. running counts the node's pods of a controller.
func (r Reservation) KeptFor(except types.UID, running func(types.UID) int, now time.Time) (corev1.ResourceList, int) {
	kept, pods := corev1.ResourceList{}, 0
	if !r.Active(now) {
		return kept, 0
	}
	for controller, want := range r.Pods {
		if controller == except {
			continue
		}
		missing := want - running(controller)
		if missing <= 0 {
			continue
		}
		pods += missing
		for name, q := range r.Requests[controller] {
			all := q.DeepCopy()
			all.Mul(int64(missing))
			sum := kept[name]
			sum.Add(all)
			kept[name] = sum
		}
	}
	return kept, pods
}

// Encode renders a reservation for the annotation.
func Encode(r Reservation) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding %s: %w", AnnotationKey, err)
	}
	return string(b), nil
}

// Decode parses the annotation's value.
func Decode(value string) (Reservation, error) {
	var r Reservation
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return Reservation{}, fmt.Errorf(`decoding %s (want {"until": RFC 3339 time, "pods": {controller UID: count}, "requests": {controller UID: {resource: quantity}}}): %w`, AnnotationKey, err)
	}
	return r, nil
}

// Of returns the node's reservation; false when it has none.
func Of(node *corev1.Node) (Reservation, bool, error) {
	value, ok := node.Annotations[AnnotationKey]
	if !ok {
		return Reservation{}, false, nil
	}
	r, err := Decode(value)
	if err != nil {
		return Reservation{}, false, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return r, true, nil
}

// ControllerAnnotationKey on a pod names the UID of the controller it is to belong to
// while another object owns it: a copy started ahead of an eviction (package surge) is
// its ReplicaSet's pod for the reservations, before the ReplicaSet adopts it.
const ControllerAnnotationKey = "tailor.sh/controller"

// ControllerOf returns the UID of the pod's controller (or of the one it is to belong to,
// ControllerAnnotationKey); false for a pod without one.
func ControllerOf(pod *corev1.Pod) (types.UID, bool) {
	if uid := pod.Annotations[ControllerAnnotationKey]; uid != "" {
		return types.UID(uid), true
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return "", false
	}
	return owner.UID, true
}
