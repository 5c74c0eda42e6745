package nodeprovisioning

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

var (
	_ fwk.PreScorePlugin = &NodeProvisioning{}
	_ fwk.ScorePlugin    = &NodeProvisioning{}
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
	if !ok || pl.reservations.none() {
		return fwk.NewStatus(fwk.Skip)
	}
	now := pl.clock.Now()
	reserved := reservedNodes{}
	for _, n := range nodes {
		r, ok, err := reservation.Of(n.Node())
		if err != nil {
			klog.FromContext(ctx).V(2).Info("ignoring the node's reservation", "node", klog.KObj(n.Node()), "err", err)
			continue
		}
		if ok && r.Wants(controller, running(n, controller), now) {
			reserved[n.Node().Name] = true
		}
	}
	if len(reserved) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	klog.FromContext(ctx).V(4).Info("preferring the nodes consolidation reserved for the pod's controller", "pod", klog.KObj(pod), "controller", controller, "nodes", len(reserved))
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
		return fwk.MaxNodeScore, nil
	}
	return 0, nil
}

// keepsRoomForOthers rejects the pod from a node that takes it only with room consolidation
// keeps there for moved pods of other controllers still to come. A moved pod the plan's node
// rejects (a spread skew of the moment, say) would otherwise land in that room, and the pod
// it was kept for would find no node and have one launched.
func (pl *NodeProvisioning) keepsRoomForOthers(ctx context.Context, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if pl.reservations.none() {
		return nil
	}
	r, ok, err := reservation.Of(nodeInfo.Node())
	if err != nil {
		klog.FromContext(ctx).V(2).Info("ignoring the node's reservation", "node", klog.KObj(nodeInfo.Node()), "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	own, _ := reservation.ControllerOf(pod)
	kept, pods := r.KeptFor(own, func(c types.UID) int { return running(nodeInfo, c) }, pl.clock.Now())
	if pods == 0 {
		return nil
	}
	free := freeOn(nodeInfo)
	for name, q := range amounts(framework.NewResource(kept)) {
		free[name] -= q
	}
	allowed := nodeInfo.GetAllocatable().GetAllowedPodNumber()
	short := allowed > 0 && allowed-len(nodeInfo.GetPods())-pods < 1
	for name, need := range amounts(framework.NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))) {
		short = short || need > 0 && free[name] < need
	}
	if !short {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node keeps room for %d pod(s) consolidation moves onto it", pods))
}

// reservationCount counts the nodes that carry a reservation, as the scheduler's node
// informer delivers them. While none does, Filter and PreScore skip reading every node's
// annotations, which is most of what the plugin costs a pod that fits existing nodes. The
// informer hands a change to the scheduler's cache and to the count separately, a moment
// apart: a reservation just written may go unseen for that moment, as if written a moment
// later (consolidation writes its reservations before it evicts the pods they are for),
// and one just lifted costs a needless read. Until the count has seen every node it knows
// nothing, and the nodes are read.
type reservationCount struct {
	// synced reports whether the handler has seen the informer's initial list.
	synced     func() bool
	seenSynced atomic.Bool

	mu    sync.Mutex
	nodes sets.Set[string]
	// count is nodes.Len(), read without mu.
	count atomic.Int64
}

// trackReservations counts the reserved nodes of the informer.
func trackReservations(informer cache.SharedIndexInformer) (*reservationCount, error) {
	c := &reservationCount{nodes: sets.New[string]()}
	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.update,
		UpdateFunc: func(_, obj any) { c.update(obj) },
		DeleteFunc: c.delete,
	})
	if err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	c.synced = registration.HasSynced
	return c, nil
}

// none reports whether no node is reserved; a nil count knows nothing.
func (c *reservationCount) none() bool {
	if c == nil {
		return false
	}
	if !c.seenSynced.Load() {
		if !c.synced() {
			return false
		}
		c.seenSynced.Store(true)
	}
	return c.count.Load() == 0
}

func (c *reservationCount) update(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, reserved := node.Annotations[reservation.AnnotationKey]; reserved {
		c.nodes.Insert(node.Name)
	} else {
		c.nodes.Delete(node.Name)
	}
	c.count.Store(int64(c.nodes.Len()))
}

func (c *reservationCount) delete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes.Delete(node.Name)
	c.count.Store(int64(c.nodes.Len()))
}

// logMissedRoom says, for a pod consolidation moved that fits no node, why each node
// reserved for more pods of its controller rejected it: the pod has a node launched for it
// instead of taking the room the plan kept.
func (pl *NodeProvisioning) logMissedRoom(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo, m fwk.NodeToStatusReader) {
	logger := klog.FromContext(ctx)
	controller, ok := reservation.ControllerOf(pod)
	if !ok || !logger.V(2).Enabled() {
		return
	}
	now := pl.clock.Now()
	for _, n := range nodes {
		r, ok, err := reservation.Of(n.Node())
		if err != nil || !ok || !r.Active(now) || r.Pods[controller] == 0 {
			continue
		}
		free := freeOn(n)
		st := m.Get(n.Node().Name)
		logger.V(2).Info("pod found no room on a node reserved for its controller",
			"pod", klog.KObj(pod), "node", klog.KObj(n.Node()), "want", r.Pods[controller], "running", running(n, controller),
			"freeMilliCPU", free[v1.ResourceCPU], "freeMemory", free[v1.ResourceMemory], "pods", len(n.GetPods()),
			"plugin", st.Plugin(), "reasons", st.Reasons())
	}
}

// freeOn is what the node's allocatable leaves after the requests of its pods, by name.
func freeOn(n fwk.NodeInfo) map[v1.ResourceName]int64 {
	free := amounts(n.GetAllocatable())
	for name, used := range amounts(n.GetRequested()) {
		free[name] -= used
	}
	return free
}

// amounts lists a scheduler resource by name: CPU in millicores, the rest in units.
func amounts(r fwk.Resource) map[v1.ResourceName]int64 {
	out := map[v1.ResourceName]int64{
		v1.ResourceCPU: r.GetMilliCPU(), v1.ResourceMemory: r.GetMemory(), v1.ResourceEphemeralStorage: r.GetEphemeralStorage(),
	}
	for name, q := range r.GetScalarResources() {
		out[name] = q
	}
	return out
}

// ScoreExtensions returns nil: scores are already 0 or MaxNodeScore.
func (pl *NodeProvisioning) ScoreExtensions() fwk.ScoreExtensions { return nil }

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
