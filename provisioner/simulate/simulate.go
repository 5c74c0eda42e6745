// Package simulate plans capacity offline: it reads Kubernetes manifests (NodePools,
// EC2NodeClasses, pending Pods and optionally the cluster's Nodes, NodeClaims, DaemonSets and
// storage objects), builds the instance types of every NodePool from an EC2 catalog, runs
// the planner that the provisioner runs, and reports the plan as JSON. It serves
// `tailor-provisioner simulate`.
package simulate

import (
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Stdin is the path that reads manifests from standard input.
const Stdin = "-"

// Load reads the manifests at paths (JSON or YAML; single objects, multi-document YAML or a
// v1 List; Stdin reads standard input) and builds the planner's input:
//
//   - every Pod without spec.nodeName is planned, whatever its schedulerName, unless it has
//     succeeded or failed;
//   - a Pod with spec.nodeName runs on that node, which must be a listed Node or the node of
//     a listed NodeClaim;
//   - every Node is a node of the cluster, schedulable unless spec.unschedulable; a NodeClaim
//     belongs to the Node named by its status.nodeName or carrying its status.providerID,
//     and a NodeClaim with status.allocatable whose Node is not listed is a node in flight;
//   - every NodePool launches the instance types of its EC2NodeClass, built from cat with
//     opts; what its spec.limits leave is the limits minus the capacity of its listed Nodes
//     (label karpenter.sh/nodepool) and of its NodeClaims whose Node is not listed;
//   - NodeOverlays change the prices and capacities of the instance types they select, as
//     the provisioner applies them with the NodeOverlay feature gate on; one that does not
//     validate is an error;
//   - DaemonSets, PersistentVolumeClaims, PersistentVolumes and StorageClasses are passed on.
//
// Objects keep the order of the manifests, so the same manifests give the same input.
func Load(paths []string, cat *catalog.Catalog, opts aws.OfflineOptions) (packing.Input, error) {
	return load(paths, os.Stdin, cat, opts)
}

func load(paths []string, stdin io.Reader, cat *catalog.Catalog, opts aws.OfflineOptions) (packing.Input, error) {
	m := newManifests()
	dec := newDecoder()
	readStdin := false
	for _, path := range paths {
		name, data, err := readManifest(path, stdin, &readStdin)
		if err != nil {
			return packing.Input{}, err
		}
		objs, sources, err := dec.decodeFile(name, data)
		if err != nil {
			return packing.Input{}, err
		}
		for i, obj := range objs {
			if err := m.add(obj, sources[i]); err != nil {
				return packing.Input{}, err
			}
		}
	}
	return m.input(cat, opts)
}

func readManifest(path string, stdin io.Reader, readStdin *bool) (string, []byte, error) {
	if path != Stdin {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", nil, fmt.Errorf("reading manifests: %w", err)
		}
		return path, data, nil
	}
	if *readStdin {
		return "", nil, fmt.Errorf("standard input (%s) is given more than once", Stdin)
	}
	*readStdin = true
	data, err := io.ReadAll(stdin)
	if err != nil {
		return "", nil, fmt.Errorf("reading manifests from standard input: %w", err)
	}
	return "<stdin>", data, nil
}

// manifests are the objects read, by kind, in the order read.
type manifests struct {
	nodePools   []*karpv1.NodePool
	nodeClasses map[string]*awsv1.EC2NodeClass
	pods        []*corev1.Pod
	nodes       []*corev1.Node
	nodeClaims  []*karpv1.NodeClaim
	overlays    []karpv1alpha1.NodeOverlay
	daemonSets  []*appsv1.DaemonSet
	volumes     packing.Volumes
	// seen maps kind and namespace/name to where the object was read, to refuse duplicates.
	seen map[string]source
}

func newManifests() *manifests {
	return &manifests{nodeClasses: map[string]*awsv1.EC2NodeClass{}, seen: map[string]source{}}
}

// add files a decoded object by kind.
func (m *manifests) add(obj runtime.Object, at source) error {
	key := objectKey(obj)
	if first, ok := m.seen[key]; ok {
		return fmt.Errorf("%s: %s is also in %s; give each object once", at, key, first)
	}
	m.seen[key] = at
	switch o := obj.(type) {
	case *corev1.Pod:
		m.pods = append(m.pods, o)
	case *corev1.Node:
		m.nodes = append(m.nodes, o)
	case *corev1.PersistentVolumeClaim:
		m.volumes.Claims = append(m.volumes.Claims, o)
	case *corev1.PersistentVolume:
		m.volumes.PersistentVols = append(m.volumes.PersistentVols, o)
	case *storagev1.StorageClass:
		m.volumes.StorageClasses = append(m.volumes.StorageClasses, o)
	case *appsv1.DaemonSet:
		m.daemonSets = append(m.daemonSets, o)
	case *karpv1.NodePool:
		m.nodePools = append(m.nodePools, o)
	case *karpv1.NodeClaim:
		m.nodeClaims = append(m.nodeClaims, o)
	case *karpv1alpha1.NodeOverlay:
		if err := overlay.Validate(o); err != nil {
			return fmt.Errorf("%s: NodeOverlay %q: %w", at, o.Name, err)
		}
		m.overlays = append(m.overlays, *o)
	case *awsv1.EC2NodeClass:
		m.nodeClasses[o.Name] = o
	}
	return nil
}

// objectKey names an object by kind and namespace/name, for messages.
func objectKey(obj runtime.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	o, ok := obj.(metav1.Object)
	if !ok {
		return kind
	}
	if o.GetNamespace() == "" {
		return kind + " " + o.GetName()
	}
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// input assembles the planner's input from the objects read.
func (m *manifests) input(cat *catalog.Catalog, opts aws.OfflineOptions) (packing.Input, error) {
	in := packing.Input{DaemonSets: m.daemonSets, Volumes: m.volumes}
	nodes, unregistered, err := m.clusterNodes()
	if err != nil {
		return packing.Input{}, err
	}
	byName := make(map[string]int, len(nodes))
	for i, n := range nodes {
		byName[n.Node.Name] = i
	}
	for _, pod := range m.pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if pod.Spec.NodeName == "" {
			in.Pods = append(in.Pods, pod)
			continue
		}
		i, ok := byName[pod.Spec.NodeName]
		if !ok {
			return packing.Input{}, fmt.Errorf("pod %s/%s is bound to node %q, which is not in the manifests: add the Node, or clear spec.nodeName to plan the pod",
				pod.Namespace, pod.Name, pod.Spec.NodeName)
		}
		nodes[i].Pods = append(nodes[i].Pods, pod)
	}
	in.Nodes = nodes
	types := map[string][]*cloudprovider.InstanceType{}
	for _, np := range m.nodePools {
		class, err := m.nodeClass(np)
		if err != nil {
			return packing.Input{}, err
		}
		its, ok := types[class.Name]
		if !ok {
			if its, err = aws.CatalogInstanceTypes(cat, class, opts); err != nil {
				return packing.Input{}, fmt.Errorf("instance types of NodePool %q: %w", np.Name, err)
			}
			types[class.Name] = its
		}
		// The overlays apply to every NodePool's copy, as the provisioner applies them.
		overlaid := overlay.Apply(m.overlays, np.Name, its).InstanceTypes
		in.NodePools = append(in.NodePools, packing.NodePool{NodePool: np, InstanceTypes: overlaid, Remaining: m.remaining(np, unregistered)})
	}
	return in, nil
}

// clusterNodes pairs Nodes with their NodeClaims and turns NodeClaims without a listed Node
// into nodes in flight. It also returns the NodeClaims whose Node is not listed.
func (m *manifests) clusterNodes() ([]packing.Node, []*karpv1.NodeClaim, error) {
	nodes := make([]packing.Node, 0, len(m.nodes)+len(m.nodeClaims))
	byName := map[string]int{}
	byProviderID := map[string]int{}
	for i, n := range m.nodes {
		nodes = append(nodes, packing.Node{Node: n, Schedulable: !n.Spec.Unschedulable})
		byName[n.Name] = i
		if n.Spec.ProviderID != "" {
			byProviderID[n.Spec.ProviderID] = i
		}
	}
	var unregistered []*karpv1.NodeClaim
	for _, nc := range m.nodeClaims {
		i, ok := byName[nc.Status.NodeName]
		if !ok && nc.Status.ProviderID != "" {
			i, ok = byProviderID[nc.Status.ProviderID]
		}
		if ok {
			if other := nodes[i].NodeClaim; other != nil {
				return nil, nil, fmt.Errorf("NodeClaims %q and %q both belong to Node %q: give each node one NodeClaim", other.Name, nc.Name, nodes[i].Node.Name)
			}
			nodes[i].NodeClaim = nc
			continue
		}
		unregistered = append(unregistered, nc)
		if len(nc.Status.Allocatable) == 0 {
			continue
		}
		name := nc.Status.NodeName
		if name == "" {
			name = nc.Name
		}
		if _, taken := byName[name]; taken {
			return nil, nil, fmt.Errorf("NodeClaim %q: its node %q is also the node of another NodeClaim", nc.Name, name)
		}
		byName[name] = len(nodes)
		nodes = append(nodes, packing.Node{
			Node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nc.Labels},
				Spec:       corev1.NodeSpec{Taints: nc.Spec.Taints, ProviderID: nc.Status.ProviderID},
				Status:     corev1.NodeStatus{Capacity: nc.Status.Capacity, Allocatable: nc.Status.Allocatable},
			},
			NodeClaim:   nc,
			Schedulable: true,
		})
	}
	return nodes, unregistered, nil
}

// nodeClass returns the EC2NodeClass a NodePool launches from.
func (m *manifests) nodeClass(np *karpv1.NodePool) (*awsv1.EC2NodeClass, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return nil, fmt.Errorf("NodePool %q: spec.template.spec.nodeClassRef is not set: name an EC2NodeClass of group %s", np.Name, awsv1.Group)
	}
	if ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return nil, fmt.Errorf("NodePool %q: spec.template.spec.nodeClassRef is a %s %s; simulate launches from EC2NodeClasses of group %s", np.Name, ref.Group, ref.Kind, awsv1.Group)
	}
	class, ok := m.nodeClasses[ref.Name]
	if !ok {
		return nil, fmt.Errorf("NodePool %q refers to EC2NodeClass %q, which is not in the manifests: add it", np.Name, ref.Name)
	}
	return class, nil
}

// remaining is the NodePool's limits minus the capacity of its listed Nodes and of its
// NodeClaims whose Node is not listed (their status.capacity, else what they request).
// Nil when the NodePool has no limits.
func (m *manifests) remaining(np *karpv1.NodePool, unregistered []*karpv1.NodeClaim) corev1.ResourceList {
	var used []corev1.ResourceList
	for _, n := range m.nodes {
		if n.Labels[karpv1.NodePoolLabelKey] != np.Name {
			continue
		}
		if len(n.Status.Capacity) > 0 {
			used = append(used, n.Status.Capacity)
		} else {
			used = append(used, n.Status.Allocatable)
		}
	}
	for _, nc := range unregistered {
		if nc.Labels[karpv1.NodePoolLabelKey] == np.Name {
			used = append(used, packing.ClaimedCapacity(nc))
		}
	}
	return packing.Remaining(corev1.ResourceList(np.Spec.Limits), used)
}
