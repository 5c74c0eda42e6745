// Package expiration deletes NodeClaims that have lived longer than their spec.expireAfter,
// so that their nodes are replaced by ones made from the current NodePool and node class.
// As in Karpenter v1, expiration is not gated by disruption budgets: the NodeClaim's
// termination drains the node, honouring PodDisruptionBudgets until its termination grace
// period ends.
package expiration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
)

// ReasonExpired is the event reason on a NodeClaim deleted for its age.
const ReasonExpired = "Expired"

// metricReason is the reason label of metrics.NodeClaimsDisrupted.
const metricReason = "expired"

// Controller deletes expired NodeClaims.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder
	clock    clock.PassiveClock
}

// NewController returns a Controller; clk defaults to the real clock.
func NewController(kube client.Client, recorder record.EventRecorder, clk clock.PassiveClock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, recorder: recorder, clock: clk}
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclaim.expiration").
		For(&karpv1.NodeClaim{}).
		Complete(c)
}

// Reconcile deletes the NodeClaim once it has expired, and otherwise comes back when it will.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	expireAfter := nc.Spec.ExpireAfter.Duration
	if nc.DeletionTimestamp != nil || expireAfter == nil {
		return reconcile.Result{}, nil
	}
	if left := nc.CreationTimestamp.Add(*expireAfter).Sub(c.clock.Now()); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	// Preconditioned on the UID: a NodeClaim recreated under the same name is not this one.
	if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("deleting expired NodeClaim %s: %w", nc.Name, err))
	}
	nodePool := nc.Labels[karpv1.NodePoolLabelKey]
	metrics.NodeClaimDisrupted(nc, metricReason, "")
	c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonExpired, "expired after %s; replacing", karpv1.ShortDuration(*expireAfter))
	log.FromContext(ctx).Info("deleted expired NodeClaim", "nodeClaim", nc.Name, "nodePool", nodePool,
		"expireAfter", karpv1.ShortDuration(*expireAfter), "age", c.clock.Since(nc.CreationTimestamp.Time).Round(time.Second).String())
	return reconcile.Result{}, nil
}
