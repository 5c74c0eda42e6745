package provisioning

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// ReadKinds are the kinds the provisioner lists while planning. Their informers should be
// started and synced before it serves, so that the first batch does not wait for them.
func ReadKinds() []client.Object {
	return []client.Object{
		&corev1.Pod{}, &corev1.Node{}, &karpv1.NodePool{}, &karpv1.NodeClaim{},
		&appsv1.DaemonSet{}, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &storagev1.StorageClass{},
	}
}

// unboundPods returns the pods not bound to a node, by UID. They are the cache's own (see
// input).
func (p *Provisioner) unboundPods(ctx context.Context) (map[types.UID]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := p.kube.List(ctx, list, client.MatchingFields{nodeclaim.PodNodeNameIndex: ""}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing unbound pods: %w", err)
	}
	out := make(map[types.UID]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].UID] = &list.Items[i]
	}
	return out, nil
}

// input gathers what the planner needs for the pods of a batch: the NodePools the selector
// allows with their instance types and remaining limits, the cluster's nodes and NodeClaims
// with their pods, the DaemonSets, and the volumes the pods may refer to. unbound are the
// cluster's unbound pods. notReady says why NodePools that cannot launch were left out.
//
// The pods, nodes, NodeClaims and volumes are the cache's own objects, not copies
// (client.UnsafeDisableDeepCopy), so that a pass over a large cluster does not copy all of
// it: whoever reads the input must not change them. The planner only reads; disruption
// copies the pods it plans anew and reads a node again before it patches it; NodeClaims
// are read again before they are written.
func (p *Provisioner) input(ctx context.Context, sel NodePoolSelector, pods []*corev1.Pod, unbound map[types.UID]*corev1.Pod, opts inputOptions) (packing.Input, map[string]string, error) {
	in := packing.Input{Pods: pods, MinValuesPolicy: p.minValuesPolicy}
	notReady := map[string]string{}
	pools := &karpv1.NodePoolList{}
	if err := p.kube.List(ctx, pools); err != nil {
		return in, nil, fmt.Errorf("listing NodePools: %w", err)
	}
	claims := &karpv1.NodeClaimList{}
	if err := p.kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return in, nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	for i := range pools.Items {
		np := &pools.Items[i]
		if np.DeletionTimestamp != nil || !sel.Matches(np) || (p.static(np) && !opts.static) {
			continue
		}
		its, err := p.instanceTypes.InstanceTypes(ctx, np)
		if err != nil {
			if cloudprovider.IsNodeClassNotReadyError(err) {
				notReady[np.Name] = cloudprovider.Message(err)
				continue
			}
			return in, nil, fmt.Errorf("listing instance types of NodePool %s: %w", np.Name, err)
		}
		in.NodePools = append(in.NodePools, packing.NodePool{NodePool: np, InstanceTypes: its, Remaining: remaining(np, claims.Items)})
	}
	var err error
	if in.Nodes, err = p.nodes(ctx, sel, pools.Items, claims.Items, unbound, opts); err != nil {
		return in, nil, err
	}
	if in.DaemonSets, err = p.daemonSets(ctx); err != nil {
		return in, nil, err
	}
	if in.Volumes, err = p.volumes(ctx, pods); err != nil {
		return in, nil, err
	}
	return in, notReady, nil
}

// inputOptions say how a provisioning batch sees registered nodes (see Intake).
type inputOptions struct {
	// existing makes the registered nodes that take pods schedulable: the batch's pods were
	// not checked against them.
	existing bool
	// expected counts on registered nodes the early pods left to the scheduler on them.
	expected bool
	// static keeps static NodePools, which pending pods are not planned onto.
	static bool
}

// static reports whether the NodePool keeps a fixed number of nodes, which pending pods
// get no capacity from.
func (p *Provisioner) static(np *karpv1.NodePool) bool {
	return p.staticCapacity && np.IsStatic()
}

// remaining is the NodePool's limits minus the capacity of its NodeClaims.
func remaining(np *karpv1.NodePool, claims []karpv1.NodeClaim) corev1.ResourceList {
	var used []corev1.ResourceList
	for i := range claims {
		if claims[i].Labels[karpv1.NodePoolLabelKey] == np.Name {
			used = append(used, packing.ClaimedCapacity(&claims[i]))
		}
	}
	return packing.Remaining(corev1.ResourceList(np.Spec.Limits), used)
}

// nodes describes the cluster to the planner, each node with its bound pods and the pods
// planned onto its NodeClaim that wait to be bound. A NodeClaim not initialized yet stands
// for the node it will be, merged with its Node once that has registered; it is schedulable
// when launched and its NodePool is allowed. Every other Node is described as it is and only
// counts as a topology domain: the scheduler found no room on it for the pods of the batch,
// unless opts say the batch's pods were not checked against the registered nodes; with
// opts.expected a registered node also counts the early pods left to the scheduler on its
// room (see Intake). The result is sorted by node name.
func (p *Provisioner) nodes(ctx context.Context, sel NodePoolSelector, pools []karpv1.NodePool, claims []karpv1.NodeClaim, unbound map[types.UID]*corev1.Pod, opts inputOptions) ([]packing.Node, error) {
	list := &corev1.NodeList{}
	if err := p.kube.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	byName := make(map[string]*corev1.Node, len(list.Items))
	byProviderID := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		byName[n.Name] = n
		if n.Spec.ProviderID != "" {
			byProviderID[n.Spec.ProviderID] = n
		}
	}
	allowed := map[string]bool{}
	for i := range pools {
		if sel.Matches(&pools[i]) {
			allowed[pools[i].Name] = true
		}
	}
	var expected map[string][]*corev1.Pod
	if opts.expected {
		expected = p.expectedOn(unbound)
	}
	var out []packing.Node
	claimOf := map[string]*karpv1.NodeClaim{}
	inFlight := map[string]bool{}
	for i := range claims {
		nc := &claims[i]
		registered := registeredNode(nc, byName, byProviderID)
		if registered != nil {
			claimOf[registered.Name] = nc
		}
		if nc.DeletionTimestamp != nil || nodeclaim.IsTrue(nc, karpv1.ConditionTypeInitialized) {
			continue
		}
		node := claimNode(nc, registered)
		boundTo := nc.Status.NodeName
		if registered != nil {
			boundTo = registered.Name
		}
		pods, err := p.podsOf(ctx, boundTo, nc, unbound)
		if err != nil {
			return nil, err
		}
		launched := nc.Status.ProviderID != "" && len(nc.Status.Allocatable) > 0
		out = append(out, packing.Node{Node: node, NodeClaim: nc, Pods: pods, Schedulable: launched && allowed[nc.Labels[karpv1.NodePoolLabelKey]]})
		if registered != nil {
			inFlight[registered.Name] = true
		}
	}
	for i := range list.Items {
		node := &list.Items[i]
		if inFlight[node.Name] {
			continue
		}
		nc := claimOf[node.Name]
		pods, err := p.podsOf(ctx, node.Name, nc, unbound)
		if err != nil {
			return nil, err
		}
		if more := expected[node.Name]; len(more) > 0 {
			pods = append(pods, more...)
			sort.Slice(pods, func(i, j int) bool {
				return pods[i].Namespace < pods[j].Namespace || pods[i].Namespace == pods[j].Namespace && pods[i].Name < pods[j].Name
			})
		}
		n := packing.Node{Node: node, NodeClaim: nc, Pods: pods}
		n.Schedulable = opts.existing && takesPods(&n) && !p.held(nc, unbound)
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node.Name < out[j].Node.Name })
	return out, nil
}

// held reports whether pods planned onto the NodeClaim's node wait to be bound: the
// scheduler plugin keeps every other pod off the node until they are.
func (p *Provisioner) held(nc *karpv1.NodeClaim, unbound map[types.UID]*corev1.Pod) bool {
	if nc == nil {
		return false
	}
	for _, ref := range p.tracker.PodsOf(nc.Name) {
		if _, ok := unbound[ref.UID]; ok {
			return true
		}
	}
	return false
}

// registeredNode returns the Node of a NodeClaim, nil while none has registered.
func registeredNode(nc *karpv1.NodeClaim, byName, byProviderID map[string]*corev1.Node) *corev1.Node {
	if n, ok := byProviderID[nc.Status.ProviderID]; ok && nc.Status.ProviderID != "" {
		return n
	}
	if n, ok := byName[nc.Status.NodeName]; ok && n.Spec.ProviderID == nc.Status.ProviderID {
		return n
	}
	return nil
}

// claimNode is the node a NodeClaim will be: its labels (and the single values of its
// requirements), its taints without the startup taints, which go away before pods land, and
// its allocatable. Once its Node has registered, the Node's labels and allocatable win: they
// are what the scheduler will see. Until the name is known, the NodeClaim's name stands in,
// also as the hostname.
func claimNode(nc *karpv1.NodeClaim, registered *corev1.Node) *corev1.Node {
	name := nc.Name
	if nc.Status.NodeName != "" {
		name = nc.Status.NodeName
	}
	labels := requirements.SingleValueLabels(nc.Spec.Requirements)
	for k, v := range nc.Labels {
		labels[k] = v
	}
	allocatable := corev1.ResourceList{}
	for k, v := range nc.Status.Allocatable {
		allocatable[k] = v.DeepCopy()
	}
	if registered != nil {
		name = registered.Name
		for k, v := range registered.Labels {
			labels[k] = v
		}
		for k, v := range registered.Status.Allocatable {
			allocatable[k] = v.DeepCopy()
		}
	}
	if _, ok := labels[corev1.LabelHostname]; !ok {
		labels[corev1.LabelHostname] = name
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: nc.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: allocatable},
	}
}

// podsOf returns the unfinished pods bound to the node (none when nodeName is empty) and the
// unbound pods planned onto the NodeClaim (nil for none), sorted by namespace and name.
func (p *Provisioner) podsOf(ctx context.Context, nodeName string, nc *karpv1.NodeClaim, unbound map[types.UID]*corev1.Pod) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	if nodeName != "" {
		bound := &corev1.PodList{}
		if err := p.kube.List(ctx, bound, client.MatchingFields{nodeclaim.PodNodeNameIndex: nodeName}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing pods of node %s: %w", nodeName, err)
		}
		for i := range bound.Items {
			if pod := &bound.Items[i]; pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				out = append(out, pod)
			}
		}
	}
	if nc != nil {
		for _, ref := range p.tracker.PodsOf(nc.Name) {
			if pod, ok := unbound[ref.UID]; ok {
				out = append(out, pod)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// daemonSets lists the DaemonSets that are not being deleted.
func (p *Provisioner) daemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	list := &appsv1.DaemonSetList{}
	if err := p.kube.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing DaemonSets: %w", err)
	}
	var out []*appsv1.DaemonSet
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// volumes lists what volume topology needs when some pod refers to a PersistentVolumeClaim,
// directly or through a generic ephemeral volume: the claims of those pods' namespaces, every
// PersistentVolume and every StorageClass.
func (p *Provisioner) volumes(ctx context.Context, pods []*corev1.Pod) (packing.Volumes, error) {
	var v packing.Volumes
	namespaces := map[string]bool{}
	for _, pod := range pods {
		for _, vol := range pod.Spec.Volumes {
			if vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil {
				namespaces[pod.Namespace] = true
			}
		}
	}
	if len(namespaces) == 0 {
		return v, nil
	}
	for _, ns := range sortedSet(namespaces) {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := p.kube.List(ctx, claims, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return v, fmt.Errorf("listing PersistentVolumeClaims in %s: %w", ns, err)
		}
		for i := range claims.Items {
			v.Claims = append(v.Claims, &claims.Items[i])
		}
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := p.kube.List(ctx, pvs, client.UnsafeDisableDeepCopy); err != nil {
		return v, fmt.Errorf("listing PersistentVolumes: %w", err)
	}
	for i := range pvs.Items {
		v.PersistentVols = append(v.PersistentVols, &pvs.Items[i])
	}
	classes := &storagev1.StorageClassList{}
	if err := p.kube.List(ctx, classes, client.UnsafeDisableDeepCopy); err != nil {
		return v, fmt.Errorf("listing StorageClasses: %w", err)
	}
	for i := range classes.Items {
		v.StorageClasses = append(v.StorageClasses, &classes.Items[i])
	}
	return v, nil
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
