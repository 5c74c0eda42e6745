package filtercheck

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// checker is one framework of the default profile over one end state. Checks run one at a time.
type checker struct {
	state    *endState
	snapshot *snapshot
	lister   *lister
	fw       framework.Framework
	factory  informers.SharedInformerFactory
	cancel   context.CancelFunc
}

// newChecker builds the default profile's framework the way kube-scheduler does, over the end state.
func newChecker(ctx context.Context, c Cluster, state *endState) (_ *checker, err error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("defaulting the scheduler configuration: %w", err)
	}
	if len(cfg.Profiles) != 1 {
		return nil, fmt.Errorf("defaulting the scheduler configuration: %d profiles, want 1", len(cfg.Profiles))
	}
	profile := cfg.Profiles[0]
	// The framework instruments plugins with the scheduler's metrics, which must exist first;
	// registration happens once per process, as in kube-scheduler.
	metrics.Register()

	objs := clusterObjects(c, state)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	if err := preloadAll(factory, objs); err != nil {
		return nil, fmt.Errorf("loading the cluster into informers: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	chk := &checker{state: state, factory: factory, cancel: cancel}
	defer func() {
		if err != nil {
			chk.close()
		}
	}()

	draManager, err := newDRAManager(ctx, factory, client)
	if err != nil {
		return nil, err
	}
	chk.snapshot = newSnapshot(state, c.Nodes)
	empty, err := chk.snapshot.view("", nil)
	if err != nil {
		return nil, err
	}
	chk.lister = &lister{current: empty}
	chk.fw, err = frameworkruntime.NewFramework(ctx, frameworkplugins.NewInTreeRegistry(), &profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSharedDRAManager(draManager),
		// NodeVolumeLimits reads CSINodes through the manager kube-scheduler builds.
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithSnapshotSharedLister(chk.lister),
	)
	if err != nil {
		return nil, fmt.Errorf("building the scheduler framework: %w", err)
	}
	// A plugin that asks for a kind that is not preloaded gets the fake clientset's informer, which
	// is empty and needs starting; the static informers are synced already.
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("syncing the %v informer: %w", typ, context.Cause(ctx))
		}
	}
	return chk, nil
}

// close stops the framework and its informers.
func (c *checker) close() {
	if c.fw != nil {
		_ = c.fw.Close()
	}
	c.cancel()
	c.factory.Shutdown()
}

// checkPlaced checks a pod of the end state on its own node, with every other pod in place.
func (c *checker) checkPlaced(ctx context.Context, pod *corev1.Pod) (*Rejection, error) {
	key, node := podKey(pod), pod.Spec.NodeName
	switch {
	case node == "":
		return notChecked(key, "", "pod has no spec.nodeName"), nil
	case terminated(pod):
		return notChecked(key, node, fmt.Sprintf("pod has terminated (phase %s)", pod.Status.Phase)), nil
	}
	if _, ok := c.state.nodes[node]; !ok {
		return notChecked(key, node, fmt.Sprintf("node %q is not in the cluster", node)), nil
	}
	v, err := c.snapshot.view(node, pod)
	if err != nil {
		return nil, fmt.Errorf("checking pod %q: %w", key, err)
	}
	return c.check(ctx, pendingCopy(pod), node, v)
}

// check runs PreFilter and Filter for a pending pod on node, in the cluster as v shows it, and
// returns the rejection, if any, as the scheduler would record it for that node.
func (c *checker) check(ctx context.Context, pod *corev1.Pod, node string, v *view) (*Rejection, error) {
	c.lister.current = v
	key := podKey(pod)
	state := framework.NewCycleState()

	result, status, narrowing := c.fw.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return nil, &PluginError{Pod: key, Node: node, Plugin: status.Plugin(), Err: status.AsError()}
		}
		plugin := status.Plugin()
		if plugin == "" {
			// The framework itself rejects when the PreFilterResults leave no node at all.
			plugin = strings.Join(sets.List(narrowing), ",")
		}
		return &Rejection{Pod: key, Node: node, Plugin: plugin, Reasons: status.Reasons()}, nil
	}
	if !result.AllNodes() && !result.NodeNames.Has(node) {
		// The scheduler gives every node left out of the PreFilterResult this status.
		plugins := sets.List(narrowing)
		return &Rejection{
			Pod:     key,
			Node:    node,
			Plugin:  strings.Join(plugins, ","),
			Reasons: []string{fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", plugins)},
		}, nil
	}

	status = c.fw.RunFilterPlugins(ctx, state, pod, v.get(node))
	switch {
	case status.IsSuccess():
		return nil, nil
	case status.IsRejected():
		return &Rejection{Pod: key, Node: node, Plugin: status.Plugin(), Reasons: status.Reasons()}, nil
	default:
		return nil, &PluginError{Pod: key, Node: node, Plugin: status.Plugin(), Err: status.AsError()}
	}
}

// newDRAManager builds the DynamicResources plugin's view of claims, slices and device classes the
// way kube-scheduler does, or returns nil when the feature is off.
func newDRAManager(ctx context.Context, factory informers.SharedInformerFactory, client *fake.Clientset) (fwk.SharedDRAManager, error) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		return nil, nil
	}
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	opts := resourceslicetracker.Options{
		EnableDeviceTaintRules:   utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
		EnableConsumableCapacity: utilfeature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		KubeClient:               client,
	}
	if opts.EnableDeviceTaintRules {
		opts.TaintInformer = factory.Resource().V1alpha3().DeviceTaintRules()
		opts.ClassInformer = factory.Resource().V1().DeviceClasses()
	}
	slices, err := resourceslicetracker.StartTracker(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the resource slice tracker: %w", err)
	}
	return dynamicresources.NewDRAManager(ctx, claims, slices, factory), nil
}

// clusterObjects returns the API objects the plugins read through informers: nodes, namespaces and
// storage. Pods are not among them: Filter plugins read pods from the snapshot only.
func clusterObjects(c Cluster, state *endState) []runtime.Object {
	var objs []runtime.Object
	for _, n := range c.Nodes {
		objs = append(objs, n)
	}
	named := sets.New[string]()
	for _, ns := range c.Namespaces {
		named.Insert(ns.Name)
		objs = append(objs, ns)
	}
	for _, ns := range state.namespaces {
		if !named.Has(ns) {
			objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:   ns,
				Labels: map[string]string{corev1.LabelMetadataName: ns},
			}})
		}
	}
	for _, o := range c.Claims {
		objs = append(objs, o)
	}
	for _, o := range c.Volumes {
		objs = append(objs, o)
	}
	for _, o := range c.StorageClasses {
		objs = append(objs, o)
	}
	for _, o := range c.CSINodes {
		objs = append(objs, o)
	}
	return objs
}

// preloaded are the kinds whose informers are static: the kinds of the cluster's objects, and the
// other kinds the default plugins read, which a Cluster never has and which stay empty.
var preloaded = []runtime.Object{
	&corev1.Node{},
	&corev1.Namespace{},
	&corev1.PersistentVolumeClaim{},
	&corev1.PersistentVolume{},
	&storagev1.StorageClass{},
	&storagev1.CSINode{},
	&corev1.Pod{},
	&corev1.Service{},
	&corev1.ReplicationController{},
	&appsv1.ReplicaSet{},
	&appsv1.StatefulSet{},
	&policyv1.PodDisruptionBudget{},
	&storagev1.CSIDriver{},
	&storagev1.CSIStorageCapacity{},
	&storagev1.VolumeAttachment{},
	&resourcev1.ResourceClaim{},
	&resourcev1.ResourceSlice{},
	&resourcev1.DeviceClass{},
}

// preloadAll registers a static informer for every preloaded kind, holding the objects of that kind.
func preloadAll(factory informers.SharedInformerFactory, objs []runtime.Object) error {
	byType := make(map[reflect.Type][]runtime.Object)
	for _, o := range objs {
		byType[reflect.TypeOf(o)] = append(byType[reflect.TypeOf(o)], o)
	}
	var errs []error
	for _, example := range preloaded {
		errs = append(errs, preload(factory, example, byType[reflect.TypeOf(example)]))
	}
	return errors.Join(errs...)
}
