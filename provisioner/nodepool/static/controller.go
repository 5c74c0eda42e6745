// Package static keeps each static NodePool (spec.replicas, Karpenter's StaticCapacity
// feature gate) at exactly its replicas: it launches NodeClaims for the nodes missing and
// deletes the surplus, whatever pods need. Limits.nodes caps the NodeClaims of the pool,
// those being deleted included, since their instances still run. Scaling down takes first
// the NodeClaims whose node has not registered, then the nodes running fewest pods; their
// drain honours PodDisruptionBudgets but not disruption budgets, as in Karpenter.
package static

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
)

// Event reasons on the NodePool.
const (
	ReasonScaledUp     = "ScaledUp"
	ReasonScaledDown   = "ScaledDown"
	ReasonAtNodeLimit  = "AtNodeLimit"
	ReasonLaunchFailed = "StaticLaunchFailed"
)

// cacheWait is how soon a NodePool is looked at again while the cache has not caught up
// with the NodeClaims this controller created or deleted, and cacheGiveUp how long it
// waits for one before it counts what the cache shows (a NodeClaim deleted by someone
// else before the cache saw it is never seen).
const (
	cacheWait   = time.Second
	cacheGiveUp = time.Minute
)

// Launcher launches nodes of a static NodePool; provisioning.Provisioner is one.
type Launcher interface {
	LaunchStatic(ctx context.Context, np *karpv1.NodePool, n int) ([]*karpv1.NodeClaim, error)
}

// Controller scales static NodePools to their replicas.
type Controller struct {
	kube     client.Client
	launcher Launcher
	recorder record.EventRecorder
	clock    clock.PassiveClock

	mu sync.Mutex
	// created and deleted are the NodeClaims of each NodePool this controller created or
	// deleted that the cache may not show so yet, counted as they will be, with when.
	created, deleted map[string]map[string]time.Time
}

// NewController returns a Controller; clk defaults to the real clock.
func NewController(kube client.Client, launcher Launcher, recorder record.EventRecorder, clk clock.PassiveClock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, launcher: launcher, recorder: recorder, clock: clk,
		created: map[string]map[string]time.Time{}, deleted: map[string]map[string]time.Time{}}
}

// Register adds the controller to the manager: it follows static NodePools and their
// NodeClaims.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodepool.static").
		For(&karpv1.NodePool{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.(*karpv1.NodePool).IsStatic()
		}))).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if pool := o.GetLabels()[karpv1.NodePoolLabelKey]; pool != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
			}
			return nil
		})).
		Complete(c)
}

// Reconcile launches or deletes NodeClaims until the NodePool has its replicas.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !np.IsStatic() || np.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	list := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the NodeClaims of NodePool %s: %w", np.Name, err)
	}
	active, total, caughtUp := c.count(np.Name, list.Items)
	if !caughtUp {
		return reconcile.Result{RequeueAfter: cacheWait}, nil
	}
	want := int(*np.Spec.Replicas)
	switch {
	case len(active) < want:
		return reconcile.Result{}, c.scaleUp(ctx, np, want, len(active), total)
	case len(active) > want:
		return reconcile.Result{}, c.scaleDown(ctx, np, active, len(active)-want)
	}
	return reconcile.Result{}, nil
}

// count splits the NodeClaims into those not being deleted and the total, counting what
// this controller created or deleted as done; caughtUp is false while a NodeClaim it
// created is missing from claims.
func (c *Controller) count(pool string, claims []karpv1.NodeClaim) (active []*karpv1.NodeClaim, total int, caughtUp bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	seen := map[string]bool{}
	for i := range claims {
		nc := &claims[i]
		seen[nc.Name] = true
		delete(c.created[pool], nc.Name)
		if nc.DeletionTimestamp != nil {
			delete(c.deleted[pool], nc.Name)
			continue
		}
		if _, deleted := c.deleted[pool][nc.Name]; !deleted {
			active = append(active, nc)
		}
	}
	for name, at := range c.deleted[pool] {
		if !seen[name] || now.Sub(at) > cacheGiveUp {
			delete(c.deleted[pool], name)
		}
	}
	for name, at := range c.created[pool] {
		if now.Sub(at) > cacheGiveUp {
			delete(c.created[pool], name)
		}
	}
	return active, len(claims), len(c.created[pool]) == 0
}

func (c *Controller) scaleUp(ctx context.Context, np *karpv1.NodePool, want, have, total int) error {
	n := want - have
	if limit, ok := np.Spec.Limits[corev1.ResourceName("nodes")]; ok {
		if room := int(limit.Value()) - total; room < n {
			c.recorder.Eventf(np, corev1.EventTypeWarning, ReasonAtNodeLimit,
				"%d of %d replicas run and limits.nodes %s allows %d more NodeClaims (%d exist, those being deleted included)",
				have, want, limit.String(), max(room, 0), total)
			n = room
		}
	}
	if n <= 0 {
		return nil
	}
	created, err := c.launcher.LaunchStatic(ctx, np, n)
	c.expect(c.created, np.Name, created)
	if len(created) > 0 {
		c.recorder.Eventf(np, corev1.EventTypeNormal, ReasonScaledUp, "launching %d NodeClaims for %d replicas: %s", len(created), want, names(created))
		log.FromContext(ctx).Info("scaled static NodePool up", "nodePool", np.Name, "replicas", want, "nodeClaims", names(created))
	}
	if err != nil {
		c.recorder.Eventf(np, corev1.EventTypeWarning, ReasonLaunchFailed, "launching %d NodeClaims for %d replicas: %v", n, want, err)
		return fmt.Errorf("scaling static NodePool %s up: %w", np.Name, err)
	}
	return nil
}

func (c *Controller) scaleDown(ctx context.Context, np *karpv1.NodePool, active []*karpv1.NodeClaim, n int) error {
	pods := map[string]int{}
	for _, nc := range active {
		if registered(nc) == 0 {
			continue
		}
		count, err := c.workloadPods(ctx, nc.Status.NodeName)
		if err != nil {
			return err
		}
		pods[nc.Name] = count
	}
	slices.SortFunc(active, func(a, b *karpv1.NodeClaim) int {
		return cmp.Or(
			cmp.Compare(registered(a), registered(b)),
			cmp.Compare(pods[a.Name], pods[b.Name]),
			b.CreationTimestamp.Compare(a.CreationTimestamp.Time),
			cmp.Compare(a.Name, b.Name),
		)
	})
	var gone []*karpv1.NodeClaim
	for _, nc := range active[:n] {
		if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
			c.expect(c.deleted, np.Name, gone)
			return fmt.Errorf("scaling static NodePool %s down: deleting NodeClaim %s: %w", np.Name, nc.Name, err)
		}
		gone = append(gone, nc)
	}
	c.expect(c.deleted, np.Name, gone)
	c.recorder.Eventf(np, corev1.EventTypeNormal, ReasonScaledDown, "deleting %d NodeClaims for %d replicas: %s", len(gone), *np.Spec.Replicas, names(gone))
	log.FromContext(ctx).Info("scaled static NodePool down", "nodePool", np.Name, "replicas", *np.Spec.Replicas, "nodeClaims", names(gone))
	return nil
}

// workloadPods counts the pods on the node that a drain moves: not DaemonSet pods, not
// finished.
func (c *Controller) workloadPods(ctx context.Context, node string) (int, error) {
	list := &corev1.PodList{}
	if err := c.kube.List(ctx, list, client.MatchingFields{nodeclaim.PodNodeNameIndex: node}); err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || nodeclaim.OwnedByDaemonSet(p) {
			continue
		}
		n++
	}
	return n, nil
}

// registered is 1 for a NodeClaim whose node has registered, 0 otherwise.
func registered(nc *karpv1.NodeClaim) int {
	if nodeclaim.IsTrue(nc, karpv1.ConditionTypeRegistered) {
		return 1
	}
	return 0
}

// expect records NodeClaims created or deleted, for count.
func (c *Controller) expect(set map[string]map[string]time.Time, pool string, claims []*karpv1.NodeClaim) {
	if len(claims) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if set[pool] == nil {
		set[pool] = map[string]time.Time{}
	}
	for _, nc := range claims {
		set[pool][nc.Name] = c.clock.Now()
	}
}

func names(claims []*karpv1.NodeClaim) []string {
	out := make([]string, len(claims))
	for i, nc := range claims {
		out[i] = nc.Name
	}
	return out
}
