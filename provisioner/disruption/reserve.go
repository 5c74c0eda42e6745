package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

// reservationLifetime bounds how long a node stays reserved for the pods a decision moves.
// Draining with PodDisruptionBudgets takes minutes; the controller lifts the reservations
// as soon as the moved pods have landed, and a lapsed one only stops steering pods.
const reservationLifetime = 15 * time.Minute

// reserve writes, on every node the decision moves pods onto, how many pods of each of
// their controllers the node is to run once they have moved and what each requests:
// tailor-scheduler puts the pods that replace the evicted ones there and keeps their room
// from other pods. replacementNodes are the node names of the decision's replacements, in
// order.
func (c *Controller) reserve(ctx context.Context, d Decision, replacementNodes []string) error {
	want := map[string]map[types.UID]int{}
	requests := map[types.UID]corev1.ResourceList{}
	add := func(node string, pods []*corev1.Pod) {
		for _, p := range pods {
			if uid, ok := reservation.ControllerOf(p); ok {
				if want[node] == nil {
					want[node] = map[types.UID]int{}
				}
				want[node][uid]++
				// A controller's pods share a template, unless resized: keep the most.
				if requests[uid] == nil {
					requests[uid] = corev1.ResourceList{}
				}
				for name, q := range packing.PodRequests(p) {
					if have, ok := requests[uid][name]; !ok || q.Cmp(have) > 0 {
						requests[uid][name] = q
					}
				}
			}
		}
	}
	kept := map[string]*packing.Node{}
	logger := log.FromContext(ctx)
	for _, p := range d.Placements {
		add(p.Node.Node.Name, p.Pods)
		kept[p.Node.Node.Name] = p.Node
		if logger := logger.V(2); logger.Enabled() {
			free := plannedFree(p)
			logger.Info("reserving room on a node the pods move onto", "node", p.Node.Node.Name,
				"running", len(p.Node.Pods), "moving", len(p.Pods), "freeMilliCPU", free.Cpu().MilliValue(), "freeMemory", free.Memory().Value())
		}
	}
	for name, n := range kept {
		for uid := range want[name] {
			want[name][uid] += running(n, uid)
		}
	}
	for i, r := range d.Replacements {
		if i < len(replacementNodes) && replacementNodes[i] != "" {
			add(replacementNodes[i], r.Pods)
		}
	}
	until := metav1.NewTime(c.clock.Now().Add(reservationLifetime))
	for node, pods := range want {
		r := &reservation.Reservation{Until: until, Pods: pods, Requests: map[types.UID]corev1.ResourceList{}}
		for uid := range pods {
			r.Requests[uid] = requests[uid]
		}
		if err := c.setReservation(ctx, node, r); err != nil {
			return err
		}
	}
	if len(want) > 0 {
		logger.V(1).Info("reserved nodes for the pods moving onto them", "nodes", len(want), "until", until.Time)
	}
	return nil
}

// plannedFree is what the plan leaves free on a node once the pods placed there have moved.
func plannedFree(p packing.Placement) corev1.ResourceList {
	free := p.Node.Node.Status.Allocatable.DeepCopy()
	for _, used := range []corev1.ResourceList{requestsOf(packing.BoundRequests, p.Node.Pods), requestsOf(packing.PodRequests, p.Pods)} {
		for name, q := range used {
			left := free[name]
			left.Sub(q)
			free[name] = left
		}
	}
	return free
}

// running counts the pods of the controller on a node that stay there.
func running(n *packing.Node, controller types.UID) int {
	count := 0
	for _, p := range n.Pods {
		if uid, ok := reservation.ControllerOf(p); ok && uid == controller && movable(p) {
			count++
		}
	}
	return count
}

// release lifts the reservations of every node: the pods they were for have landed.
func (c *Controller) release(ctx context.Context, nodes []packing.Node) error {
	for _, n := range nodes {
		if _, ok := n.Node.Annotations[reservation.AnnotationKey]; ok {
			if err := c.setReservation(ctx, n.Node.Name, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// setReservation writes the node's reservation, or removes it when r is nil.
func (c *Controller) setReservation(ctx context.Context, name string, r *reservation.Reservation) error {
	return c.withNode(ctx, name, func(ctx context.Context, kube client.Client, node *corev1.Node) error {
		patch := client.MergeFrom(node.DeepCopy())
		if r == nil {
			delete(node.Annotations, reservation.AnnotationKey)
		} else {
			value, err := reservation.Encode(*r)
			if err != nil {
				return err
			}
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[reservation.AnnotationKey] = value
		}
		if err := kube.Patch(ctx, node, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("writing the reservation of node %s: %w", name, err)
		}
		return nil
	})
}
