package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// releaseWait bounds how long a replacement waits, once its copy is handed to the
// ReplicaSet, for the ReplicaSet to delete the old pod. Past it the old pod is left to the
// drain, which may evict it: its copy is Ready.
const releaseWait = time.Minute

// replacement is an opted-in pod of an original that a copy replaces before the original
// goes (package surge).
type replacement struct {
	plan *surge.Plan
	// nodeClaim is the original's NodeClaim, the copy's owner until it is released.
	nodeClaim string
	// destination is the node the plan put the pod on, for events.
	destination string
	// copy is the copy's name once created; deadline is when it must be Ready.
	copy     string
	deadline time.Time
	// released is when the copy was handed to the ReplicaSet; done once the old pod went.
	released time.Time
	done     bool
}

func (r *replacement) workload() types.UID { return r.plan.Deployment.UID }

// commit carries out a decision whose replacements are up (nodes are their node names), or
// that has none. Opted-in pods that must not be evicted before a copy of theirs serves are
// replaced first; the originals go once every copy is Ready and has taken its pod's place.
func (c *Controller) commit(ctx context.Context, d Decision, nodes []string) error {
	c.pending = &command{decision: d, nodes: nodes, started: c.clock.Now()}
	surges, err := c.surges(ctx, d, nodes)
	if err != nil {
		return c.abort(ctx, fmt.Sprintf("deciding which pods to replace before their eviction: %v", err))
	}
	if len(surges) == 0 {
		c.pending = nil
		return c.deleteOriginals(ctx, d, nodes)
	}
	// The copies land where the plan put their pods, and count as moved pods from now.
	if err := c.reserve(ctx, d, nodes); err != nil {
		log.FromContext(ctx).Error(err, "reserving nodes for the pods moving onto them")
	}
	c.recordMoves(d, c.clock.Now())
	c.pending.surges = surges
	log.FromContext(ctx).Info("replacing pods before their eviction", "reason", d.Reason, "nodes", nodeNames(d.Originals), "pods", len(surges))
	return c.continueSurges(ctx)
}

// surges are the replacements a decision makes: its originals' opted-in pods that surge
// finds must not be evicted before a copy serves. Those that need one but cannot have one
// keep the usual rules, and an event says why.
func (c *Controller) surges(ctx context.Context, d Decision, nodes []string) ([]*replacement, error) {
	leaving := map[types.UID]bool{}
	for _, o := range d.Originals {
		for _, p := range o.Pods {
			leaving[p.UID] = true
		}
	}
	checker := c.checker()
	pools := map[string]*karpv1.NodePool{}
	var out []*replacement
	for _, o := range d.Originals {
		pool, ok := pools[o.NodePool]
		if !ok {
			pool = &karpv1.NodePool{}
			if err := c.kube.Get(ctx, client.ObjectKey{Name: o.NodePool}, pool); err != nil {
				pool = nil
			}
			pools[o.NodePool] = pool
		}
		for _, p := range o.Pods {
			if !surge.OptedIn(p, pool) {
				continue
			}
			v, err := checker.Check(ctx, p, leaving)
			if err != nil {
				return nil, err
			}
			switch {
			case v.Plan != nil:
				out = append(out, &replacement{plan: v.Plan, nodeClaim: o.NodeClaim, destination: destination(d, nodes, p.UID)})
			case v.Fallback != "":
				surge.Count(surge.ResultFallback)
				msg := fmt.Sprintf("%s: pod %s is evicted as usual", v.Fallback, p.Name)
				c.recorder.Event(p, corev1.EventTypeNormal, surge.ReasonNoReplacement, msg)
				c.event(ctx, o.NodeClaim, corev1.EventTypeNormal, surge.ReasonNoReplacement, msg)
			}
		}
	}
	return out, nil
}

// checker decides which opted-in pods are replaced before their eviction: it reads their
// workloads and budgets from the API server, their Deployments' pods from the cache.
func (c *Controller) checker() surge.Checker {
	return surge.Checker{API: c.api, Pods: c.kube, Timeout: c.opts.ReplacementReadyTimeout}
}

// destination is where the decision's plan puts a pod: a node it keeps, or a replacement's
// node (nodes are their names, in order).
func destination(d Decision, nodes []string, uid types.UID) string {
	for _, pl := range d.Placements {
		for _, p := range pl.Pods {
			if p.UID == uid {
				return pl.Node.Node.Name
			}
		}
	}
	for i, r := range d.Replacements {
		for _, p := range r.Pods {
			if p.UID == uid && i < len(nodes) {
				return nodes[i]
			}
		}
	}
	return ""
}

// continueSurges moves the replacements of the decision under way on: it starts a copy for
// each pod whose workload has none under way (never more than one pod beyond a workload's
// replicas), hands the Ready ones to their ReplicaSets, and deletes the originals once every
// old pod is gone. A copy gone or not Ready in time abandons the decision.
func (c *Controller) continueSurges(ctx context.Context) error {
	cmd := c.pending
	if why := c.revalidate(ctx, cmd.decision.Originals); why != "" {
		return c.abort(ctx, why)
	}
	now := c.clock.Now()
	busy := map[types.UID]bool{}
	for _, r := range cmd.surges {
		if r.copy != "" && !r.done {
			busy[r.workload()] = true
		}
	}
	waiting := 0
	for _, r := range cmd.surges {
		if r.done {
			continue
		}
		switch {
		case r.copy == "":
			if busy[r.workload()] {
				continue
			}
			if err := c.startCopy(ctx, r); err != nil {
				return c.abort(ctx, err.Error())
			}
			busy[r.workload()] = true
			waiting++
		case r.released.IsZero():
			copy := &corev1.Pod{}
			if err := c.api.Get(ctx, client.ObjectKey{Namespace: r.plan.Pod.Namespace, Name: r.copy}, copy); err != nil {
				if apierrors.IsNotFound(err) {
					return c.abort(ctx, fmt.Sprintf("pod %s, the copy of pod %s, is gone", r.copy, r.plan.Pod.Name))
				}
				return err
			}
			if !surge.Ready(copy) {
				if now.After(r.deadline) {
					return c.abort(ctx, fmt.Sprintf("pod %s, the copy of pod %s, was not Ready within %s", r.copy, r.plan.Pod.Name, r.plan.Timeout))
				}
				waiting++
				continue
			}
			if err := c.handOver(ctx, r, copy); err != nil {
				return err
			}
			r.released = now
		default:
			old := &corev1.Pod{}
			err := c.api.Get(ctx, client.ObjectKeyFromObject(r.plan.Pod), old)
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			if err != nil || old.UID != r.plan.Pod.UID || old.DeletionTimestamp != nil || now.Sub(r.released) >= releaseWait {
				r.done = true
			}
		}
	}
	surge.SetInFlight(waiting)
	for _, r := range cmd.surges {
		if !r.done {
			return nil
		}
	}
	c.pending = nil
	return c.deleteOriginals(ctx, cmd.decision, cmd.nodes)
}

// startCopy creates a replacement's copy, owned by the original's NodeClaim.
func (c *Controller) startCopy(ctx context.Context, r *replacement) error {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: r.nodeClaim}, nc); err != nil {
		return fmt.Errorf("reading NodeClaim %s to own the copy of pod %s: %v", r.nodeClaim, r.plan.Pod.Name, err)
	}
	r.deadline = c.clock.Now().Add(r.plan.Timeout)
	copy := surge.Copy(r.plan, nc, r.deadline)
	if err := c.kube.Create(ctx, copy); err != nil {
		return fmt.Errorf("creating a copy of pod %s: %v", r.plan.Pod.Name, err)
	}
	r.copy = copy.Name
	where := "wherever it fits"
	if r.destination != "" {
		where = "on node " + r.destination + ", where the plan keeps room for it"
	}
	msg := fmt.Sprintf("started pod %s %s before evicting pod %s; it goes once the copy is Ready, or the disruption is abandoned at %s",
		copy.Name, where, r.plan.Pod.Name, r.deadline.UTC().Format(time.RFC3339))
	c.recorder.Event(r.plan.Pod, corev1.EventTypeNormal, surge.ReasonReplacing, msg)
	c.recorder.Event(nc, corev1.EventTypeNormal, surge.ReasonReplacing, msg)
	log.FromContext(ctx).Info("started a copy before evicting", "pod", client.ObjectKeyFromObject(r.plan.Pod), "copy", copy.Name,
		"destination", r.destination, "deadline", r.deadline)
	return nil
}

// handOver hands a Ready copy to its ReplicaSet, which deletes the old pod.
func (c *Controller) handOver(ctx context.Context, r *replacement, copy *corev1.Pod) error {
	old := &corev1.Pod{}
	if err := c.api.Get(ctx, client.ObjectKeyFromObject(r.plan.Pod), old); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		old = nil
	} else if old.UID != r.plan.Pod.UID {
		old = nil
	}
	if err := surge.Release(ctx, c.kube, copy, old); err != nil {
		return err
	}
	surge.Count(surge.ResultDone)
	msg := fmt.Sprintf("pod %s is Ready on node %s: its ReplicaSet takes pod %s away", copy.Name, copy.Spec.NodeName, r.plan.Pod.Name)
	c.recorder.Event(r.plan.Pod, corev1.EventTypeNormal, surge.ReasonReplaced, msg)
	c.event(ctx, r.nodeClaim, corev1.EventTypeNormal, surge.ReasonReplaced, msg)
	log.FromContext(ctx).Info("replaced a pod before its eviction", "pod", client.ObjectKeyFromObject(r.plan.Pod), "copy", copy.Name, "node", copy.Spec.NodeName)
	return nil
}

// abandonCopies deletes the copies of an abandoned decision that were not handed over yet,
// and lifts the reservations it wrote.
func (c *Controller) abandonCopies(ctx context.Context, cmd *command, why string) {
	logger := log.FromContext(ctx)
	for _, r := range cmd.surges {
		if r.copy == "" || !r.released.IsZero() {
			continue
		}
		c.deleteCopy(ctx, r.plan.Pod.Namespace, r.copy, r.plan.Pod, why)
	}
	if len(cmd.surges) > 0 {
		surge.SetInFlight(0)
		for _, node := range reservedNodes(cmd.decision, cmd.nodes) {
			if err := c.setReservation(ctx, node, nil); err != nil {
				logger.Error(err, "lifting the reservation of an abandoned disruption", "node", node)
			}
		}
	}
}

// deleteCopy deletes a copy that is not to take its pod's place, and says so on the pod.
func (c *Controller) deleteCopy(ctx context.Context, namespace, name string, old *corev1.Pod, why string) {
	copy := &corev1.Pod{}
	copy.Namespace, copy.Name = namespace, name
	if err := c.kube.Delete(ctx, copy); client.IgnoreNotFound(err) != nil {
		log.FromContext(ctx).Error(err, "deleting the copy of an abandoned replacement", "pod", client.ObjectKeyFromObject(copy))
		return
	}
	surge.Count(surge.ResultAbandoned)
	if old != nil {
		c.recorder.Event(old, corev1.EventTypeWarning, surge.ReasonReplacementAbandoned, fmt.Sprintf("deleted its copy %s: %s", name, why))
	}
}

// reservedNodes are the nodes a decision reserves room on.
func reservedNodes(d Decision, nodes []string) []string {
	var out []string
	for _, p := range d.Placements {
		out = append(out, p.Node.Node.Name)
	}
	for _, n := range nodes {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// sweepCopies deletes the copies no decision of this leader waits for: a predecessor's,
// lost with it. It runs while no decision is under way, and each copy is confirmed on the
// API server first (a copy just handed to its ReplicaSet may still look like one in the
// cache). A copy whose old pod is gone is handed to its ReplicaSet instead, which keeps its
// replica count.
func (c *Controller) sweepCopies(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.HasLabels{surge.ReplacesLabelKey}); err != nil {
		return fmt.Errorf("listing copies of pods replaced before their eviction: %w", err)
	}
	for i := range pods.Items {
		copy := &corev1.Pod{}
		if err := c.api.Get(ctx, client.ObjectKeyFromObject(&pods.Items[i]), copy); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !surge.IsCopy(copy) || copy.DeletionTimestamp != nil {
			continue
		}
		old := &corev1.Pod{}
		err := c.api.Get(ctx, client.ObjectKey{Namespace: copy.Namespace, Name: copy.Annotations[surge.ReplacesAnnotationKey]}, old)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err != nil || string(old.UID) != copy.Labels[surge.ReplacesLabelKey] || old.DeletionTimestamp != nil {
			if err := surge.Release(ctx, c.kube, copy, nil); err != nil {
				return err
			}
			continue
		}
		c.deleteCopy(ctx, copy.Namespace, copy.Name, old, "the disruption that started it is no longer under way")
		log.FromContext(ctx).Info("deleted the copy of a replacement no longer under way", "pod", client.ObjectKeyFromObject(old), "copy", copy.Name)
	}
	return nil
}
