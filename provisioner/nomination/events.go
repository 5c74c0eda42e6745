package nomination

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// ReasonNominated on a pod: the NodeClaim it was planned onto was launched and the pod is
// nominated to the node it will register as.
const ReasonNominated = "Nominated"

// PodReference is the object of a pod's events, made without reading the pod.
func PodReference(p Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// RecordNominated records on a pod that it is nominated to the node of its NodeClaim.
func RecordNominated(recorder record.EventRecorder, p Pod, nodeName, nodeClaim string) {
	recorder.Eventf(PodReference(p), corev1.EventTypeNormal, ReasonNominated, "nominated to node %s of NodeClaim %s", nodeName, nodeClaim)
}

// awaitingNode returns the pods planned onto the NodeClaim whose node name is not known yet.
func (c *Controller) awaitingNode(nodeClaim string) map[types.UID]Pod {
	out := map[types.UID]Pod{}
	for _, p := range c.tracker.PodsOf(nodeClaim) {
		if n, ok := c.tracker.Get(p.UID); ok && n.NodeName == "" {
			out[p.UID] = p
		}
	}
	return out
}

// recordNominated records Nominated on the pods that were awaiting the NodeClaim's node
// name, now have it and are still pending. Pods whose plan this process did not see before
// the launch (a new leader recovering plans) get no event: the previous leader recorded it.
func (c *Controller) recordNominated(ctx context.Context, nodeClaim string, awaiting map[types.UID]Pod) {
	for uid, p := range awaiting {
		if n, ok := c.tracker.Get(uid); ok && n.NodeClaim == nodeClaim && n.NodeName != "" && c.pending(ctx, p) {
			RecordNominated(c.recorder, p, n.NodeName, nodeClaim)
		}
	}
}
