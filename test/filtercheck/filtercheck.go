// Package filtercheck answers whether kube-scheduler would accept each pod of a cluster's end state on
// the node it was placed on. It runs kube-scheduler's own PreFilter and Filter plugins, in the default
// profile of a stock kube-scheduler of the vendored version, so that the planner's tests can compare
// their placements with the scheduler's verdict instead of with a second implementation of its rules.
//
// Only the filtering phase runs: no Score, Reserve, Permit or binding, and no preemption.
package filtercheck

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
)

// Cluster is an end state to check: nodes, and pods with spec.nodeName set (bound or planned), plus
// storage objects for volume plugins.
//
// Pods without spec.nodeName and terminated pods (phase Succeeded or Failed, which kube-scheduler
// does not track) take no room anywhere. Pods whose spec.nodeName names no node of the cluster take no
// room either. Objects are not modified.
type Cluster struct {
	Nodes          []*corev1.Node
	Pods           []*corev1.Pod
	Claims         []*corev1.PersistentVolumeClaim
	Volumes        []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	// CSINodes is optional; without it the CSI volume limits are unknown and not enforced.
	CSINodes []*storagev1.CSINode
	// Namespaces is optional; the namespaces of the pods that are missing from it are made up with the
	// kubernetes.io/metadata.name label the API server sets, so that namespace selectors of pod
	// affinity terms see what they would see in a real cluster.
	Namespaces []*corev1.Namespace
}

// Rejection says that a pod was not accepted on its node, by which plugin, and why.
type Rejection struct {
	// Pod is namespace/name.
	Pod  string
	Node string
	// Plugin is the plugin that rejected the pod, as kube-scheduler reports it; several names joined
	// by commas when PreFilter plugins together narrowed the nodes to a set without the pod's node;
	// empty when the pod could not be checked at all: its node is not in the cluster, or a pod named
	// to Check has no node or has terminated.
	Plugin string
	// Reasons are the status reasons, verbatim as kubectl describe would show them.
	Reasons []string
}

// UnknownPodError says that Check was asked about a pod that is not in the cluster.
type UnknownPodError struct {
	Pod string
}

func (e *UnknownPodError) Error() string {
	return fmt.Sprintf("pod %q is not in the cluster", e.Pod)
}

// DuplicateError says that two objects of the cluster have the same name.
type DuplicateError struct {
	Kind string
	Name string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("duplicate %s %q", e.Kind, e.Name)
}

// PluginError says that a plugin returned an error instead of a verdict. kube-scheduler would retry
// such a pod later rather than find it unschedulable, so the check has no answer for it.
type PluginError struct {
	Pod    string
	Node   string
	Plugin string
	Err    error
}

func (e *PluginError) Error() string {
	return fmt.Sprintf("plugin %q on pod %q and node %q: %v", e.Plugin, e.Pod, e.Node, e.Err)
}

func (e *PluginError) Unwrap() error { return e.Err }

// Check runs PreFilter and Filter for every pod of the cluster whose name (namespace/name) is in pods,
// or every pod with spec.nodeName when pods is nil, on its spec.nodeName, with every other pod of the
// cluster on its node, as if all of them were bound. It returns the rejections sorted by pod.
//
// A pod whose node is not in the cluster, and a named pod that has no node or has terminated, is a
// rejection with Plugin "". A name that is not in the cluster is an *UnknownPodError.
func Check(ctx context.Context, c Cluster, pods []string) ([]Rejection, error) {
	state, err := newEndState(c, nil)
	if err != nil {
		return nil, err
	}
	selected, err := state.selected(pods)
	if err != nil {
		return nil, err
	}
	chk, err := newChecker(ctx, c, state)
	if err != nil {
		return nil, err
	}
	defer chk.close()

	var rejections []Rejection
	for _, pod := range selected {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("checking pods: %w", err)
		}
		r, err := chk.checkPlaced(ctx, pod)
		if err != nil {
			return nil, err
		}
		if r != nil {
			rejections = append(rejections, *r)
		}
	}
	sort.SliceStable(rejections, func(i, j int) bool { return rejections[i].Pod < rejections[j].Pod })
	return rejections, nil
}

// CheckOne runs PreFilter and Filter for one pod against one named node of the cluster, with the
// cluster's pods in place, and returns nil when the pod is accepted. The pod's spec.nodeName is
// ignored; a pod of the cluster with the pod's namespace and name is taken out of the cluster, since
// it is the pod being scheduled. A node that is not in the cluster is a rejection with Plugin "".
func CheckOne(ctx context.Context, c Cluster, pod *corev1.Pod, node string) (*Rejection, error) {
	incoming := pendingCopy(pod)
	state, err := newEndState(c, incoming)
	if err != nil {
		return nil, err
	}
	key := podKey(incoming)
	if _, ok := state.nodes[node]; !ok {
		return notChecked(key, node, fmt.Sprintf("node %q is not in the cluster", node)), nil
	}
	chk, err := newChecker(ctx, c, state)
	if err != nil {
		return nil, err
	}
	defer chk.close()
	v, err := chk.snapshot.view(node, nil)
	if err != nil {
		return nil, err
	}
	return chk.check(ctx, incoming, node, v)
}

// endState is the cluster as the scheduler's cache would hold it once every placed pod is bound.
type endState struct {
	nodes map[string]*corev1.Node
	// pods are private copies of the cluster's pods, with a UID each, in the cluster's order.
	pods  []*corev1.Pod
	byKey map[string]*corev1.Pod
	// placed are the pods that take room on a node of the cluster.
	placed []*corev1.Pod
	// namespaces are the namespaces of the pods, the pod under check included.
	namespaces []string
}

// newEndState indexes the cluster, leaving out the pod with the same key as incoming when it is set.
func newEndState(c Cluster, incoming *corev1.Pod) (*endState, error) {
	s := &endState{nodes: make(map[string]*corev1.Node, len(c.Nodes)), byKey: make(map[string]*corev1.Pod, len(c.Pods))}
	namespaces := sets.New[string]()
	if incoming != nil {
		namespaces.Insert(incoming.Namespace)
	}
	for _, n := range c.Nodes {
		if _, ok := s.nodes[n.Name]; ok {
			return nil, fmt.Errorf("indexing nodes: %w", &DuplicateError{Kind: "node", Name: n.Name})
		}
		s.nodes[n.Name] = n
	}
	uids := make(map[types.UID]string, len(c.Pods))
	for _, p := range c.Pods {
		key := podKey(p)
		if incoming != nil && key == podKey(incoming) {
			continue
		}
		if _, ok := s.byKey[key]; ok {
			return nil, fmt.Errorf("indexing pods: %w", &DuplicateError{Kind: "pod", Name: key})
		}
		cp := p.DeepCopy()
		if cp.UID == "" {
			cp.UID = syntheticUID(key)
		}
		if other, ok := uids[cp.UID]; ok {
			return nil, fmt.Errorf("indexing pods %q and %q: %w", other, key, &DuplicateError{Kind: "pod UID", Name: string(cp.UID)})
		}
		uids[cp.UID] = key
		namespaces.Insert(cp.Namespace)
		s.byKey[key] = cp
		s.pods = append(s.pods, cp)
		if _, ok := s.nodes[cp.Spec.NodeName]; ok && !terminated(cp) {
			s.placed = append(s.placed, cp)
		}
	}
	namespaces.Delete("")
	s.namespaces = sets.List(namespaces)
	return s, nil
}

// selected returns the pods Check was asked about, in the cluster's order when pods is nil.
func (s *endState) selected(pods []string) ([]*corev1.Pod, error) {
	if pods == nil {
		var all []*corev1.Pod
		for _, p := range s.pods {
			if p.Spec.NodeName != "" && !terminated(p) {
				all = append(all, p)
			}
		}
		return all, nil
	}
	seen := make(map[string]bool, len(pods))
	out := make([]*corev1.Pod, 0, len(pods))
	for _, key := range pods {
		p, ok := s.byKey[key]
		if !ok {
			return nil, &UnknownPodError{Pod: key}
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	return out, nil
}

func podKey(p *corev1.Pod) string {
	return cache.MetaObjectToName(p).String()
}

// syntheticUID gives a pod without a UID one, because the scheduler's NodeInfo tells pods apart by UID.
func syntheticUID(key string) types.UID {
	return types.UID("filtercheck/" + key)
}

func terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// pendingCopy returns the pod as the scheduler sees it while scheduling it: not bound to any node.
func pendingCopy(p *corev1.Pod) *corev1.Pod {
	cp := p.DeepCopy()
	cp.Spec.NodeName = ""
	if cp.UID == "" {
		cp.UID = syntheticUID(podKey(cp))
	}
	return cp
}

func notChecked(pod, node, reason string) *Rejection {
	return &Rejection{Pod: pod, Node: node, Reasons: []string{reason}}
}
