// Package deletioncost steers Deployment scale-downs onto the nodes consolidation would
// empty first. A ReplicaSet that scales down deletes its pods with the lowest
// controller.kubernetes.io/pod-deletion-cost first; the disruption controller ranks the
// nodes it would take away, and the Steerer keeps that rank on the pods Tailor placed, so
// that the scale-down itself empties those nodes and consolidation has fewer pods to evict.
//
// The Steerer writes a cost only on pods a ReplicaSet owns, that a scheduler it steers for
// placed, and that carry no cost of their own: it records the value it wrote in
// ManagedAnnotationKey, and a pod whose cost differs from that record has a cost someone
// else set, which it leaves alone. It removes what it wrote from pods on nodes no longer
// ranked, and it patches at most QPS pods a second.
package deletioncost

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// PodDeletionCostAnnotationKey is the ReplicaSet controller's deletion cost. A
	// ReplicaSet that scales down deletes its pods with the lowest cost first.
	PodDeletionCostAnnotationKey = "controller.kubernetes.io/pod-deletion-cost"
	// ManagedAnnotationKey holds the deletion cost Tailor wrote on a pod. A pod whose
	// deletion cost is not the value recorded here has a cost someone else set.
	ManagedAnnotationKey = "tailor.sh/pod-deletion-cost"
)

// Node is a node and its pods, ranked or not.
type Node struct {
	Name string
	// Ranked is set when the node is one consolidation may take away; Cost is then the
	// deletion cost of its pods: the lower, the sooner consolidation would empty it.
	Ranked bool
	Cost   int32
	Pods   []*corev1.Pod
}

// Options configure a Steerer.
type Options struct {
	// Schedulers are the scheduler names whose pods the Steerer writes costs on.
	Schedulers []string
	// QPS bounds the pod patches a second; Burst the patches at once.
	QPS   float32
	Burst int
	// Clock paces the patches; the real clock when nil.
	Clock clock.Clock
}

// Steerer keeps the pods of the ranked nodes at their nodes' deletion costs. Steer takes
// the ranking; Start applies it.
type Steerer struct {
	kube       client.Client
	schedulers sets.Set[string]
	limiter    flowcontrol.RateLimiter

	mu sync.Mutex
	// pending are the patches the last ranking asks for and not applied yet, by pod.
	pending map[types.NamespacedName]patch
	wake    chan struct{}
}

// patch is one pod's change: its deletion cost set to cost, or cleared.
type patch struct {
	uid   types.UID
	clear bool
	cost  int32
}

// New returns a Steerer.
func New(kube client.Client, opts Options) *Steerer {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	qps, burst := opts.QPS, opts.Burst
	if qps <= 0 {
		qps = 10
	}
	if burst <= 0 {
		burst = 1
	}
	return &Steerer{
		kube: kube, schedulers: sets.New(opts.Schedulers...),
		limiter: flowcontrol.NewTokenBucketRateLimiterWithClock(qps, burst, clk),
		pending: map[types.NamespacedName]patch{}, wake: make(chan struct{}, 1),
	}
}

// NeedLeaderElection returns true: the leader's disruption controller ranks the nodes.
func (s *Steerer) NeedLeaderElection() bool { return true }

// Steer replaces the patches still to apply with those the ranking asks for. It does not
// block.
func (s *Steerer) Steer(nodes []Node) {
	pending := map[types.NamespacedName]patch{}
	for _, n := range nodes {
		for _, p := range n.Pods {
			if pt, ok := s.change(n, p); ok {
				pending[client.ObjectKeyFromObject(p)] = pt
			}
		}
	}
	s.mu.Lock()
	s.pending = pending
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// change is the patch a pod on a node needs, if any.
func (s *Steerer) change(n Node, p *corev1.Pod) (patch, bool) {
	cost, hasCost := p.Annotations[PodDeletionCostAnnotationKey]
	ours, wrote := p.Annotations[ManagedAnnotationKey]
	if hasCost && (!wrote || ours != cost) {
		// Someone else's cost.
		return patch{}, false
	}
	if !n.Ranked || !s.steers(p) {
		return patch{uid: p.UID, clear: true}, wrote
	}
	if !wrote {
		return patch{uid: p.UID, cost: n.Cost}, true
	}
	current, err := strconv.ParseInt(ours, 10, 32)
	if err != nil || moved(int32(current), n.Cost) {
		return patch{uid: p.UID, cost: n.Cost}, true
	}
	return patch{}, false
}

// moved reports whether a node's cost changed by enough to rewrite its pods: by more than a
// tenth, so that a pass that sees a pod more or less does not patch every pod on the node.
func moved(was, now int32) bool {
	d := int64(now) - int64(was)
	if d < 0 {
		d = -d
	}
	base := int64(was)
	if base < 0 {
		base = -base
	}
	return d > max(base/10, 1)
}

// steers reports whether a pod is one the Steerer writes costs on: a running ReplicaSet
// pod placed by a scheduler it steers for.
func (s *Steerer) steers(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || !s.schedulers.Has(p.Spec.SchedulerName) {
		return false
	}
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "ReplicaSet"
}

// Start applies the pending patches, at most QPS a second, until ctx ends.
func (s *Steerer) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("deletion-cost")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
		for {
			key, pt, ok := s.next()
			if !ok {
				break
			}
			if err := s.limiter.Wait(ctx); err != nil {
				return nil
			}
			if err := s.apply(ctx, key, pt); err != nil {
				patchesTotal.WithLabelValues(resultFailed).Inc()
				logger.V(1).Info("writing a pod deletion cost failed", "pod", key, "err", err)
			}
		}
	}
}

// next takes one pending patch off.
func (s *Steerer) next() (types.NamespacedName, patch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, pt := range s.pending {
		delete(s.pending, key)
		return key, pt, true
	}
	return types.NamespacedName{}, patch{}, false
}

// apply patches one pod; a pod gone, or replaced by one of the same name, is left alone.
func (s *Steerer) apply(ctx context.Context, key types.NamespacedName, pt patch) error {
	annotations := map[string]any{PodDeletionCostAnnotationKey: nil, ManagedAnnotationKey: nil}
	result := resultCleared
	if !pt.clear {
		value := strconv.Itoa(int(pt.cost))
		annotations = map[string]any{PodDeletionCostAnnotationKey: value, ManagedAnnotationKey: value}
		result = resultSet
	}
	// The UID precondition keeps the patch off a pod created since under the same name.
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pt.uid, "annotations": annotations}})
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := s.kube.Patch(ctx, pod, client.RawPatch(types.MergePatchType, raw)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("patching pod %s: %w", key, err)
	}
	patchesTotal.WithLabelValues(result).Inc()
	return nil
}
