// Package nodeprovisioning is Tailor's PostFilter and Filter plugin. When a pod fits no
// existing node and preemption cannot help, it hands the pod with its filter results to the
// provisioner sidecar and returns at once. Once the sidecar has planned the pod onto a
// NodeClaim, the plugin keeps the pod off every other node (capacity that appears elsewhere
// was planned for other pods), and when the NodeClaim is launched it nominates the pod to
// the NodeClaim's node, so the pod is bound there as soon as the node registers and nothing
// else takes its capacity.
package nodeprovisioning

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config"
	"github.com/tailor-autoscaler/tailor/plugin/apis/config/validation"
	provisionerv1 "github.com/tailor-autoscaler/tailor/proto/tailor/provisioner/v1"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "NodeProvisioning"

// initializedLabel marks nodes whose NodeClaim is initialized: Ready, registered, startup
// taints gone. A pod such a node still rejects will not fit it later either.
const initializedLabel = "karpenter.sh/initialized"

// maxRejectionNodes caps the node names reported per rejection reason (the first by name).
const maxRejectionNodes = 20

// NodeProvisioning hands pods that fit nowhere to the provisioner and nominates them to
// the nodes launched for them.
type NodeProvisioning struct {
	handle      fwk.Handle
	args        *config.NodeProvisioningArgs
	provisioner provisioner
	// clock is the real clock unless a test sets one.
	clock clock.WithDelayedExecution
	// activatePods moves pods back into the scheduling queue: activate, unless a test sets
	// another.
	activatePods func(uids []types.UID)
	// reservations counts the nodes consolidation reserved room on; nil reads every node.
	reservations *reservationCount

	mu sync.Mutex
	// waitingSince is, per pod whose initialized planned node waits for the pods planned
	// with it, since when.
	waitingSince map[types.UID]time.Time
	// turnedBack is, per planned pod another plugin turned back after Reserve, how long the
	// plugin waited last before sending it back into the queue.
	turnedBack map[types.UID]time.Duration
}

// planWaitLimit bounds how long a pod waits on its initialized planned node for the pods
// planned with it. Those bind within seconds; a wait this long cannot end (the domains the
// scheduler counts changed since the plan was made, say a node registered in another zone),
// and the pod is planned again. The plugin activates the pod once the limit has passed: the
// scheduler might otherwise not try it again for minutes, with no pod of its spread bound
// meanwhile.
const planWaitLimit = 30 * time.Second

// A planned pod turned back after Reserve is tried again after turnedBackFirst, then after
// twice as long each time it is turned back again, up to turnedBackMax.
const (
	turnedBackFirst = time.Second
	turnedBackMax   = 30 * time.Second
)

var (
	_ fwk.PostFilterPlugin = &NodeProvisioning{}
	_ fwk.FilterPlugin     = &NodeProvisioning{}
	_ fwk.ReservePlugin    = &NodeProvisioning{}
)

// provisioner is what the plugin needs from the provisioner sidecar. Submit must not block.
type provisioner interface {
	// Submit hands a pod over for provisioning; stale is set when its planned node rejected
	// it, naming that node and what rejected it there.
	Submit(pod *v1.Pod, rejections []*provisionerv1.Rejection, message string, stale *provisionerv1.Rejection)
	// Nomination returns where the pod is planned to land, once known.
	Nomination(uid types.UID) (Nomination, bool)
	// Held returns how many pods are nominated to the node and not bound yet.
	Held(nodeName string) int
	// Forget drops the pod's submission and nomination.
	Forget(uid types.UID)
}

// Nomination is where a pod is planned to land: its NodeClaim and, once the NodeClaim is
// launched, the node it registers as.
type Nomination struct {
	NodeName  string
	NodeClaim string
}

// launched reports whether the NodeClaim's node name is known.
func (n Nomination) launched() bool { return n.NodeName != "" }

// Name returns the plugin's name.
func (pl *NodeProvisioning) Name() string { return Name }

// New validates the args and connects to the provisioner sidecar.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.NodeProvisioningArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type NodeProvisioningArgs, got %T", obj)
	}
	if errs := validation.ValidateNodeProvisioningArgs(field.NewPath("args"), args); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s args: %w", Name, errs.ToAggregate())
	}
	pl := &NodeProvisioning{handle: h, args: args, clock: clock.RealClock{}}
	pl.activatePods = pl.activate
	client, err := dialSidecar(ctx, sidecarOptions{
		socket:    args.ProvisionerSocket,
		timeout:   args.RequestTimeout.Duration,
		nodePools: nodePoolSelector(args),
		onChange:  pl.activate,
		waiting:   pl.waiting,
	})
	if err != nil {
		return nil, err
	}
	pl.provisioner = client
	if err := pl.forgetBoundPods(); err != nil {
		return nil, err
	}
	if pl.reservations, err = trackReservations(h.SharedInformerFactory().Core().V1().Nodes().Informer()); err != nil {
		return nil, err
	}
	return pl, nil
}

// Filter keeps every pod where the provisioner planned it. A pod planned onto a NodeClaim
// goes to no node but the NodeClaim's; a node launched for planned pods takes no other pod
// until they are all bound. A node registers before the scheduler has nominated every pod
// planned onto it, and would otherwise look free to any pending pod, which would take the
// capacity planned for others and push them onto nodes planned for yet others. Likewise a
// node consolidation reserved for the pods it moves keeps their room from other pods.
func (pl *NodeProvisioning) Filter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node().Name
	n, ok := pl.provisioner.Nomination(pod.UID)
	switch {
	case !ok:
		if held := pl.provisioner.Held(node); held > 0 {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node is held for %d pod(s) planned onto it until they are bound", held))
		}
		return pl.keepsRoomForOthers(ctx, pod, nodeInfo)
	case node == n.NodeName:
		return nil
	case !n.launched():
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pod is planned for NodeClaim %s, not launched yet", n.NodeClaim))
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pod is planned for node %s of NodeClaim %s", n.NodeName, n.NodeClaim))
}

// PostFilter nominates the pod to its planned node, or hands it to the provisioner.
func (pl *NodeProvisioning) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	if n, ok := pl.provisioner.Nomination(pod.UID); ok {
		if !n.launched() {
			logger.V(4).Info("pod waits for its NodeClaim to launch", "pod", klog.KObj(pod), "nodeClaim", n.NodeClaim)
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: waiting for NodeClaim %s to launch", Name, n.NodeClaim))
		}
		switch v, plugin := pl.plannedNode(n.NodeName, m); v {
		case nodePending:
			logger.V(4).Info("nominating pod to its planned node", "pod", klog.KObj(pod), "node", n.NodeName, "nodeClaim", n.NodeClaim)
			return framework.NewPostFilterResultWithNominatedNode(n.NodeName),
				fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: waiting for node %s of NodeClaim %s", Name, n.NodeName, n.NodeClaim))
		case nodeWaitsForPlan:
			if pl.waitedTooLong(pod.UID) {
				logger.V(2).Info("pod waited too long for the pods planned with it; provisioning again", "pod", klog.KObj(pod), "node", n.NodeName, "limit", planWaitLimit)
				break
			}
			// The scheduler counts the pods nominated to a node as if they ran there. Pods
			// planned together onto one node for a spread or an affinity would then each
			// wait for the others, so the nomination is cleared until the node takes the
			// pod; the plan still keeps the pod off other nodes and other pods off this one.
			logger.V(4).Info("planned node rejects the pod until the pods planned with it land; keeping the plan", "pod", klog.KObj(pod), "node", n.NodeName, "nodeClaim", n.NodeClaim, "plugin", plugin)
			return framework.NewPostFilterResultWithNominatedNode(""),
				fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: waiting for node %s of NodeClaim %s, which %s rejects until the pods planned with this one are bound", Name, n.NodeName, n.NodeClaim, plugin))
		}
		pl.stopWaiting(pod.UID)
		pl.provisioner.Forget(pod.UID)
		stale := staleRejection(n.NodeName, m.Get(n.NodeName))
		if status := pl.submit(ctx, pod, m, stale); status != nil {
			return nil, status
		}
		logger.V(2).Info("planned node rejected the pod; handing it back to the provisioner", "pod", klog.KObj(pod), "node", n.NodeName, "plugin", stale.Plugin, "reason", stale.Reason)
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: node %s of NodeClaim %s cannot take the pod (%s: %s); the provisioner backs off before planning it again", Name, n.NodeName, n.NodeClaim, stale.Plugin, stale.Reason))
	}
	if status := pl.submit(ctx, pod, m, nil); status != nil {
		return nil, status
	}
	logger.V(4).Info("handed pod to the provisioner", "pod", klog.KObj(pod))
	return nil, fwk.NewStatus(fwk.Unschedulable, Name+": waiting for the provisioner to plan a node")
}

// waitedTooLong records when the pod started waiting for the pods planned with it, with a
// timer that activates the pod once planWaitLimit has passed, and reports whether that was
// more than planWaitLimit ago.
func (pl *NodeProvisioning) waitedTooLong(uid types.UID) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now := pl.clock.Now()
	since, ok := pl.waitingSince[uid]
	if !ok {
		if pl.waitingSince == nil {
			pl.waitingSince = map[types.UID]time.Time{}
		}
		pl.waitingSince[uid] = now
		pl.clock.AfterFunc(planWaitLimit+time.Second, func() {
			pl.mu.Lock()
			_, waiting := pl.waitingSince[uid]
			pl.mu.Unlock()
			if waiting {
				pl.activatePods([]types.UID{uid})
			}
		})
		return false
	}
	return now.Sub(since) > planWaitLimit
}

// stopWaiting forgets when the pod started waiting, and how often it was turned back: it is
// bound, gone or planned again.
func (pl *NodeProvisioning) stopWaiting(uid types.UID) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	delete(pl.waitingSince, uid)
	delete(pl.turnedBack, uid)
}

// Reserve holds nothing: the plugin is a Reserve plugin for Unreserve.
func (pl *NodeProvisioning) Reserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve sends a planned pod that was turned back after it had a node into the queue
// again, a second later and twice as late each next time, up to turnedBackMax. Coscheduling
// turns back every member of a gang waiting at Permit when one member finds no node, say
// because its planned node is a moment from ready; it queues them again only when a pod of
// the gang is created or its PodGroup changes, which may never happen once every node of the
// gang is up, and the scheduler would leave them for five minutes.
func (pl *NodeProvisioning) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	if _, planned := pl.provisioner.Nomination(pod.UID); !planned {
		return
	}
	pl.mu.Lock()
	if pl.turnedBack == nil {
		pl.turnedBack = map[types.UID]time.Duration{}
	}
	wait := turnedBackFirst
	if last, ok := pl.turnedBack[pod.UID]; ok {
		wait = min(2*last, turnedBackMax)
	}
	pl.turnedBack[pod.UID] = wait
	pl.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("planned pod turned back after Reserve; queueing it again", "pod", klog.KObj(pod), "node", nodeName, "after", wait)
	uid := pod.UID
	pl.clock.AfterFunc(wait, func() { pl.activatePods([]types.UID{uid}) })
}

// staleRejection is what the pod's planned node said of it.
func staleRejection(node string, st *fwk.Status) *provisionerv1.Rejection {
	return &provisionerv1.Rejection{Plugin: st.Plugin(), Reason: strings.Join(st.Reasons(), ", "), Unresolvable: st.Code() == fwk.UnschedulableAndUnresolvable, NodeCount: 1, Nodes: []string{node}}
}

// submit hands the pod over with the filter results of every node; it returns a status
// only when the nodes cannot be listed.
func (pl *NodeProvisioning) submit(ctx context.Context, pod *v1.Pod, m fwk.NodeToStatusReader, stale *provisionerv1.Rejection) *fwk.Status {
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("listing nodes: %w", err))
	}
	rejected := rejections(nodes, m)
	pl.logMissedRoom(ctx, pod, nodes, m)
	pl.provisioner.Submit(pod, rejected, summary(len(nodes), rejected), stale)
	return nil
}

// activate moves pods whose plan changed back into the scheduling queue, so the next
// cycle nominates them (or hands them over again when their plan was withdrawn).
func (pl *NodeProvisioning) activate(uids []types.UID) {
	lister := pl.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	pods := map[string]*v1.Pod{}
	for _, uid := range uids {
		pod, err := pl.podByUID(uid)
		if err != nil || pod == nil {
			continue
		}
		if live, err := lister.Pods(pod.Namespace).Get(pod.Name); err == nil && live.Spec.NodeName == "" {
			pods[pod.Namespace+"/"+pod.Name] = live
		}
	}
	if len(pods) > 0 {
		pl.handle.Activate(klog.Background(), pods)
	}
}

// waiting reports whether the pod is unbound in the scheduler's informer; a pod the
// informer does not hold is gone. Until the index exists every pod counts as waiting.
func (pl *NodeProvisioning) waiting(uid types.UID) bool {
	pod, err := pl.podByUID(uid)
	if err != nil {
		return true
	}
	return pod != nil && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil
}

// podByUID returns the pod the scheduler's informer holds with the UID, nil for none; it
// fails until the index by UID exists.
func (pl *NodeProvisioning) podByUID(uid types.UID) (*v1.Pod, error) {
	objs, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Informer().GetIndexer().ByIndex(podUIDIndex, string(uid))
	if err != nil || len(objs) == 0 {
		return nil, err
	}
	pod, _ := objs[0].(*v1.Pod)
	return pod, nil
}

// podUIDIndex indexes the scheduler's pod informer by UID, to find nominated pods.
const podUIDIndex = "tailor.sh/uid"

// forgetBoundPods drops submissions and nominations of pods once bound or deleted.
func (pl *NodeProvisioning) forgetBoundPods() error {
	informer := pl.handle.SharedInformerFactory().Core().V1().Pods().Informer()
	// Every profile's plugin instance shares the informer; the first one adds the index.
	if _, ok := informer.GetIndexer().GetIndexers()[podUIDIndex]; !ok {
		if err := informer.AddIndexers(cache.Indexers{podUIDIndex: func(obj any) ([]string, error) {
			return []string{string(obj.(metav1.Object).GetUID())}, nil
		}}); err != nil {
			return fmt.Errorf("indexing pods by uid: %w", err)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
				pl.stopWaiting(pod.UID)
				pl.provisioner.Forget(pod.UID)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				pl.stopWaiting(pod.UID)
				pl.provisioner.Forget(pod.UID)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	return nil
}

// verdict is what a planned node says of its pod.
type verdict int

const (
	// nodePending: the node has not registered or is not initialized yet.
	nodePending verdict = iota
	// nodeWaitsForPlan: the initialized node rejects the pod only for where other pods run,
	// which changes as the pods planned with it are bound.
	nodeWaitsForPlan
	// nodeRejects: the initialized node rejects the pod and will not take it later either.
	nodeRejects
)

// plannedNode judges the planned node from its filter result, naming the rejecting plugin.
func (pl *NodeProvisioning) plannedNode(nodeName string, m fwk.NodeToStatusReader) (verdict, string) {
	info, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil || info.Node().Labels[initializedLabel] != "true" {
		return nodePending, ""
	}
	st := m.Get(nodeName)
	switch {
	case !st.IsRejected():
		return nodePending, ""
	case waitsForPlan(st):
		return nodeWaitsForPlan, st.Plugin()
	}
	return nodeRejects, st.Plugin()
}

// waitsForPlan reports whether a rejection can pass as the pods of the plan are bound: a
// topology spread skew, or required pod affinity for pods not bound yet. The scheduler tries
// the pod again when pods are bound. Filters stop at the first rejection, and these two run
// after the resource, port, taint, node affinity and volume filters, so such a rejection also
// says the node otherwise takes the pod. Anti-affinity and a missing topology label only get
// worse as pods are bound: they reject for good.
func waitsForPlan(st *fwk.Status) bool {
	switch st.Plugin() {
	case names.PodTopologySpread:
		return slices.Contains(st.Reasons(), podtopologyspread.ErrReasonConstraintsNotMatch)
	case names.InterPodAffinity:
		return slices.Contains(st.Reasons(), interpodaffinity.ErrReasonAffinityRulesNotMatch)
	}
	return false
}

// rejections groups the filter results by plugin and reason, with the nodes behind each.
func rejections(nodes []fwk.NodeInfo, m fwk.NodeToStatusReader) []*provisionerv1.Rejection {
	byReason := map[string]*provisionerv1.Rejection{}
	for _, n := range nodes {
		name := n.Node().Name
		st := m.Get(name)
		if !st.IsRejected() {
			continue
		}
		reason := strings.Join(st.Reasons(), ", ")
		key := st.Plugin() + "\x00" + reason
		r, ok := byReason[key]
		if !ok {
			r = &provisionerv1.Rejection{Plugin: st.Plugin(), Reason: reason, Unresolvable: st.Code() == fwk.UnschedulableAndUnresolvable}
			byReason[key] = r
		}
		r.NodeCount++
		r.Nodes = append(r.Nodes, name)
	}
	out := make([]*provisionerv1.Rejection, 0, len(byReason))
	for _, r := range byReason {
		sort.Strings(r.Nodes)
		if len(r.Nodes) > maxRejectionNodes {
			r.Nodes = r.Nodes[:maxRejectionNodes]
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NodeCount != out[j].NodeCount {
			return out[i].NodeCount > out[j].NodeCount
		}
		return out[i].Plugin+out[i].Reason < out[j].Plugin+out[j].Reason
	})
	return out
}

// summary renders the rejections in the style of the scheduler's FailedScheduling event.
func summary(total int, rejected []*provisionerv1.Rejection) string {
	parts := make([]string, len(rejected))
	for i, r := range rejected {
		parts[i] = fmt.Sprintf("%d node(s): %s (%s)", r.NodeCount, r.Reason, r.Plugin)
	}
	msg := fmt.Sprintf("0/%d nodes are available", total)
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, "; ")
	}
	return msg
}

func nodePoolSelector(args *config.NodeProvisioningArgs) *provisionerv1.NodePoolSelector {
	sel := &provisionerv1.NodePoolSelector{Names: args.NodePools}
	if args.NodePoolSelector != nil {
		if s, err := metav1.LabelSelectorAsSelector(args.NodePoolSelector); err == nil {
			sel.LabelSelector = s.String()
		}
	}
	return sel
}
