package nomination

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// Controller keeps a Tracker in line with NodeClaims: plans recorded on them, node names
// once launched, and withdrawals when they go away. It records Nominated on pods whose
// node name becomes known.
type Controller struct {
	kube     client.Client
	tracker  *Tracker
	recorder record.EventRecorder
}

// NewController returns a Controller.
func NewController(kube client.Client, tracker *Tracker, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, tracker: tracker, recorder: recorder}
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nomination").For(&karpv1.NodeClaim{}).Complete(c)
}

// Reconcile syncs the tracker with one NodeClaim.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			c.tracker.DropClaim(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		c.tracker.DropClaim(nc.Name)
		return reconcile.Result{}, nil
	}
	awaiting := c.awaitingNode(nc.Name)
	if err := c.tracker.Sync(nc, func(p Pod) bool { return c.pending(ctx, p) }); err != nil {
		return reconcile.Result{}, err
	}
	c.recordNominated(ctx, nc.Name, awaiting)
	return reconcile.Result{}, nil
}

// SyncAll brings the tracker in line with every NodeClaim at once, as a new leader must
// before it plans.
func (c *Controller) SyncAll(ctx context.Context) error {
	list := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, list); err != nil {
		return fmt.Errorf("listing NodeClaims to recover their plans: %w", err)
	}
	for i := range list.Items {
		nc := &list.Items[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if err := c.tracker.Sync(nc, func(p Pod) bool { return c.pending(ctx, p) }); err != nil {
			return err
		}
	}
	return nil
}

// pending reports whether the pod still exists and is not bound.
func (c *Controller) pending(ctx context.Context, p Pod) bool {
	pod := &corev1.Pod{}
	if err := c.kube.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, pod); err != nil {
		return false
	}
	return pod.UID == p.UID && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil
}
