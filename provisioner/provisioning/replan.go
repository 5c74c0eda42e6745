package provisioning

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// Pods that arrive over several batches (Deployments created one after another, a
// ReplicaSet's pods created at its controller's pace) would each get nodes sized for their
// own batch: a burst planned piecemeal costs more than the same pods planned at once. So a
// batch may take back the NodeClaims earlier batches made that are still soft, and plan
// their pods again with its own, when that buys cheaper capacity for both.

// PlannedSinceAnnotationKey on a NodeClaim is when its pods were first planned (RFC 3339):
// the earliest of them, kept when a batch plans them again onto a new NodeClaim. A NodeClaim
// is soft for the replan window after it was created, and only while its pods were first
// planned less than ReplanPatience windows ago: however long pods keep arriving, a pod's
// capacity is planned again for that long at most.
const PlannedSinceAnnotationKey = "tailor.sh/planned-since"

// ReplanPatience is how many replan windows after its pods were first planned a NodeClaim
// may still be taken back. A burst's savings come from pods planned again several times
// as it goes on (the in-memory burst of TestReplanningSoftNodeClaimsRecoversAPiecemealBurst
// ends at ×1.06 when pods are planned again for three windows, ×1.03 for ten), and the
// bound keeps a long burst from holding back its first pods' nodes.
const ReplanPatience = 10

// ReplacementAnnotationKey marks a NodeClaim disruption launched to replace nodes: it is
// never taken back by a batch.
const ReplacementAnnotationKey = "tailor.sh/replacement"

// ReasonReplanned is the event on a soft NodeClaim taken back.
const ReasonReplanned = "Replanned"

// minReplanSavings is the least hourly price planning soft NodeClaims' pods again must
// save. Small savings add up: each batch's plan leaves the next one less room wasted, and a
// threshold in percent kept most of them from happening (the in-memory burst of
// TestReplanningSoftNodeClaimsRecoversAPiecemealBurst ended at ×1.07 with 1%, ×1.01 without).
const minReplanSavings = 0.001

// softClaim is an in-flight NodeClaim a batch may take back, and its hourly price.
type softClaim struct {
	node  packing.Node
	price float64
}

// softClaims lists the in-flight NodeClaims of in that a batch may take back: made for pods
// by an earlier batch of this scheduler profile (not replacements), not deleting, their node
// not registered yet (nor known to have rejected a pod), none of their pods bound, created
// less than the replan window ago, their pods first planned less than ReplanPatience windows
// ago, and priced.
func (p *Provisioner) softClaims(in packing.Input, sel NodePoolSelector) []softClaim {
	if p.replanWindow <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	present := map[string]bool{}
	var out []softClaim
	for _, n := range in.Nodes {
		nc := n.NodeClaim
		if nc == nil {
			continue
		}
		present[nc.Name] = true
		if nc.DeletionTimestamp != nil || len(n.Pods) == 0 || !sel.Matches(poolOf(in, nc)) || p.rejecting[nc.Name] {
			continue
		}
		if nc.Annotations[ReplacementAnnotationKey] == "true" || nodeclaim.IsTrue(nc, karpv1.ConditionTypeRegistered) ||
			now.Sub(nc.CreationTimestamp.Time) >= p.replanWindow || now.Sub(plannedSince(nc)) >= ReplanPatience*p.replanWindow {
			continue
		}
		bound := false
		for _, p := range n.Pods {
			bound = bound || p.Spec.NodeName != ""
		}
		price, ok := claimPrice(in, nc)
		if bound || !ok {
			continue
		}
		out = append(out, softClaim{node: n, price: price})
	}
	for name := range p.rejecting {
		if !present[name] {
			delete(p.rejecting, name)
		}
	}
	return out
}

// poolOf is the NodePool of the input a NodeClaim belongs to; an empty one when the input
// has not got it.
func poolOf(in packing.Input, nc *karpv1.NodeClaim) *karpv1.NodePool {
	for _, np := range in.NodePools {
		if np.NodePool.Name == nc.Labels[karpv1.NodePoolLabelKey] {
			return np.NodePool
		}
	}
	return &karpv1.NodePool{}
}

// plannedSince is when the NodeClaim's pods were first planned: its planned-since
// annotation, or its creation when that is missing or unreadable.
func plannedSince(nc *karpv1.NodeClaim) time.Time {
	if t, err := time.Parse(time.RFC3339, nc.Annotations[PlannedSinceAnnotationKey]); err == nil {
		return t
	}
	return nc.CreationTimestamp.Time
}

// claimPrice is the hourly price of a NodeClaim's node (instance and node costs): that of the
// offering it launched on, or of
// the cheapest offering its requirements allow while it is not launched; false when its
// NodePool's instance types offer none.
func claimPrice(in packing.Input, nc *karpv1.NodeClaim) (float64, bool) {
	best := math.Inf(1)
	for _, np := range in.NodePools {
		if np.NodePool.Name != nc.Labels[karpv1.NodePoolLabelKey] {
			continue
		}
		for _, it := range np.InstanceTypes {
			for _, o := range it.Offerings {
				label := func(key string) (string, bool) { return it.Label(o, key) }
				launched := func(key string) bool {
					v, ok := nc.Labels[key]
					got, _ := label(key)
					return !ok || v == got
				}
				if !requirements.MatchesFunc(nc.Spec.Requirements, label) || !launched(corev1.LabelInstanceTypeStable) ||
					!launched(corev1.LabelTopologyZone) || !launched(karpv1.CapacityTypeLabelKey) {
					continue
				}
				best = min(best, o.NodePrice())
			}
		}
	}
	return best, !math.IsInf(best, 1)
}

// replan plans the batch's pods together with those of the soft NodeClaims, on the rest of
// the cluster. It returns that plan and the soft NodeClaims to take back when it places
// every pod the batch's own plan does and costs less than that plan and the soft NodeClaims
// together, by minReplanSavings at least.
func replan(in packing.Input, own packing.Plan, soft []softClaim) (packing.Plan, []softClaim, bool) {
	if len(soft) == 0 {
		return packing.Plan{}, nil, false
	}
	taken := map[string]bool{}
	joint := in
	joint.Pods = append([]*corev1.Pod(nil), in.Pods...)
	softPrice := 0.0
	for _, s := range soft {
		taken[s.node.Node.Name] = true
		joint.Pods = append(joint.Pods, s.node.Pods...)
		softPrice += s.price
	}
	joint.Nodes = nil
	for _, n := range in.Nodes {
		if !taken[n.Node.Name] {
			joint.Nodes = append(joint.Nodes, n)
		}
	}
	plan := packing.Solve(joint)
	if len(plan.Unschedulable) > len(own.Unschedulable) || own.PricePerHour()+softPrice-plan.PricePerHour() < minReplanSavings {
		return packing.Plan{}, nil, false
	}
	batch := map[*corev1.Pod]bool{}
	for _, p := range in.Pods {
		batch[p] = true
	}
	for _, u := range plan.Unschedulable {
		if !batch[u.Pod] {
			// A pod that has capacity coming would lose it.
			return packing.Plan{}, nil, false
		}
	}
	return plan, soft, true
}

// plannedSinceAnnotations are the annotations of a new NodeClaim for the pods: when the
// earliest of them was first planned, now for pods of this batch.
func plannedSinceAnnotations(pods []*corev1.Pod, takenBack []softClaim, now time.Time) map[string]string {
	since := map[types.UID]time.Time{}
	for _, s := range takenBack {
		for _, p := range s.node.Pods {
			since[p.UID] = plannedSince(s.node.NodeClaim)
		}
	}
	earliest := now
	for _, p := range pods {
		if t, ok := since[p.UID]; ok && t.Before(earliest) {
			earliest = t
		}
	}
	return map[string]string{PlannedSinceAnnotationKey: earliest.UTC().Format(time.RFC3339)}
}

// takeBack deletes the soft NodeClaims whose pods a batch planned again, saying so on each;
// termination terminates their instances. A NodeClaim whose node registered since the batch
// read it is kept: pods may have been bound to it before their new plan was published, and
// deleting it would evict them. Its pods are planned elsewhere now; consolidation removes
// it once it is empty.
func (p *Provisioner) takeBack(ctx context.Context, soft []softClaim) error {
	return concurrently(ctx, len(soft), func(ctx context.Context, i int) error {
		nc := &karpv1.NodeClaim{}
		if err := p.kube.Get(ctx, client.ObjectKeyFromObject(soft[i].node.NodeClaim), nc); err != nil {
			return client.IgnoreNotFound(err)
		}
		logger := log.FromContext(ctx).WithValues("nodeClaim", nc.Name, "pods", len(soft[i].node.Pods), "pricePerHour", soft[i].price)
		if nodeclaim.IsTrue(nc, karpv1.ConditionTypeRegistered) {
			logger.Info("kept a NodeClaim whose pods were planned again: its node registered meanwhile")
			return nil
		}
		p.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonReplanned, "its %d pods were planned again with later pods onto cheaper capacity", len(soft[i].node.Pods))
		logger.Info("took back a NodeClaim to plan its pods again")
		if err := p.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodeClaim %s, whose pods were planned again: %w", nc.Name, err)
		}
		metrics.NodeClaimsReplanned.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey]).Inc()
		return nil
	})
}
