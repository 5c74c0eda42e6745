// Package termination finishes deleted NodeClaims: it cordons the node, drains it through
// the Eviction API (PodDisruptionBudgets hold until the NodeClaim's termination grace period
// ends), waits for its volumes to detach, terminates the instance, waits until the cloud
// reports it gone, deletes the Node and only then releases the NodeClaim's finalizer, so no
// instance outlives its NodeClaim.
package termination

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drain"
)

// Event reasons.
const (
	// ReasonTerminated: the NodeClaim's instance is gone.
	ReasonTerminated = "Terminated"
	// ReasonDrainBlocked: pods that must leave the node cannot be evicted yet.
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonInstanceGoneDuringDrain: the drain waited on pods whose instance is gone; the
	// node goes without them, and the pods with it.
	ReasonInstanceGoneDuringDrain = "InstanceGoneDuringDrain"
)

// pollInterval is how often an instance being terminated is checked.
const pollInterval = 2 * time.Second

// Terminator terminates instances; Delete returns a NodeClaimNotFoundError once the instance
// is gone, and Get returns one for an instance gone.
type Terminator interface {
	Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
}

// Drainer empties a node before its instance goes.
type Drainer interface {
	Drain(ctx context.Context, node string, deadline, now time.Time) (drain.Result, error)
	VolumesAttached(ctx context.Context, node string) ([]string, error)
}

// Controller finishes deleted NodeClaims.
type Controller struct {
	kube client.Client
	// api reads the API server itself, for what the cache may not show yet.
	api        client.Reader
	terminator Terminator
	drainer    Drainer
	recorder   record.EventRecorder
	clock      clock.Clock
	// failures space out the attempts to terminate an instance that the cloud refuses.
	failures *backoff.Failures
	// blocked are the NodeClaims whose drain waits on pods it may not evict yet.
	blocked *blockedDrains
}

// NewController returns a Controller. kube reads through the cache; api reads the API
// server without one (a manager's APIReader).
func NewController(kube client.Client, api client.Reader, terminator Terminator, drainer Drainer, recorder record.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{
		kube: kube, api: api, terminator: terminator, drainer: drainer, recorder: recorder, clock: clk,
		failures: backoff.New(clk, backoff.DefaultInitial, backoff.DefaultMax),
		blocked:  newBlockedDrains(drainBlockedMetric),
	}
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclaim.termination").
		For(&karpv1.NodeClaim{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(c)
}

// Reconcile terminates a deleted NodeClaim's instance and then releases it.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		if apierrors.IsNotFound(err) {
			c.failures.Forget(req.Name)
			c.blocked.set(req.Name, "", false)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	if wait := c.failures.Wait(nc.Name, string(nc.UID)); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	logger := log.FromContext(ctx).WithValues("nodeClaim", nc.Name)
	// A node the cache does not show yet is still drained before its instance goes.
	node, err := nodeclaim.LiveNodeOf(ctx, c.kube, c.api, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node != nil {
		if err := nodeclaim.Cordon(ctx, c.kube, node); err != nil {
			return reconcile.Result{}, err
		}
		if wait, err := c.drain(ctx, nc, node); err != nil || wait {
			return reconcile.Result{RequeueAfter: pollInterval}, err
		}
	}
	if err := c.terminator.Delete(ctx, nc); err != nil {
		if !cloudprovider.IsNodeClaimNotFoundError(err) {
			// Refused (a denied permission, an outage): tried again after a wait that
			// doubles up to five minutes, whatever triggers a reconcile meanwhile.
			wait := c.failures.Failed(nc.Name, string(nc.UID))
			logger.Error(err, "terminating instance failed", "providerID", nc.Status.ProviderID, "retryIn", wait.String())
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	} else {
		c.failures.Forget(nc.Name)
		return reconcile.Result{RequeueAfter: pollInterval}, nil
	}
	c.failures.Forget(nc.Name)
	if started, inFlight := nodeclaim.LaunchInFlight(nc, c.clock.Now()); inFlight {
		// Deleted while its launch was in flight: the instance the launch may still create
		// is terminated before the NodeClaim goes, not left to garbage collection.
		logger.V(1).Info("waiting for the launch in flight before releasing the NodeClaim", "launchStarted", started)
		return reconcile.Result{RequeueAfter: pollInterval}, nil
	}
	if node != nil {
		nodePatch := client.MergeFrom(node.DeepCopy())
		if controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer) {
			if err := c.kube.Patch(ctx, node, nodePatch); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("releasing node %s: %w", node.Name, err)
			}
		}
		if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting node %s: %w", node.Name, err)
		}
		c.nodeTerminated(nc)
	}
	patch := client.MergeFrom(nc.DeepCopy())
	controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("releasing NodeClaim: %w", err))
	}
	metrics.KarpenterNodeClaimsTerminated.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey],
		nc.Labels[corev1.LabelTopologyZone]).Inc()
	c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonTerminated, "instance %s terminated", nc.Status.ProviderID)
	logger.Info("terminated NodeClaim", "providerID", nc.Status.ProviderID, "lifetime", c.clock.Since(nc.CreationTimestamp.Time).Round(time.Second).String())
	return reconcile.Result{}, nil
}

// nodeTerminated counts the node of a NodeClaim drained and gone, with the time from the
// NodeClaim's deletion, under Karpenter's names.
func (c *Controller) nodeTerminated(nc *karpv1.NodeClaim) {
	pool := nc.Labels[karpv1.NodePoolLabelKey]
	metrics.KarpenterNodesDrained.WithLabelValues(pool).Inc()
	metrics.KarpenterNodesTerminated.WithLabelValues(pool, nc.Labels[corev1.LabelTopologyZone]).Inc()
	metrics.KarpenterNodesTerminationDuration.WithLabelValues(pool).Observe(c.clock.Since(nc.DeletionTimestamp.Time).Seconds())
}

// drain makes one pass at emptying the node and reports whether to wait for it: pods left
// to leave, or volumes still attached. Past the grace period pods are deleted, but volumes
// are still waited for, so that their data is flushed.
func (c *Controller) drain(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (bool, error) {
	deadline := drainDeadline(nc)
	res, err := c.drainer.Drain(ctx, node.Name, deadline, c.clock.Now())
	if err != nil {
		return false, err
	}
	c.blocked.set(nc.Name, nc.Labels[karpv1.NodePoolLabelKey], !res.Done() && len(res.Blocked) > 0)
	if !res.Done() {
		if len(res.Blocked) > 0 {
			names := make([]string, 0, len(res.Blocked))
			for name, why := range res.Blocked {
				names = append(names, name+" ("+why+")")
			}
			sort.Strings(names)
			if gone, err := c.instanceGone(ctx, nc); err != nil || gone {
				if gone {
					c.blocked.set(nc.Name, "", false)
					c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonInstanceGoneDuringDrain,
						"instance %s is gone: not waiting to evict %s, which no longer run", nc.Status.ProviderID, strings.Join(names, "; "))
					log.FromContext(ctx).Info("the instance is gone: the node goes without waiting for the pods a budget holds", "node", node.Name, "pods", names)
				}
				return !gone, err
			}
			c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonDrainBlocked, "waiting to evict %s", strings.Join(names, "; "))
		}
		log.FromContext(ctx).V(1).Info("draining node", "node", node.Name, "remaining", res.Remaining, "forced", res.Forced)
		return true, nil
	}
	volumes, err := c.drainer.VolumesAttached(ctx, node.Name)
	if err != nil {
		return false, err
	}
	if len(volumes) > 0 {
		log.FromContext(ctx).V(1).Info("waiting for volumes to detach", "node", node.Name, "volumes", volumes)
		return true, nil
	}
	return false, nil
}

// instanceGone reports whether the NodeClaim's instance is gone (an instance that dies
// without notice, a spot reclaim without its warning): the pods a drain waits on no longer
// run, and a budget that holds them would hold the node for ever. Karpenter releases such a
// node too. It is asked only of drains that wait on a budget.
func (c *Controller) instanceGone(ctx context.Context, nc *karpv1.NodeClaim) (bool, error) {
	if nc.Status.ProviderID == "" {
		return false, nil
	}
	_, err := c.terminator.Get(ctx, nc.Status.ProviderID)
	if cloudprovider.IsNodeClaimNotFoundError(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading instance %s: %w", nc.Status.ProviderID, err)
	}
	return false, nil
}

// InterruptionDeadlineAnnotationKey on a NodeClaim is when its instance goes away
// (RFC 3339), written when an interruption is announced.
const InterruptionDeadlineAnnotationKey = "tailor.sh/interruption-deadline"

// interruptionMargin is how long before an announced reclaim the drain stops waiting, so
// the pods' own grace periods end before the instance does.
const interruptionMargin = 20 * time.Second

// drainDeadline is when draining stops waiting for budgets: the NodeClaim's termination
// grace period, shortly before an announced reclaim, or its termination timestamp (node
// repair), whichever comes first; zero for never.
func drainDeadline(nc *karpv1.NodeClaim) time.Time {
	var deadline time.Time
	sooner := func(d time.Time) {
		if deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	if tgp := nc.Spec.TerminationGracePeriod; tgp != nil {
		sooner(nc.DeletionTimestamp.Add(tgp.Duration))
	}
	if reclaim, ok := annotatedTime(nc, InterruptionDeadlineAnnotationKey); ok {
		sooner(reclaim.Add(-interruptionMargin))
	}
	if at, ok := annotatedTime(nc, karpv1.NodeClaimTerminationTimestampAnnotationKey); ok {
		sooner(at)
	}
	return deadline
}

// annotatedTime reads an RFC 3339 time from the NodeClaim's annotation key.
func annotatedTime(nc *karpv1.NodeClaim, key string) (time.Time, bool) {
	v := nc.Annotations[key]
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}
