package overlay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// ResyncInterval is how often the conditions are computed again without a change of a
// NodeOverlay or NodePool: instance types and offerings change with the catalog.
const ResyncInterval = 5 * time.Minute

// InstanceTyper returns a NodePool's instance types as the cloud sells them, before any
// overlay.
type InstanceTyper interface {
	InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error)
}

// Controller writes the ValidationSucceeded and Ready conditions of every NodeOverlay. A
// conflict involves two overlays, so every change recomputes them all.
type Controller struct {
	kube  client.Client
	types InstanceTyper
}

// NewController returns a Controller that reads instance types from types (not overlaid).
func NewController(kube client.Client, types InstanceTyper) *Controller {
	return &Controller{kube: kube, types: types}
}

// allOverlays is the one request every event maps to.
var allOverlays = reconcile.Request{NamespacedName: types.NamespacedName{Name: "nodeoverlays"}}

// Register adds the controller to the manager: it follows NodeOverlays and NodePools (an
// overlay may select by karpenter.sh/nodepool, and a NodePool decides the instance types).
func (c *Controller) Register(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{allOverlays}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("nodeoverlay.status").
		Watches(&v1alpha1.NodeOverlay{}, all).
		Watches(&karpv1.NodePool{}, all).
		Complete(c)
}

// Reconcile computes the conditions of every NodeOverlay and patches those that changed.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	overlays := &v1alpha1.NodeOverlayList{}
	if err := c.kube.List(ctx, overlays); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeOverlays: %w", err)
	}
	if len(overlays.Items) == 0 {
		return reconcile.Result{}, nil
	}
	found, err := c.findings(ctx, overlays.Items)
	if err != nil {
		return reconcile.Result{}, err
	}
	for i := range overlays.Items {
		o := &overlays.Items[i]
		before := o.DeepCopy()
		SetConditions(o, found)
		if equality.Semantic.DeepEqual(before.Status, o.Status) {
			continue
		}
		if err := c.kube.Status().Patch(ctx, o, client.MergeFrom(before)); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return reconcile.Result{}, fmt.Errorf("patching status of NodeOverlay %s: %w", o.Name, err)
		}
		log.FromContext(ctx).V(1).Info("updated NodeOverlay status", "nodeOverlay", o.Name, "ready", meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionTypeReady))
	}
	return reconcile.Result{RequeueAfter: ResyncInterval}, nil
}

// Findings are the conflicts and clamped prices of a set of overlays over every NodePool.
type Findings struct {
	Conflicts []Conflict
	Clamped   []Clamp
}

// findings applies the overlays to the instance types of every NodePool. A NodePool whose
// node class is not ready has no instance types yet and is skipped.
func (c *Controller) findings(ctx context.Context, overlays []v1alpha1.NodeOverlay) (Findings, error) {
	pools := &karpv1.NodePoolList{}
	if err := c.kube.List(ctx, pools); err != nil {
		return Findings{}, fmt.Errorf("listing NodePools: %w", err)
	}
	var out Findings
	for i := range pools.Items {
		np := &pools.Items[i]
		its, err := c.types.InstanceTypes(ctx, np)
		if cloudprovider.IsNodeClassNotReadyError(err) {
			continue
		}
		if err != nil {
			return Findings{}, fmt.Errorf("reading the instance types of NodePool %s: %w", np.Name, err)
		}
		r := Apply(overlays, np.Name, its)
		out.Conflicts = append(out.Conflicts, r.Conflicts...)
		out.Clamped = append(out.Clamped, r.Clamped...)
	}
	slices.SortFunc(out.Conflicts, compareConflicts)
	out.Conflicts = slices.CompactFunc(out.Conflicts, func(a, b Conflict) bool { return compareConflicts(a, b) == 0 })
	slices.SortFunc(out.Clamped, compareClamps)
	out.Clamped = slices.CompactFunc(out.Clamped, func(a, b Clamp) bool { return compareClamps(a, b) == 0 })
	return out, nil
}

// SetConditions sets the overlay's ValidationSucceeded and Ready conditions from its spec and
// the findings: Ready is False when it does not validate or conflicts with another overlay.
func SetConditions(o *v1alpha1.NodeOverlay, found Findings) {
	set := func(conditionType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{
			Type: conditionType, Status: status, Reason: reason, Message: message, ObservedGeneration: o.Generation,
		})
	}
	if err := Validate(o); err != nil {
		set(v1alpha1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonValidationFailed, err.Error())
		set(v1alpha1.ConditionTypeReady, metav1.ConditionFalse, v1alpha1.ReasonValidationFailed, err.Error())
		return
	}
	set(v1alpha1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, v1alpha1.ConditionTypeValidationSucceeded, "")
	var conflicts []string
	for _, c := range found.Conflicts {
		if c.Overlay == o.Name || c.Other == o.Name {
			conflicts = append(conflicts, c.Message(o.Name))
		}
	}
	if len(conflicts) > 0 {
		set(v1alpha1.ConditionTypeReady, metav1.ConditionFalse, v1alpha1.ReasonConflict, strings.Join(conflicts, "; "))
		return
	}
	var clamped []Clamp
	for _, c := range found.Clamped {
		if c.Overlay == o.Name {
			clamped = append(clamped, c)
		}
	}
	message := ""
	if len(clamped) > 0 {
		message = fmt.Sprintf("the price of %d offerings would fall below 0 and is 0 (%s in %s, %s first)", len(clamped), clamped[0].InstanceType, clamped[0].Zone, clamped[0].CapacityType)
	}
	set(v1alpha1.ConditionTypeReady, metav1.ConditionTrue, v1alpha1.ConditionTypeReady, message)
}
