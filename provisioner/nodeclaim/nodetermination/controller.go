// Package nodetermination turns the deletion of a Node into the deletion of its NodeClaim.
// Registration puts the termination finalizer on every Node Tailor launched, so that
// `kubectl delete node` waits while the NodeClaim's termination cordons and drains the node
// and terminates its instance; that termination then releases the Node. A Node whose
// NodeClaim is gone keeps nothing: its finalizer is removed at once.
package nodetermination

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
)

// ReasonNodeDeleted is the event reason on a NodeClaim deleted because its Node was.
const ReasonNodeDeleted = "NodeDeleted"

// Controller deletes the NodeClaims of deleted Nodes.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder
}

// NewController returns a Controller. kube must be a cached client with
// nodeclaim.NodeClaimProviderIDIndex and nodeclaim.NodeProviderIDIndex.
func NewController(kube client.Client, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, recorder: recorder}
}

// Register adds the controller to the manager: it watches Nodes, and NodeClaims mapped to
// their Node by provider ID so that a Node whose NodeClaim went without it is released.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("node.termination").
		For(&corev1.Node{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(c.nodeClaimToNode)).
		Complete(c)
}

func (c *Controller) nodeClaimToNode(ctx context.Context, o client.Object) []reconcile.Request {
	nc := o.(*karpv1.NodeClaim)
	if nc.Status.ProviderID == "" {
		return nil
	}
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.MatchingFields{nodeclaim.NodeProviderIDIndex: nc.Status.ProviderID}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(nodes.Items))
	for i := range nodes.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nodes.Items[i])})
	}
	return out
}

// Reconcile deletes the NodeClaim of a Node being deleted, or releases the Node when it has
// no NodeClaim left.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("node", node.Name)
	claims := &karpv1.NodeClaimList{}
	if node.Spec.ProviderID != "" {
		if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.NodeClaimProviderIDIndex: node.Spec.ProviderID}); err != nil {
			return reconcile.Result{}, fmt.Errorf("finding NodeClaim of %s: %w", node.Spec.ProviderID, err)
		}
	}
	if len(claims.Items) == 0 {
		patch := client.MergeFrom(node.DeepCopy())
		controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer)
		if err := c.kube.Patch(ctx, node, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("releasing node %s: %w", node.Name, err))
		}
		logger.Info("released deleted node without a NodeClaim", "providerID", node.Spec.ProviderID)
		return reconcile.Result{}, nil
	}
	// The NodeClaim's termination releases the Node once the instance is gone.
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting NodeClaim %s of node %s: %w", nc.Name, node.Name, err)
		}
		c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonNodeDeleted, "node %s was deleted; terminating its instance", node.Name)
		logger.Info("deleted NodeClaim of deleted node", "nodeClaim", nc.Name)
	}
	return reconcile.Result{}, nil
}
