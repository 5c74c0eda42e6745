// Package lifecycle drives a NodeClaim from creation to a usable node: it launches the
// instance (Launched), matches the Node that joins with the instance's provider ID and syncs
// the NodeClaim's labels, annotations and taints onto it (Registered), and waits for the
// Node to be Ready with its startup taints gone (Initialized), as Karpenter v1 does.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
)

// Event reasons on NodeClaims.
const (
	ReasonLaunched             = "Launched"
	ReasonLaunchFailed         = "LaunchFailed"
	ReasonRegistered           = "Registered"
	ReasonInitialized          = "Initialized"
	ReasonNodeClassNotReady    = "NodeClassNotReady"
	ReasonInsufficientCapacity = "InsufficientCapacity"
	// ReasonSubnetsFull, on the NodePool: every subnet of its EC2NodeClass is out of free
	// IP addresses.
	ReasonSubnetsFull = "SubnetsFull"
	// ReasonMultipleNodesFound, on the NodeClaim and its Registered condition (False):
	// several Nodes have its instance's provider ID.
	ReasonMultipleNodesFound = "MultipleNodesFound"
)

// Launcher creates instances.
type Launcher interface {
	Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// Adopt returns the instance already launched for the NodeClaim, nil when there is none;
	// it launches nothing.
	Adopt(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
}

// inFlightPoll is how often a launch another sidecar began is looked for meanwhile.
const inFlightPoll = 5 * time.Second

// Controller reconciles NodeClaims through launch, registration and initialization.
type Controller struct {
	kube     client.Client
	launcher Launcher
	recorder record.EventRecorder
	clock    clock.WithTicker
	// failures space out the launches of a NodeClaim that keeps failing.
	failures *backoff.Failures
	// recorded holds the instances this controller recorded on NodeClaims, by NodeClaim
	// UID, until the cache shows them: a reconcile queued by the launch's own label patch
	// may read the NodeClaim before its status patch reaches the cache, and would otherwise
	// ask EC2 again (to adopt the instance just launched).
	recorded *recordedLaunches
	// began are the NodeClaims this controller began to launch, and when: a NodeClaim marked
	// launch-started and not here is another sidecar's launch.
	began *beganLaunches
}

// beganLaunches are the launches this controller began within nodeclaim.InFlightWindow.
type beganLaunches struct {
	mu sync.Mutex
	at map[types.UID]time.Time
}

func (b *beganLaunches) begin(uid types.UID, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, at := range b.at {
		if now.Sub(at) >= nodeclaim.InFlightWindow {
			delete(b.at, id)
		}
	}
	b.at[uid] = now
}

func (b *beganLaunches) has(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.at[uid]
	return ok
}

// recordedLaunches are launches recorded on NodeClaims and not seen in the cache yet.
type recordedLaunches struct {
	mu         sync.Mutex
	providerID map[types.UID]string
}

func (r *recordedLaunches) record(uid types.UID, providerID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.providerID[uid] = providerID
}

// pending reports whether the NodeClaim's launch was recorded and the copy read does not
// show it yet; once a copy shows it, or the NodeClaim is gone, it is forgotten.
func (r *recordedLaunches) pending(nc *karpv1.NodeClaim) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.providerID[nc.UID]; !ok {
		return false
	}
	if nc.Status.ProviderID != "" || nc.DeletionTimestamp != nil {
		delete(r.providerID, nc.UID)
		return false
	}
	return true
}

// NewController returns a Controller.
func NewController(kube client.Client, launcher Launcher, recorder record.EventRecorder, clk clock.WithTicker) *Controller {
	return &Controller{kube: kube, launcher: launcher, recorder: recorder, clock: clk, failures: backoff.New(clk, backoff.DefaultInitial, backoff.DefaultMax),
		recorded: &recordedLaunches{providerID: map[types.UID]string{}}, began: &beganLaunches{at: map[types.UID]time.Time{}}}
}

// Register adds the controller to the manager: it watches NodeClaims, and Nodes mapped to
// their NodeClaim by provider ID.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclaim.lifecycle").
		For(&karpv1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.nodeToNodeClaim), builder.WithPredicates()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10, NewQueue: backoff.NewQueue(c.clock)}).
		Complete(c)
}

func (c *Controller) nodeToNodeClaim(ctx context.Context, o client.Object) []reconcile.Request {
	node := o.(*corev1.Node)
	if node.Spec.ProviderID == "" {
		return nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.NodeClaimProviderIDIndex: node.Spec.ProviderID}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims.Items))
	for _, nc := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nc)})
	}
	return out
}

// Reconcile moves the NodeClaim one step along its lifecycle.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		if apierrors.IsNotFound(err) {
			c.failures.Forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if c.recorded.pending(nc) {
		// The status patch's own event reconciles it again once the cache has it.
		return reconcile.Result{RequeueAfter: staleLaunchRequeue}, nil
	}
	if nc.DeletionTimestamp != nil {
		c.failures.Forget(req.Name)
		if _, inFlight := nodeclaim.LaunchInFlight(nc, c.clock.Now()); inFlight && c.began.has(nc.UID) {
			return c.recordForTermination(ctx, nc)
		}
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("nodeClaim", nc.Name))
	switch {
	case nc.Status.ProviderID == "":
		return c.launch(ctx, nc)
	case !nodeclaim.IsTrue(nc, karpv1.ConditionTypeRegistered):
		return c.register(ctx, nc)
	case !nodeclaim.IsTrue(nc, karpv1.ConditionTypeInitialized):
		return c.initialize(ctx, nc)
	}
	return reconcile.Result{}, nil
}

// staleLaunchRequeue is when a NodeClaim read without the launch just recorded on it is
// looked at again, should the status patch's event not come.
const staleLaunchRequeue = 5 * time.Second

// recordOnNodePool records a warning on the NodeClaim's NodePool, for a failure no NodeClaim
// of the pool escapes.
func (c *Controller) recordOnNodePool(ctx context.Context, nc *karpv1.NodeClaim, reason, message string) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Labels[karpv1.NodePoolLabelKey]}, np); err != nil {
		log.FromContext(ctx).V(1).Info("not recording on the NodePool: reading it failed", "nodePool", nc.Labels[karpv1.NodePoolLabelKey], "error", err.Error())
		return
	}
	c.recorder.Event(np, corev1.EventTypeWarning, reason, message)
}

// launch creates the instance and records it. A NodeClaim no offering can satisfy is
// deleted, so its pods are planned again. A launch that fails otherwise is tried again after
// a wait that doubles with each failure, up to five minutes, whatever triggers a reconcile
// meanwhile.
func (c *Controller) launch(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if wait := c.failures.Wait(nc.Name, string(nc.UID)); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	// A launch runs to its end even while the sidecar shuts down, so that the instance it
	// creates is recorded on the NodeClaim, not left for a restart to adopt.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeclaim.LaunchTimeout)
	defer cancel()
	logger := log.FromContext(ctx)
	launched, err := c.launchOrAdopt(ctx, nc)
	switch {
	case errors.Is(err, errInFlight):
		return reconcile.Result{RequeueAfter: inFlightPoll}, nil
	case apierrors.IsConflict(err):
		return reconcile.Result{Requeue: true}, nil
	case cloudprovider.IsInsufficientCapacityError(err):
		metrics.LaunchErrors.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], ReasonInsufficientCapacity).Inc()
		c.recorder.Event(nc, corev1.EventTypeWarning, ReasonInsufficientCapacity, cloudprovider.Message(err))
		if errors.Is(err, cloudprovider.ErrSubnetsFull) {
			c.recordOnNodePool(ctx, nc, ReasonSubnetsFull, cloudprovider.Message(err))
		}
		logger.Info("no capacity for NodeClaim, deleting it so its pods are planned again", "error", err.Error())
		c.failures.Forget(nc.Name)
		if err := c.kube.Delete(ctx, nc); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		metrics.KarpenterNodeClaimDisrupted(nc, metrics.ReasonInsufficientCapacity, "")
		return reconcile.Result{}, nil
	case cloudprovider.IsNodeClassNotReadyError(err):
		return c.launchFailed(ctx, nc, ReasonNodeClassNotReady, err)
	case err != nil:
		return c.launchFailed(ctx, nc, ReasonLaunchFailed, err)
	}
	c.failures.Forget(nc.Name)
	// Labels first: they are metadata, the rest is status. The patch is made against the
	// version read, so that a reconcile of a stale copy, which found the instance the
	// previous one launched (Create is idempotent), records nothing twice.
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	if _, ok := launched.Labels[karpv1.CapacityReservationIDLabelKey]; !ok {
		// Planned into a capacity reservation that was full: launched outside it.
		delete(nc.Labels, karpv1.CapacityReservationIDLabelKey)
		delete(nc.Labels, karpv1.CapacityReservationTypeLabelKey)
	}
	for k, v := range launched.Labels {
		nc.Labels[k] = v
	}
	if len(launched.Annotations) > 0 && nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	for k, v := range launched.Annotations {
		nc.Annotations[k] = v
	}
	delete(nc.Annotations, nodeclaim.LaunchStartedAnnotationKey)
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		if apierrors.IsConflict(err) {
			logger.V(1).Info("NodeClaim changed since it was read; reading it again", "providerID", launched.Status.ProviderID)
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, fmt.Errorf("labelling launched NodeClaim: %w", err)
	}
	statusPatch := client.MergeFrom(nc.DeepCopy())
	nc.Status.ProviderID = launched.Status.ProviderID
	nc.Status.NodeName = launched.Status.NodeName
	nc.Status.ImageID = launched.Status.ImageID
	nc.Status.Capacity = launched.Status.Capacity
	nc.Status.Allocatable = launched.Status.Allocatable
	nc.Status.Price = launchedPrice(nc, launched)
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, ReasonLaunched, "")
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, reasonNodeNotFound, messageNodeNotFound)
	if err := c.kube.Status().Patch(ctx, nc, statusPatch); err != nil {
		return reconcile.Result{}, fmt.Errorf("recording launched instance %s: %w", launched.Status.ProviderID, err)
	}
	c.recorded.record(nc.UID, nc.Status.ProviderID)
	metrics.NodeClaimsLaunched.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[corev1.LabelInstanceTypeStable],
		nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
	c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonLaunched, "launched %s %s in %s as %s",
		nc.Labels[karpv1.CapacityTypeLabelKey], nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Status.ProviderID)
	logger.Info("launched NodeClaim", "providerID", nc.Status.ProviderID, "node", nc.Status.NodeName,
		"instanceType", nc.Labels[corev1.LabelInstanceTypeStable], "zone", nc.Labels[corev1.LabelTopologyZone],
		"capacityType", nc.Labels[karpv1.CapacityTypeLabelKey])
	return reconcile.Result{}, nil
}

// errInFlight: another sidecar's launch of the NodeClaim may still be in flight.
var errInFlight = errors.New("a launch another sidecar began may still be in flight")

// launchOrAdopt launches the NodeClaim's instance, marking when the launch began. A
// NodeClaim whose launch another sidecar began within nodeclaim.InFlightWindow is only
// adopted: its instance once the cloud shows it, errInFlight until then.
func (c *Controller) launchOrAdopt(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	now := c.clock.Now()
	if started, inFlight := nodeclaim.LaunchInFlight(nc, now); inFlight && !c.began.has(nc.UID) {
		launched, err := c.launcher.Adopt(ctx, nc)
		if err != nil || launched != nil {
			return launched, err
		}
		log.FromContext(ctx).V(1).Info("waiting for the launch another sidecar began", "started", started)
		return nil, errInFlight
	}
	// Against the version read: a stale copy launches nothing.
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	metav1.SetMetaDataAnnotation(&nc.ObjectMeta, nodeclaim.LaunchStartedAnnotationKey, now.UTC().Format(time.RFC3339))
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return nil, fmt.Errorf("marking the launch of NodeClaim %s: %w", nc.Name, err)
	}
	c.began.begin(nc.UID, now)
	launched, err := c.launcher.Create(ctx, nc)
	if err != nil {
		// The launch is over: a sidecar that takes over may launch again at once.
		patch := client.MergeFrom(nc.DeepCopy())
		delete(nc.Annotations, nodeclaim.LaunchStartedAnnotationKey)
		if perr := c.kube.Patch(ctx, nc, patch); client.IgnoreNotFound(perr) != nil {
			log.FromContext(ctx).V(1).Info("could not unmark the failed launch", "error", perr.Error())
		}
	}
	return launched, err
}

// recordForTermination records on a NodeClaim deleted while this controller launched it the
// instance the launch created (its label patch found the NodeClaim changed by the deletion),
// so that termination ends that instance by its provider ID at once instead of waiting out
// the launch's in-flight window.
func (c *Controller) recordForTermination(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	launched, err := c.launcher.Adopt(ctx, nc)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("looking up the instance launched for deleted NodeClaim %s: %w", nc.Name, err)
	}
	if launched == nil {
		// The launch failed, or the cloud does not show its instance yet.
		return reconcile.Result{RequeueAfter: inFlightPoll}, nil
	}
	patch := client.MergeFrom(nc.DeepCopy())
	nc.Status.ProviderID = launched.Status.ProviderID
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("recording the instance of deleted NodeClaim %s: %w", nc.Name, err))
	}
	log.FromContext(ctx).Info("recorded the instance launched for a NodeClaim deleted during its launch, for termination", "providerID", nc.Status.ProviderID)
	return reconcile.Result{}, nil
}

// launchFailed records a failed launch: a Warning event and the Launched condition
// (Unknown, as Karpenter's, since the launch is tried again), whose message stays the same
// from one attempt to the next so that the status is written once, and the full error in
// the log. It returns when to try again.
func (c *Controller) launchFailed(ctx context.Context, nc *karpv1.NodeClaim, reason string, cause error) (reconcile.Result, error) {
	wait := c.failures.Failed(nc.Name, string(nc.UID))
	message := cloudprovider.Message(cause)
	metrics.LaunchErrors.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], reason).Inc()
	c.recorder.Event(nc, corev1.EventTypeWarning, reason, message)
	log.FromContext(ctx).Error(cause, "launching NodeClaim failed", "reason", reason, "retryIn", wait.String())
	before := nc.DeepCopy()
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionUnknown, reason, message)
	if err := c.patchStatus(ctx, before, nc); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("recording launch failure: %w", err)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// patchStatus writes the NodeClaim's status when it differs from before's.
func (c *Controller) patchStatus(ctx context.Context, before, nc *karpv1.NodeClaim) error {
	if equality.Semantic.DeepEqual(before.Status, nc.Status) {
		return nil
	}
	return c.kube.Status().Patch(ctx, nc, client.MergeFrom(before))
}

// Reasons and messages of the Registered and Initialized conditions while they wait, Karpenter's.
const (
	reasonNodeNotFound          = "NodeNotFound"
	messageNodeNotFound         = "Node not registered with cluster"
	reasonNodeNotReady          = "NodeNotReady"
	reasonStartupTaintsExist    = "StartupTaintsExist"
	reasonEphemeralTaintsExist  = "KnownEphemeralTaintsExist"
	reasonResourceNotRegistered = "ResourceNotRegistered"
)

// register finds the NodeClaim's Node, syncs the NodeClaim onto it (syncNode) and lifts
// the unregistered taint so pods may land.
func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.MatchingFields{nodeclaim.NodeProviderIDIndex: nc.Status.ProviderID}); err != nil {
		return reconcile.Result{}, fmt.Errorf("finding node of %s: %w", nc.Status.ProviderID, err)
	}
	switch len(nodes.Items) {
	case 0:
		return reconcile.Result{}, nil
	case 1:
	default:
		before := nc.DeepCopy()
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionFalse, ReasonMultipleNodesFound, "Invariant violated, matched multiple nodes")
		if err := c.patchStatus(ctx, before, nc); err != nil {
			return reconcile.Result{}, fmt.Errorf("recording multiple nodes: %w", err)
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonMultipleNodesFound, "%d nodes have provider ID %s", len(nodes.Items), nc.Status.ProviderID)
		return reconcile.Result{}, nil
	}
	node := &nodes.Items[0]
	// Against the version read: a merge patch replaces the taints and finalizers lists whole.
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	syncNode(nc, node)
	if err := c.kube.Patch(ctx, node, patch); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, fmt.Errorf("registering node %s: %w", node.Name, err)
	}
	// Against the version read, so a reconcile of a stale copy records nothing twice.
	statusPatch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	nc.Status.NodeName = node.Name
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, ReasonRegistered, "")
	if err := c.kube.Status().Patch(ctx, nc, statusPatch); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, fmt.Errorf("recording registration: %w", err)
	}
	metrics.NodeClaimsRegistered.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey]).Inc()
	metrics.KarpenterNodesCreated.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[corev1.LabelTopologyZone]).Inc()
	c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonRegistered, "node %s joined", node.Name)
	log.FromContext(ctx).Info("registered NodeClaim", "node", node.Name)
	return reconcile.Result{}, nil
}

// syncNode makes the node the NodeClaim's, as Karpenter v1's registration does: the
// NodeClaim's labels and annotations (its NodePool template's, the labels of the template's
// single-valued requirements and of the instance launched) override the node's, its taints
// and startup taints are added unless the node is labelled karpenter.sh/do-not-sync-taints,
// the unregistered taint is lifted, the node is labelled registered, owned by the NodeClaim
// and held by the termination finalizer. Tailor's own bookkeeping annotations (tailor.sh/)
// stay on the NodeClaim.
func syncNode(nc *karpv1.NodeClaim, node *corev1.Node) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	maps.Copy(node.Labels, nc.Labels)
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	for k, v := range nc.Annotations {
		if strings.HasPrefix(k, tailorAnnotationPrefix) {
			continue
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[k] = v
	}
	if node.Labels[karpv1.NodeDoNotSyncTaintsLabelKey] != "true" {
		node.Spec.Taints = mergeTaints(node.Spec.Taints, nc.Spec.Taints)
		node.Spec.Taints = mergeTaints(node.Spec.Taints, nc.Spec.StartupTaints)
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.MatchTaint(&karpv1.UnregisteredNoExecuteTaint)
	})
	node.OwnerReferences = ownedBy(node.OwnerReferences, nc)
	// `kubectl delete node` then waits for the NodeClaim's termination (see nodetermination);
	// a Node already being deleted takes no new finalizer.
	if node.DeletionTimestamp == nil {
		controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
	}
}

// tailorAnnotationPrefix is the domain of the annotations Tailor keeps on NodeClaims for its
// own use (planned pods, launch template, interruption deadline, ...).
const tailorAnnotationPrefix = "tailor.sh/"

// mergeTaints adds the taints the node lacks (by key and effect), leaving those it has as
// they are.
func mergeTaints(have, want []corev1.Taint) []corev1.Taint {
	for _, t := range want {
		if !slices.ContainsFunc(have, func(h corev1.Taint) bool { return h.MatchTaint(&t) }) {
			have = append(have, t)
		}
	}
	return have
}

// ownedBy makes the NodeClaim an owner of the node, so deleting the NodeClaim deletes it.
func ownedBy(refs []metav1.OwnerReference, nc *karpv1.NodeClaim) []metav1.OwnerReference {
	for _, r := range refs {
		if r.UID == nc.UID {
			return refs
		}
	}
	return append(refs, metav1.OwnerReference{
		APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID,
		BlockOwnerDeletion: ptr.To(true),
	})
}

// ephemeralTaints are put on every new node by the Kubernetes control plane (the node
// lifecycle controller, a cloud controller manager) or by Tailor itself, and lifted without
// anyone's help once the node is up. Until they are gone the node takes no pods.
var ephemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule},
	karpv1.UnregisteredNoExecuteTaint,
}

// initialize marks the NodeClaim Initialized once its node is Ready, its startup and
// ephemeral taints are gone and every extended resource it was planned for is reported:
// from then on the node takes the pods planned onto it. Until then the Initialized
// condition says what it waits for.
func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	before := nc.DeepCopy()
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("reading node %s: %w", nc.Status.NodeName, err)
		}
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, reasonNodeNotFound, messageNodeNotFound)
		return reconcile.Result{}, client.IgnoreNotFound(c.patchStatus(ctx, before, nc))
	}
	if reason, message := notInitialized(nc, node); reason != "" {
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, reason, message)
		return reconcile.Result{}, client.IgnoreNotFound(c.patchStatus(ctx, before, nc))
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[karpv1.NodeInitializedLabelKey] = "true"
	if err := c.kube.Patch(ctx, node, patch); err != nil {
		return reconcile.Result{}, fmt.Errorf("labelling node %s initialized: %w", node.Name, err)
	}
	statusPatch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, ReasonInitialized, "")
	if err := c.kube.Status().Patch(ctx, nc, statusPatch); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, fmt.Errorf("recording initialization: %w", err)
	}
	metrics.NodeClaimsInitialized.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey]).Inc()
	c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonInitialized, "node %s is ready", node.Name)
	log.FromContext(ctx).Info("initialized NodeClaim", "node", node.Name, "sinceCreation", c.clock.Since(nc.CreationTimestamp.Time).Round(time.Millisecond).String())
	return reconcile.Result{}, nil
}

// notInitialized returns the reason and message of the Initialized condition while the
// node is not initialized, Karpenter's, or "" once it is.
func notInitialized(nc *karpv1.NodeClaim, node *corev1.Node) (reason, message string) {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return reasonNodeNotReady, "Node status is NotReady"
	}
	for _, st := range nc.Spec.StartupTaints {
		for _, t := range node.Spec.Taints {
			if t.MatchTaint(&st) {
				return reasonStartupTaintsExist, fmt.Sprintf("StartupTaint %q still exists", t.ToString())
			}
		}
	}
	for _, et := range ephemeralTaints {
		for _, t := range node.Spec.Taints {
			if t.MatchTaint(&et) {
				return reasonEphemeralTaintsExist, fmt.Sprintf("KnownEphemeralTaint %q still exists", t.ToString())
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(nc.Spec.Resources.Requests)) {
		if q := nc.Spec.Resources.Requests[name]; name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourcePods || name == corev1.ResourceEphemeralStorage || q.IsZero() {
			continue
		}
		if have, ok := node.Status.Allocatable[name]; !ok || have.IsZero() {
			return reasonResourceNotRegistered, fmt.Sprintf("Resource %q was requested but not registered", name)
		}
	}
	return "", ""
}

// launchedPrice is the launched node's price, the DaemonSets' share of its instance split
// off as the NodeClaim's planned price split it.
func launchedPrice(nc, launched *karpv1.NodeClaim) *karpv1.Price {
	if launched.Status.Price == nil {
		return nil
	}
	parts, err := cloudprovider.PartsOf(launched.Status.Price)
	if err != nil {
		return launched.Status.Price
	}
	if planned, ok := cloudprovider.PlannedPrice(nc); ok {
		parts = parts.WithDaemonSetShare(planned)
	}
	return parts.APIPrice()
}
