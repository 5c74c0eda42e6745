// Package nodepool keeps NodePool status current: the resources its NodeClaims hold, and
// whether it can be provisioned from (NodeClassReady, ValidationSucceeded, Ready). It
// records an event when a NodePool's node class stops being ready and when its usage
// reaches one of its limits.
package nodepool

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Event reasons on NodePools.
const (
	// ReasonNodeClassNotReady: the NodeClassReady condition turned False.
	ReasonNodeClassNotReady = "NodeClassNotReady"
	// ReasonLimitsReached: the NodePool's usage reached one of its limits.
	ReasonLimitsReached = "LimitsReached"
)

// ResourceNodes is the status resource that counts a NodePool's NodeClaims.
const ResourceNodes corev1.ResourceName = "nodes"

// Controller writes NodePool status.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder

	mu sync.Mutex
	// reached holds, per NodePool name, the limits its usage was last seen to meet, so that
	// LimitsReached is recorded once per transition.
	reached map[string]limitsSeen
}

// limitsSeen are the limits one NodePool (by UID, as a name can be reused) was seen to meet.
type limitsSeen struct {
	uid     types.UID
	reached map[corev1.ResourceName]bool
}

// NewController returns a Controller.
func NewController(kube client.Client, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, recorder: recorder, reached: map[string]limitsSeen{}}
}

// Register adds the controller to the manager: it follows NodePools, the NodeClaims
// launched from them and the EC2NodeClasses they refer to.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodepool.status").
		For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(nodePoolOf)).
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(c.nodePoolsUsing)).
		Complete(c)
}

// Reconcile computes one NodePool's status and patches it when it changed.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if client.IgnoreNotFound(err) == nil {
			c.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	claims := &karpv1.NodeClaimList{}
	// Read only: the cache's own objects, not a copy of the NodePool's NodeClaims at each
	// change of one of them.
	if err := c.kube.List(ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeClaims of NodePool %s: %w", np.Name, err)
	}
	classReady, classGeneration, err := c.nodeClassReady(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return reconcile.Result{}, err
	}
	before := np.DeepCopy()
	np.Status.Resources = Resources(claims.Items)
	np.Status.Nodes = ptr.To(int64(len(claims.Items)))
	np.Status.Price = Price(claims.Items)
	np.Status.NodeClassObservedGeneration = classGeneration
	validation := validate(np)
	setCondition(np, karpv1.ConditionTypeNodeClassReady, classReady)
	setCondition(np, karpv1.ConditionTypeValidationSucceeded, validation)
	setCondition(np, karpv1.ConditionTypeReady, ready(classReady, validation))
	if !equality.Semantic.DeepEqual(before.Status, np.Status) {
		if err := c.kube.Status().Patch(ctx, np, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, fmt.Errorf("patching status of NodePool %s: %w", np.Name, err)
		}
		log.FromContext(ctx).V(1).Info("updated NodePool status", "nodePool", np.Name, "resources", np.Status.Resources)
	}
	// Events follow the status written, so a reconcile whose patch lost a race records nothing.
	if was := meta.FindStatusCondition(before.Status.Conditions, karpv1.ConditionTypeNodeClassReady); classReady.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse) {
		c.recorder.Event(np, corev1.EventTypeWarning, ReasonNodeClassNotReady, classReady.Message)
	}
	c.recordLimits(np, before.Status.Resources)
	return reconcile.Result{}, nil
}

// Resources is the status.resources of a NodePool with these NodeClaims: the sum of what
// each counts against the limits (packing.ClaimedCapacity) and their number as "nodes".
func Resources(claims []karpv1.NodeClaim) corev1.ResourceList {
	total := corev1.ResourceList{ResourceNodes: *resource.NewQuantity(int64(len(claims)), resource.DecimalSI)}
	for i := range claims {
		for name, q := range packing.ClaimedCapacity(&claims[i]) {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return total
}

// Price is the status.price of a NodePool with these NodeClaims: the sum of what each costs
// (cloudprovider.NodeClaimPrice); nil when none has a price.
func Price(claims []karpv1.NodeClaim) *karpv1.Price {
	var total cloudprovider.PriceParts
	priced := false
	for i := range claims {
		if parts, ok := cloudprovider.NodeClaimPrice(&claims[i]); ok {
			total, priced = total.Plus(parts), true
		}
	}
	if !priced {
		return nil
	}
	return total.APIPrice()
}

// condition is a condition's outcome before it is stamped onto a NodePool.
type condition struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// nodeClassReady reports whether the node class exists and is Ready, and its generation.
func (c *Controller) nodeClassReady(ctx context.Context, ref *karpv1.NodeClassReference) (condition, int64, error) {
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return condition{metav1.ConditionFalse, "NodeClassNotSupported", nodeClassRefMessage(ref)}, 0, nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return condition{metav1.ConditionFalse, "NodeClassNotFound", fmt.Sprintf("EC2NodeClass %q not found", ref.Name)}, 0, nil
		}
		return condition{}, 0, fmt.Errorf("getting EC2NodeClass %s: %w", ref.Name, err)
	}
	if class.DeletionTimestamp != nil {
		return condition{metav1.ConditionFalse, "NodeClassTerminating", fmt.Sprintf("EC2NodeClass %q is being deleted", ref.Name)}, class.Generation, nil
	}
	r := meta.FindStatusCondition(class.Status.Conditions, awsv1.ConditionTypeReady)
	switch {
	case r == nil:
		return condition{metav1.ConditionUnknown, "AwaitingNodeClass", fmt.Sprintf("EC2NodeClass %q has not been resolved yet", ref.Name)}, class.Generation, nil
	case r.Status == metav1.ConditionTrue:
		return condition{metav1.ConditionTrue, "NodeClassReady", ""}, class.Generation, nil
	default:
		return condition{metav1.ConditionFalse, "NodeClassNotReady", fmt.Sprintf("EC2NodeClass %q is not ready: %s", ref.Name, r.Message)}, class.Generation, nil
	}
}

func nodeClassRefMessage(ref *karpv1.NodeClassReference) string {
	if ref == nil {
		return "nodeClassRef is not set"
	}
	return fmt.Sprintf("nodeClassRef %s/%s is not supported: use group %s, kind EC2NodeClass", ref.Group, ref.Kind, awsv1.Group)
}

// validate makes the checks the CRD schema cannot: a supported node class kind, limits
// that are not negative, and minValues no larger than the values an In requirement lists.
func validate(np *karpv1.NodePool) condition {
	var problems []string
	if ref := np.Spec.Template.Spec.NodeClassRef; ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		problems = append(problems, nodeClassRefMessage(ref))
	}
	for _, name := range sortedNames(corev1.ResourceList(np.Spec.Limits)) {
		if q := np.Spec.Limits[name]; q.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("limit %s is negative (%s)", name, q.String()))
		}
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues != nil && r.Operator == corev1.NodeSelectorOpIn && *r.MinValues > len(r.Values) {
			problems = append(problems, fmt.Sprintf("requirement %s asks for minValues %d but lists only %d values", r.Key, *r.MinValues, len(r.Values)))
		}
	}
	if len(problems) > 0 {
		return condition{metav1.ConditionFalse, "ValidationFailed", strings.Join(problems, "; ")}
	}
	return condition{metav1.ConditionTrue, "ValidationSucceeded", ""}
}

// ready is True when the node class is ready and validation succeeded, otherwise the first
// that is not.
func ready(conditions ...condition) condition {
	for _, c := range conditions {
		if c.Status != metav1.ConditionTrue {
			return c
		}
	}
	return condition{metav1.ConditionTrue, "Ready", ""}
}

func setCondition(np *karpv1.NodePool, conditionType string, c condition) {
	meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{
		Type: conditionType, Status: c.Status, Reason: c.Reason, Message: c.Message, ObservedGeneration: np.Generation,
	})
}

// recordLimits records LimitsReached for each limit the NodePool's usage meets now and did
// not meet when last seen. A NodePool seen for the first time since start is compared
// with the status it was read with, so a restart does not record its limits again.
func (c *Controller) recordLimits(np *karpv1.NodePool, previous corev1.ResourceList) {
	now := reachedLimits(corev1.ResourceList(np.Spec.Limits), np.Status.Resources)
	c.mu.Lock()
	seen, ok := c.reached[np.Name]
	was := seen.reached
	if !ok || seen.uid != np.UID {
		was = reachedLimits(corev1.ResourceList(np.Spec.Limits), previous)
	}
	c.reached[np.Name] = limitsSeen{uid: np.UID, reached: now}
	c.mu.Unlock()
	for _, name := range sortedNames(np.Spec.Limits) {
		if now[name] && !was[name] {
			used, limit := np.Status.Resources[name], np.Spec.Limits[name]
			c.recorder.Eventf(np, corev1.EventTypeWarning, ReasonLimitsReached, "NodePool %s reached its %s limit: %s of %s", np.Name, name, used.String(), limit.String())
		}
	}
}

// reachedLimits returns the limits that usage meets or exceeds.
func reachedLimits(limits, usage corev1.ResourceList) map[corev1.ResourceName]bool {
	out := map[corev1.ResourceName]bool{}
	for name, limit := range limits {
		if used, ok := usage[name]; ok && used.Cmp(limit) >= 0 {
			out[name] = true
		}
	}
	return out
}

// forget drops what the controller remembers of a deleted NodePool.
func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reached, name)
}

// nodePoolOf maps a NodeClaim to its NodePool.
func nodePoolOf(_ context.Context, o client.Object) []reconcile.Request {
	if name := o.GetLabels()[karpv1.NodePoolLabelKey]; name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	return nil
}

// nodePoolsUsing maps an EC2NodeClass to the NodePools that refer to it.
func (c *Controller) nodePoolsUsing(ctx context.Context, o client.Object) []reconcile.Request {
	pools := &karpv1.NodePoolList{}
	if err := c.kube.List(ctx, pools); err != nil {
		log.FromContext(ctx).Error(err, "listing NodePools that use an EC2NodeClass", "ec2NodeClass", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range pools.Items {
		if ref := pools.Items[i].Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() && ref.Group == awsv1.Group {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: pools.Items[i].Name}})
		}
	}
	return out
}

func sortedNames[V any](m map[corev1.ResourceName]V) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}
