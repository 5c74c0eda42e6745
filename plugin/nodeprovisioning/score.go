package nodeprovisioning

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

var (
	_ framework.PreScorePlugin = &NodeProvisioning{}
	_ framework.ScorePlugin    = &NodeProvisioning{}
)

// reservedStateKey is the CycleState key of the nodes PreScore found reserved for the pod.
const reservedStateKey fwk.StateKey = Name + "/reserved"

// reservedNodes are the nodes that keep room for more pods of the pod's controller.
type reservedNodes map[string]bool

// Clone shares the set: it is not changed once written.
func (r reservedNodes) Clone() fwk.StateData { return r }

// PreScore finds the nodes consolidation reserved for more pods of the pod's controller.
// Pods without a controller, and pods no node is reserved for, skip Score.
func (pl *NodeProvisioning) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	controller, ok := reservation.ControllerOf(pod)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	now := pl.clock.Now()
	reserved := reservedNodes{}
	for _, n := range nodes {
		r, ok, err := reservation.Of(n.Node())
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Ignoring the node's reservation", "node", klog.KObj(n.Node()), "err", err)
			continue
		}
		if ok && r.Wants(controller, running(n, controller), now) {
			reserved[n.Node().Name] = true
		}
	}
	if len(reserved) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	klog.FromContext(ctx).V(4).Info("Preferring the nodes consolidation reserved for the pod's controller", "pod", klog.KObj(pod), "controller", controller, "nodes", len(reserved))
	state.Write(reservedStateKey, reserved)
	return nil
}

// Score puts the nodes reserved for the pod's controller first; its weight in the profile
// makes it outweigh every default score.
func (pl *NodeProvisioning) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := state.Read(reservedStateKey)
	if err != nil {
		return 0, fwk.AsStatus(fmt.Errorf("reading %s: %w", reservedStateKey, err))
	}
	if data.(reservedNodes)[nodeInfo.Node().Name] {
		return framework.MaxNodeScore, nil
	}
	return 0, nil
}

// ScoreExtensions: scores are already 0 or MaxNodeScore.
func (pl *NodeProvisioning) ScoreExtensions() framework.ScoreExtensions { return nil }

// running counts the node's pods of the controller, those assumed bound included.
func running(n fwk.NodeInfo, controller types.UID) int {
	count := 0
	for _, p := range n.GetPods() {
		if uid, ok := reservation.ControllerOf(p.GetPod()); ok && uid == controller {
			count++
		}
	}
	return count
}
