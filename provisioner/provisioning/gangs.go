package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// ReasonGangNotProvisioned is the event reason when a gang's members do not all fit, so
// none of them gets capacity.
const ReasonGangNotProvisioned = "GangNotProvisioned"

// gangs are the gangs of a batch's pods.
type gangs struct {
	specs map[gang.Key]gang.Spec
	// counted is, per gang, how many of its members run or have capacity planned already.
	counted map[gang.Key]int
	// members are the gangs' pending members the batch did not bring, which the scheduler
	// handed over in an earlier batch or not yet: a gang is planned whole.
	members []Submission
	// planned are, per gang, its members outside the batch that wait for capacity planned
	// earlier: a gang refused now releases it (see release).
	planned map[gang.Key][]Submission
}

// gangsOf reads the gangs the batch's pods belong to.
func (p *Provisioner) gangsOf(ctx context.Context, subs []Submission, unbound map[types.UID]*corev1.Pod) (gangs, error) {
	g := gangs{specs: map[gang.Key]gang.Spec{}, counted: map[gang.Key]int{}, planned: map[gang.Key][]Submission{}}
	if p.gangs == nil {
		return g, nil
	}
	inBatch := map[types.UID]bool{}
	for _, s := range subs {
		inBatch[s.Pod.UID] = true
	}
	for _, s := range subs {
		key, ok := gang.KeyOf(s.Pod)
		if !ok {
			continue
		}
		if _, seen := g.specs[key]; seen {
			continue
		}
		spec, declared, err := p.gangs.Gang(ctx, key)
		if err != nil {
			return gangs{}, err
		}
		if !declared {
			continue
		}
		g.specs[key] = spec
		if err := p.readMembers(ctx, &g, key, s, inBatch, unbound); err != nil {
			return gangs{}, err
		}
	}
	return g, nil
}

// readMembers counts the gang's members outside the batch that are bound or planned, and
// brings in those still pending, as the submission of the first member found.
func (p *Provisioner) readMembers(ctx context.Context, g *gangs, key gang.Key, first Submission, inBatch map[types.UID]bool, unbound map[types.UID]*corev1.Pod) error {
	list := &corev1.PodList{}
	if err := p.kube.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{gang.Label: key.Name}); err != nil {
		return fmt.Errorf("listing the pods of gang %s: %w", key, err)
	}
	for i := range list.Items {
		pod := &list.Items[i]
		if inBatch[pod.UID] || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		live, pending := unbound[pod.UID]
		if !pending {
			g.counted[key]++
			continue
		}
		// A pending member is handed over as the first one found was.
		member := Submission{Pod: live, Profile: first.Profile, NodePools: first.NodePools}
		switch {
		case p.tracker.Planned(pod.UID):
			g.counted[key]++
			g.planned[key] = append(g.planned[key], member)
		case live.Spec.SchedulerName == first.Pod.Spec.SchedulerName:
			g.members = append(g.members, member)
		}
	}
	return nil
}

// solveGangs plans the input's pods all or nothing per gang, and tells each refused gang's
// PodGroup and pods why it got no capacity. It returns the plan and the pods it planned:
// the input's but the members of the gangs refused, whose submissions it keeps for
// RetryRefusedGangs, and with those of gangs kept to one zone required to be there.
func (p *Provisioner) solveGangs(ctx context.Context, input packing.Input, g gangs, subs []Submission) (packing.Plan, []*corev1.Pod, error) {
	if len(g.specs) == 0 {
		return packing.Solve(input), input.Pods, nil
	}
	batch := gang.Batch{Pods: input.Pods, Gangs: g.specs, Counted: g.counted, Zones: gang.Zones(input.NodePools), ZoneOf: gangZones(input.Nodes)}
	plan, planned, refusals := gang.Plan(batch, func(pods []*corev1.Pod) packing.Plan {
		in := input
		in.Pods = pods
		return packing.Solve(in)
	})
	byUID := map[types.UID]Submission{}
	for _, s := range subs {
		byUID[s.Pod.UID] = s
	}
	p.mu.Lock()
	for _, r := range refusals {
		for _, pod := range r.Pods {
			p.refused[pod.UID] = byUID[pod.UID]
		}
	}
	p.mu.Unlock()
	for _, r := range refusals {
		msg := r.Message()
		if r.Spec.Object != nil {
			p.recorder.Event(r.Spec.Object, corev1.EventTypeWarning, ReasonGangNotProvisioned, msg)
		}
		for _, pod := range r.Pods {
			p.recorder.Event(pod, corev1.EventTypeWarning, ReasonGangNotProvisioned, msg)
		}
		log.FromContext(ctx).Info("gang not provisioned", "gang", r.Spec.Key.String(), "minMember", r.Spec.MinMember, "pending", len(r.Pods), "placed", r.Placed, "counted", r.Counted)
	}
	if err := p.release(ctx, refusals, g.planned); err != nil {
		return packing.Plan{}, nil, err
	}
	return plan, planned, nil
}

// gangZones is, per gang, the zone of a node (or NodeClaim in flight) one of its members
// runs or is planned on.
func gangZones(nodes []packing.Node) map[gang.Key]string {
	out := map[gang.Key]string{}
	for _, n := range nodes {
		zone := n.Node.Labels[corev1.LabelTopologyZone]
		if zone == "" {
			continue
		}
		for _, pod := range n.Pods {
			if key, ok := gang.KeyOf(pod); ok {
				out[key] = zone
			}
		}
	}
	return out
}

// release gives back the capacity planned earlier for members of the gangs refused (the
// rest of a gang whose launch failed in part and does not fit again): each NodeClaim that
// holds only such members is deleted, which withdraws their plans, so that no node idles
// for a gang that cannot run. The members wait with the others for RetryRefusedGangs.
func (p *Provisioner) release(ctx context.Context, refusals []gang.Refusal, planned map[gang.Key][]Submission) error {
	members := map[types.UID]Submission{}
	var claims []string
	seen := map[string]bool{}
	for _, r := range refusals {
		for _, s := range planned[r.Spec.Key] {
			members[s.Pod.UID] = s
			if n, ok := p.tracker.Get(s.Pod.UID); ok && !seen[n.NodeClaim] {
				seen[n.NodeClaim] = true
				claims = append(claims, n.NodeClaim)
			}
		}
	}
	var released []string
	for _, name := range claims {
		only := true
		for _, pod := range p.tracker.PodsOf(name) {
			_, member := members[pod.UID]
			only = only && member
		}
		if only {
			released = append(released, name)
		}
	}
	p.mu.Lock()
	for uid, s := range members {
		p.refused[uid] = s
	}
	p.mu.Unlock()
	return concurrently(ctx, len(released), func(ctx context.Context, i int) error {
		nc := &karpv1.NodeClaim{}
		if err := p.kube.Get(ctx, client.ObjectKey{Name: released[i]}, nc); err != nil {
			return client.IgnoreNotFound(err)
		}
		p.recorder.Event(nc, corev1.EventTypeNormal, ReasonGangNotProvisioned, "released: the gang its pods belong to no longer fits whole")
		log.FromContext(ctx).Info("released a NodeClaim of a gang that no longer fits whole", "nodeClaim", nc.Name)
		if err := p.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodeClaim %s of a gang that no longer fits: %w", nc.Name, err)
		}
		p.tracker.DropClaim(nc.Name)
		return nil
	})
}

// RetryRefusedGangs queues again the members of the gangs a batch refused, for the next
// batch: what kept them from fitting (a NodePool's limits, its requirements) changed. The
// scheduler hands them over again too, but only when it tries them again, which a change
// to a NodePool does not prompt.
func (p *Provisioner) RetryRefusedGangs() {
	p.mu.Lock()
	n := 0
	for uid, s := range p.refused {
		if _, queued := p.pending[uid]; !queued {
			p.pending[uid] = s
			n++
		}
	}
	p.refused = map[types.UID]Submission{}
	p.mu.Unlock()
	if n > 0 {
		p.batch.Trigger()
	}
}

// RegisterGangRetry retries the gangs refused whenever a NodePool's spec changes (its
// limits raised, its requirements widened).
func (p *Provisioner) RegisterGangRetry(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("provisioning.gangs").
		For(&karpv1.NodePool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			p.RetryRefusedGangs()
			return reconcile.Result{}, nil
		}))
}
