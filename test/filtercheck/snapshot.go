package filtercheck

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// snapshot holds the NodeInfos of the end state, built once per Check or CheckOne with every placed
// pod, the way the scheduler's cache builds them (framework.NodeInfo.AddPod, SetNode). Building a
// cache.Snapshot for each pod under check would cost time quadratic in the number of pods; a view
// rebuilds only the NodeInfo of the node the pod is taken from.
type snapshot struct {
	nodes map[string]*framework.NodeInfo
	// order is the order of the cluster's nodes, so that runs are reproducible.
	order []string
	// pvcUsers counts the placed pods' references to each claim, keyed namespace/name.
	pvcUsers map[string]int
}

func newSnapshot(s *endState, nodes []*corev1.Node) *snapshot {
	snap := &snapshot{
		nodes:    make(map[string]*framework.NodeInfo, len(nodes)),
		order:    make([]string, 0, len(nodes)),
		pvcUsers: make(map[string]int),
	}
	for _, n := range nodes {
		info := framework.NewNodeInfo()
		info.SetNode(n)
		snap.nodes[n.Name] = info
		snap.order = append(snap.order, n.Name)
	}
	for _, p := range s.placed {
		snap.nodes[p.Spec.NodeName].AddPod(p)
		for _, key := range claimKeys(p) {
			snap.pvcUsers[key]++
		}
	}
	return snap
}

// view returns the scheduler's snapshot as it is while it schedules one pod: every placed pod on its
// node but without, which is the pod under check when it is placed on node (nil when it is not).
//
// The node's NodeInfo is built again from its other pods rather than copied with the pod removed:
// NodeInfo records host ports as a set, so removing one of two pods that use a port would free it.
// kube-scheduler never has two such pods on a node; an end state under check may.
func (s *snapshot) view(node string, without *corev1.Pod) (*view, error) {
	v := &view{base: s, without: without, list: make([]fwk.NodeInfo, 0, len(s.order))}
	if without != nil {
		base := s.nodes[node]
		info := framework.NewNodeInfo()
		info.SetNode(base.Node())
		found := false
		for _, p := range base.Pods {
			if p.GetPod().UID == without.UID {
				found = true
				continue
			}
			info.AddPodInfo(p)
		}
		if !found {
			return nil, fmt.Errorf("pod %q is not on node %q", podKey(without), node)
		}
		v.node, v.info = node, info
	}
	for _, name := range s.order {
		info := v.get(name)
		v.list = append(v.list, info)
		if len(info.PodsWithAffinity) > 0 {
			v.withAffinity = append(v.withAffinity, info)
		}
		if len(info.PodsWithRequiredAntiAffinity) > 0 {
			v.withRequiredAntiAffinity = append(v.withRequiredAntiAffinity, info)
		}
	}
	return v, nil
}

// view implements the framework's NodeInfoLister and StorageInfoLister like the scheduler's
// cache.Snapshot, over a snapshot with one pod taken out.
type view struct {
	base    *snapshot
	without *corev1.Pod
	// node and info replace the base NodeInfo of the node the pod under check was taken from.
	node string
	info *framework.NodeInfo

	list, withAffinity, withRequiredAntiAffinity []fwk.NodeInfo
}

var (
	_ fwk.NodeInfoLister    = &view{}
	_ fwk.StorageInfoLister = &view{}
)

func (v *view) get(name string) *framework.NodeInfo {
	if v.info != nil && name == v.node {
		return v.info
	}
	return v.base.nodes[name]
}

// List returns every node of the cluster.
func (v *view) List() ([]fwk.NodeInfo, error) { return v.list, nil }

// HavePodsWithAffinityList returns the nodes with at least one pod with inter-pod affinity terms.
func (v *view) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) { return v.withAffinity, nil }

// HavePodsWithRequiredAntiAffinityList returns the nodes with at least one pod with required
// inter-pod anti-affinity terms.
func (v *view) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return v.withRequiredAntiAffinity, nil
}

// Get returns the NodeInfo of the named node.
func (v *view) Get(name string) (fwk.NodeInfo, error) {
	if info := v.get(name); info != nil {
		return info, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

// IsPVCUsedByPods reports whether a placed pod other than the one under check uses the claim.
func (v *view) IsPVCUsedByPods(key string) bool {
	n := v.base.pvcUsers[key]
	if v.without != nil {
		for _, k := range claimKeys(v.without) {
			if k == key {
				n--
			}
		}
	}
	return n > 0
}

// lister is the framework's SharedLister. Plugins keep the lister they were built with, so it stays
// the same while the view under it changes from one pod to the next; checks therefore run one at a time.
type lister struct {
	current *view
}

var _ fwk.SharedLister = &lister{}

// NodeInfos returns the current view.
func (l *lister) NodeInfos() fwk.NodeInfoLister { return l.current }

// StorageInfos returns the current view.
func (l *lister) StorageInfos() fwk.StorageInfoLister { return l.current }

func claimKeys(p *corev1.Pod) []string {
	var keys []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			keys = append(keys, framework.GetNamespacedName(p.Namespace, v.PersistentVolumeClaim.ClaimName))
		}
	}
	return keys
}
