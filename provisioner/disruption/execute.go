package disruption

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

// command is a decision being carried out.
type command struct {
	decision     Decision
	replacements []string
	started      time.Time
	// nodes are the node names of the replacements once they are up.
	nodes []string
	// surges, when set, are the pods replaced before their eviction that the originals
	// wait for.
	surges []*replacement
}

// inMotion reports whether the last decisions are still under way: a NodeClaim they
// deleted is not gone yet, or a pod that replaces one they evicted waits for a node. A
// decision made now would see pods where they are not going to stay.
func (c *Controller) inMotion(ctx context.Context, in packing.Input) (bool, error) {
	for name := range c.deleting {
		err := c.kube.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodeClaim{})
		if client.IgnoreNotFound(err) != nil {
			return false, err
		}
		if err == nil {
			return true, nil
		}
		delete(c.deleting, name)
	}
	for _, p := range in.Pods {
		if c.wasMoved(p) {
			return true, nil
		}
	}
	return false, nil
}

// unchanged reports whether the originals still run the pods the decision moves: a
// decision takes long to make in a large cluster, and pods may have landed meanwhile.
func (c *Controller) unchanged(ctx context.Context, originals []Candidate) bool {
	in, err := c.cluster.ClusterInput(ctx)
	if err != nil {
		return false
	}
	now := map[string]map[types.UID]bool{}
	for _, n := range in.Nodes {
		uids := map[types.UID]bool{}
		for _, p := range n.Pods {
			if movable(p) {
				uids[p.UID] = true
			}
		}
		now[n.Node.Name] = uids
	}
	for _, o := range originals {
		if len(now[o.Node]) != len(o.Pods) {
			return false
		}
		for _, p := range o.Pods {
			if !now[o.Node][p.UID] {
				return false
			}
		}
	}
	return true
}

// execute starts a decision: the originals are cordoned at once so nothing new lands on
// them; without replacements they are deleted now, otherwise once the replacements are up.
func (c *Controller) execute(ctx context.Context, d Decision) error {
	logger := log.FromContext(ctx)
	action := "delete"
	if len(d.Replacements) > 0 {
		action = "replace"
	}
	for _, o := range d.Originals {
		if err := c.cordon(ctx, o.Node); err != nil {
			return err
		}
	}
	recordDecision(d, action)
	logger.Info("disrupting", "reason", d.Reason, "action", action, "nodes", nodeNames(d.Originals), "replacements", len(d.Replacements), "savingsPerHour", d.Savings)
	if len(d.Replacements) == 0 {
		return c.commit(ctx, d, nil)
	}
	cmd := &command{decision: d, started: c.clock.Now()}
	for _, r := range d.Replacements {
		nc, err := c.launcher.Launch(ctx, r, d.Reason)
		if err != nil {
			c.pending = cmd
			return c.abort(ctx, fmt.Sprintf("launching a replacement failed: %v", err))
		}
		cmd.replacements = append(cmd.replacements, nc.Name)
		c.replacements[nc.Name] = c.clock.Now()
	}
	// The rest of the plan moves pods onto these replacements too.
	c.planner.Launched(d, cmd.replacements)
	c.pending = cmd
	return nil
}

// continuePending carries the originals on once every replacement is initialized, and gives
// up when one is gone or too slow; and moves the pods replaced before their eviction on.
func (c *Controller) continuePending(ctx context.Context) error {
	cmd := c.pending
	if cmd.surges != nil {
		return c.continueSurges(ctx)
	}
	var nodes []string
	for _, name := range cmd.replacements {
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return c.abort(ctx, fmt.Sprintf("replacement %s is gone", name))
			}
			return err
		}
		if nc.DeletionTimestamp != nil {
			return c.abort(ctx, fmt.Sprintf("replacement %s is being deleted", name))
		}
		if !nodeclaim.IsTrue(nc, karpv1.ConditionTypeInitialized) {
			if c.clock.Since(cmd.started) > c.opts.ReplacementTimeout {
				return c.abort(ctx, fmt.Sprintf("replacement %s did not initialize within %s", name, c.opts.ReplacementTimeout))
			}
			return nil
		}
		nodes = append(nodes, nc.Status.NodeName)
	}
	if why := c.revalidate(ctx, cmd.decision.Originals); why != "" {
		return c.abort(ctx, why)
	}
	c.pending = nil
	return c.commit(ctx, cmd.decision, nodes)
}

// revalidate checks, just before the originals go, what may have changed while their
// replacements came up: a do-not-disrupt annotation on a node or one of its pods, or pods
// planned onto one of them. It returns why they must stay, or "".
func (c *Controller) revalidate(ctx context.Context, originals []Candidate) string {
	for _, o := range originals {
		if len(c.planned.PodsOf(o.NodeClaim)) > 0 {
			return fmt.Sprintf("pods were planned onto node %s meanwhile", o.Node)
		}
		node := &corev1.Node{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: o.Node}, node); err == nil && node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			return fmt.Sprintf("node %s is marked %s", o.Node, karpv1.DoNotDisruptAnnotationKey)
		}
		pods := &corev1.PodList{}
		if err := c.kube.List(ctx, pods, client.MatchingFields{nodeclaim.PodNodeNameIndex: o.Node}); err != nil {
			return fmt.Sprintf("listing the pods of node %s: %v", o.Node, err)
		}
		for _, p := range pods.Items {
			if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" && movable(&p) {
				return fmt.Sprintf("pod %s/%s on node %s is marked %s", p.Namespace, p.Name, o.Node, karpv1.DoNotDisruptAnnotationKey)
			}
		}
	}
	return ""
}

// abort lifts the cordon of the originals and deletes the copies of the pods it was
// replacing before their eviction; the replacements left, if any, are empty nodes emptiness
// removes later.
func (c *Controller) abort(ctx context.Context, why string) error {
	cmd := c.pending
	c.pending = nil
	c.abandonCopies(ctx, cmd, why)
	for _, o := range cmd.decision.Originals {
		if err := c.uncordon(ctx, o.Node); err != nil {
			return err
		}
		c.event(ctx, o.NodeClaim, corev1.EventTypeWarning, ReasonDisruptionAborted, why)
	}
	log.FromContext(ctx).Info("disruption aborted", "reason", cmd.decision.Reason, "why", why, "nodes", nodeNames(cmd.decision.Originals))
	return nil
}

// deleteOriginals deletes the NodeClaims of the originals: termination drains them. The
// nodes the pods move onto are reserved for them first (replacementNodes are the
// replacements' node names), and the controllers of the pods are remembered, so the pods
// they make up for the ones evicted are not moved again soon.
func (c *Controller) deleteOriginals(ctx context.Context, d Decision, replacementNodes []string) error {
	if d.Savings > 0 {
		savingsTotal.WithLabelValues(string(d.Reason)).Add(d.Savings)
	}
	if err := c.reserve(ctx, d, replacementNodes); err != nil {
		// Reservations only steer the moved pods; without them the pods still land.
		log.FromContext(ctx).Error(err, "reserving nodes for the pods moving onto them")
	}
	c.recordMoves(d, c.clock.Now())
	for _, o := range d.Originals {
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: o.NodeClaim}, nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return err
		}
		c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonDisrupting, "%s: %s; %s", d.Reason, describe(d), describeSavings(d))
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodeClaim %s: %w", nc.Name, err)
		}
		c.deleting[nc.Name] = true
		metrics.NodeClaimDisrupted(nc, string(d.Reason), c.consolidationPolicy(ctx, d.Reason, o.NodePool))
	}
	return nil
}

// recordMoves remembers, at the time, the controllers whose pods the decision moves.
func (c *Controller) recordMoves(d Decision, now time.Time) {
	for _, o := range d.Originals {
		for _, p := range o.Pods {
			if owner, ok := reservation.ControllerOf(p); ok {
				m, ok := c.moved[owner]
				if !ok {
					m.first = now
				}
				m.last = now
				c.moved[owner] = m
			}
		}
	}
}

// consolidationPolicy is the consolidation policy of the NodePool for the metrics of a
// consolidation, and empty for other reasons.
func (c *Controller) consolidationPolicy(ctx context.Context, reason karpv1.DisruptionReason, nodePool string) karpv1.ConsolidationPolicy {
	if reason == karpv1.DisruptionReasonDrifted {
		return ""
	}
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nodePool}, np); err != nil {
		return ""
	}
	return np.Spec.Disruption.ConsolidationPolicy
}

func (c *Controller) event(ctx context.Context, nodeClaim, kind, reason, msg string) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nodeClaim}, nc); err == nil {
		c.recorder.Event(nc, kind, reason, msg)
	}
}

// describe says what a decision does, for events.
func describe(d Decision) string {
	nodes := strings.Join(nodeNames(d.Originals), ", ")
	if len(d.Replacements) == 0 {
		return fmt.Sprintf("removing %s; its pods fit on other nodes", nodes)
	}
	types := make([]string, len(d.Replacements))
	for i, r := range d.Replacements {
		types[i] = r.Cheapest.CapacityType + " " + r.Cheapest.InstanceType
	}
	return fmt.Sprintf("replacing %s with %s", nodes, strings.Join(types, ", "))
}

// describeSavings says what a decision saves, or what it costs until the later decisions of
// its plan (the rest of a group whose replacements it launched ahead) make up for it.
func describeSavings(d Decision) string {
	if d.Savings < 0 {
		return fmt.Sprintf("costs $%.4f/hour more until the rest of the plan moves onto the replacements", -d.Savings)
	}
	return fmt.Sprintf("saves $%.4f/hour", d.Savings)
}

func nodeNames(cands []Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Node
	}
	sort.Strings(out)
	return out
}
