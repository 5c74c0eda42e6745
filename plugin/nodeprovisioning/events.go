package nodeprovisioning

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
)

// nodeClaims is the NodeClaim resource as the scheduler's dynamic informers name it
// (<plural>.<version>.<group>): the scheduler watches it for the plugin's queueing hints.
const nodeClaims fwk.EventResource = "nodeclaims.v1.karpenter.sh"

var _ fwk.EnqueueExtensions = &NodeProvisioning{}

// EventsToRegister returns the events after which a pod the plugin rejected may fit: its
// NodeClaim launched or deleted, its planned node registered or initialized, a pod planned
// with it bound, room a plan held or reserved let go.
func (pl *NodeProvisioning) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: nodeClaims, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterNodeClaimChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAnnotation}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterPodChange},
	}, nil
}

// isSchedulableAfterNodeClaimChange queues a pod whose NodeClaim launched (its node name is
// known) or went away (its plan is withdrawn), and a pod without a plan when a NodeClaim
// goes away (its node no longer holds room for pods planned onto it).
func (pl *NodeProvisioning) isSchedulableAfterNodeClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	deleted := newObj == nil
	obj := newObj
	if deleted {
		obj = oldObj
	}
	nc, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fwk.Queue, fmt.Errorf("want a NodeClaim as *unstructured.Unstructured, got %T", obj)
	}
	n, planned := pl.provisioner.Nomination(pod.UID)
	switch {
	case !planned:
		if deleted {
			logger.V(5).Info("NodeClaim deleted: its node holds no room for the pods planned onto it", "pod", klog.KObj(pod), "nodeClaim", nc.GetName())
			return fwk.Queue, nil
		}
		return fwk.QueueSkip, nil
	case n.NodeClaim != nc.GetName():
		return fwk.QueueSkip, nil
	case deleted:
		logger.V(5).Info("planned NodeClaim deleted", "pod", klog.KObj(pod), "nodeClaim", nc.GetName())
		return fwk.Queue, nil
	}
	node, _, err := unstructured.NestedString(nc.Object, "status", "nodeName")
	if err != nil {
		return fwk.Queue, fmt.Errorf("reading status.nodeName of NodeClaim %s: %w", nc.GetName(), err)
	}
	if node == "" {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("planned NodeClaim launched", "pod", klog.KObj(pod), "nodeClaim", nc.GetName(), "node", node)
	return fwk.Queue, nil
}

// isSchedulableAfterNodeChange queues a planned pod only when its own node registers or
// changes (it goes to no other); a pod without a plan on any node change, as a node's held or
// reserved room may have been let go.
func (pl *NodeProvisioning) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	node, ok := newObj.(*v1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("want a *v1.Node, got %T", newObj)
	}
	n, planned := pl.provisioner.Nomination(pod.UID)
	if planned && n.NodeName != node.Name {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("node changed that may take the pod", "pod", klog.KObj(pod), "node", node.Name)
	return fwk.Queue, nil
}

// isSchedulableAfterPodChange queues a planned pod only when a pod binds to or leaves its
// planned node (pods planned together for a spread or an affinity wait for each other); a
// pod without a plan on any such change, as the pods a node was held for bind.
func (pl *NodeProvisioning) isSchedulableAfterPodChange(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	changed := newPod
	if changed == nil {
		changed = oldPod
	}
	if changed.Spec.NodeName == "" {
		// A pending pod takes no room anywhere.
		return fwk.QueueSkip, nil
	}
	n, planned := pl.provisioner.Nomination(pod.UID)
	if planned && (!n.launched() || changed.Spec.NodeName != n.NodeName) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
