// Package repair replaces nodes whose conditions stay unhealthy past their toleration
// (Karpenter's NodeRepair feature gate): a node that is not ready for 30 minutes, or whose
// node monitoring agent reports broken accelerators, storage, networking, kernel or
// container runtime. The NodeClaim is deleted with a termination timestamp of now, so its
// drain does not wait for PodDisruptionBudgets, as Karpenter's repair does: a broken node
// serves its pods no better by keeping them. A NodePool with more than a fifth of its nodes
// unhealthy is left alone, since replacing them would rarely help (a bad AMI, a zone
// outage) and could take the whole pool down at once.
package repair

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
)

// Event reasons.
const (
	// ReasonUnhealthy is on a NodeClaim and its node deleted for a condition held past its
	// toleration.
	ReasonUnhealthy = "Unhealthy"
	// ReasonRepairBlocked is on an unhealthy node that is not replaced because too many
	// nodes of its NodePool are unhealthy.
	ReasonRepairBlocked = "RepairBlocked"
)

// metricReason is the reason label of the disruption metrics.
const metricReason = "unhealthy"

// MaxUnhealthyPercent is the share of a NodePool's nodes that may be unhealthy for repair
// to go on, rounded up: one node of a pool of up to five, two of ten.
const MaxUnhealthyPercent = 20

// blockedRecheck is how soon a node left alone for its NodePool's health is looked at
// again: the other nodes' recovery does not trigger its reconcile.
const blockedRecheck = time.Minute

// Controller replaces unhealthy nodes.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder
	clock    clock.PassiveClock
	policies Policies
}

// NewController returns a Controller for policies; clk defaults to the real clock.
func NewController(kube client.Client, recorder record.EventRecorder, clk clock.PassiveClock, policies Policies) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, recorder: recorder, clock: clk, policies: policies}
}

// Register adds the controller to the manager: it watches the nodes of NodePools.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclaim.repair").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[karpv1.NodePoolLabelKey] != ""
		}))).
		Complete(c)
}

// Reconcile replaces the node once a condition has held past its toleration, and
// otherwise comes back when one will have.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pool := node.Labels[karpv1.NodePoolLabelKey]
	if pool == "" || node.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	policy, since, ok := c.unhealthy(node)
	if !ok {
		return reconcile.Result{}, nil
	}
	if left := since.Add(policy.Toleration).Sub(c.clock.Now()); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	nc, err := c.nodeClaimOf(ctx, node)
	if err != nil || nc == nil || nc.DeletionTimestamp != nil {
		return reconcile.Result{}, err
	}
	unhealthy, total, err := c.poolHealth(ctx, pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	if allowed := maxUnhealthy(total); unhealthy > allowed {
		c.recorder.Eventf(node, corev1.EventTypeWarning, ReasonRepairBlocked,
			"%s for %s, but %d of the %d nodes of NodePool %s are unhealthy, more than the %d repair may replace: not replacing it",
			policy.condition(), karpv1.ShortDuration(c.clock.Since(since).Round(time.Second)), unhealthy, total, pool, allowed)
		return reconcile.Result{RequeueAfter: blockedRecheck}, nil
	}
	return reconcile.Result{}, c.replace(ctx, node, nc, policy, since)
}

// unhealthy is the first policy whose condition the node has, and since when.
func (c *Controller) unhealthy(node *corev1.Node) (Policy, time.Time, bool) {
	for _, p := range c.policies {
		for _, cond := range node.Status.Conditions {
			if cond.Type == p.Type && cond.Status == p.Status {
				return p, cond.LastTransitionTime.Time, true
			}
		}
	}
	return Policy{}, time.Time{}, false
}

// replace deletes the node's NodeClaim with a termination timestamp of now.
func (c *Controller) replace(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, policy Policy, since time.Time) error {
	now := c.clock.Now()
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = now.UTC().Format(time.RFC3339)
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("marking NodeClaim %s for repair: %w", nc.Name, err))
	}
	// Preconditioned on the UID: a NodeClaim recreated under the same name is not this one.
	if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("deleting unhealthy NodeClaim %s: %w", nc.Name, err))
	}
	held := karpv1.ShortDuration(now.Sub(since).Round(time.Second))
	pool := node.Labels[karpv1.NodePoolLabelKey]
	metrics.NodeClaimDisrupted(nc, metricReason, "")
	metrics.NodeRepairs.WithLabelValues(pool, policy.condition()).Inc()
	msg := fmt.Sprintf("%s for %s (tolerated for %s); replacing the node without waiting for PodDisruptionBudgets", policy.condition(), held, karpv1.ShortDuration(policy.Toleration))
	c.recorder.Event(nc, corev1.EventTypeWarning, ReasonUnhealthy, msg)
	c.recorder.Event(node, corev1.EventTypeWarning, ReasonUnhealthy, msg)
	log.FromContext(ctx).Info("replacing unhealthy node", "node", node.Name, "nodeClaim", nc.Name, "nodePool", pool,
		"condition", policy.condition(), "for", held)
	return nil
}

// nodeClaimOf is the NodeClaim that owns the node (registration makes it the owner), nil
// for a node no NodeClaim owns.
func (c *Controller) nodeClaimOf(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	for _, ref := range node.OwnerReferences {
		if ref.Kind != "NodeClaim" || ref.APIVersion != karpv1.SchemeGroupVersion.String() {
			continue
		}
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		if nc.UID != ref.UID {
			return nil, nil
		}
		return nc, nil
	}
	return nil, nil
}

// poolHealth counts the NodePool's nodes, and those with any condition of the policies,
// tolerated yet or not, the nodes already being replaced among them.
func (c *Controller) poolHealth(ctx context.Context, pool string) (unhealthy, total int, err error) {
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return 0, 0, fmt.Errorf("listing the nodes of NodePool %s: %w", pool, err)
	}
	for i := range nodes.Items {
		if _, _, ok := c.unhealthy(&nodes.Items[i]); ok {
			unhealthy++
		}
	}
	return unhealthy, len(nodes.Items), nil
}

// maxUnhealthy is how many of a pool's total nodes may be unhealthy for repair to go on.
func maxUnhealthy(total int) int {
	return (total*MaxUnhealthyPercent + 99) / 100
}
