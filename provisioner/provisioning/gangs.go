package provisioning

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// ReasonGangNotProvisioned: a gang's members do not all fit, so none of them gets capacity.
const ReasonGangNotProvisioned = "GangNotProvisioned"

// gangsOf returns the specs of the gangs the pods belong to, and per gang how many of its
// members already run or have capacity planned: those are not in this batch but count
// toward its MinMember.
func (p *Provisioner) gangsOf(ctx context.Context, pods []*corev1.Pod, unbound map[types.UID]*corev1.Pod) (map[gang.Key]gang.Spec, map[gang.Key]int, error) {
	if p.gangs == nil {
		return nil, nil, nil
	}
	specs, counted := map[gang.Key]gang.Spec{}, map[gang.Key]int{}
	inBatch := map[types.UID]bool{}
	for _, pod := range pods {
		inBatch[pod.UID] = true
	}
	for _, pod := range pods {
		key, ok := gang.KeyOf(pod)
		if !ok {
			continue
		}
		if _, seen := specs[key]; seen {
			continue
		}
		spec, declared, err := p.gangs.Gang(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		if !declared {
			continue
		}
		specs[key] = spec
		n, err := p.membersPlaced(ctx, key, inBatch, unbound)
		if err != nil {
			return nil, nil, err
		}
		counted[key] = n
	}
	return specs, counted, nil
}

// membersPlaced counts the gang's members outside the batch that are bound to a node or
// planned onto a NodeClaim.
func (p *Provisioner) membersPlaced(ctx context.Context, key gang.Key, inBatch map[types.UID]bool, unbound map[types.UID]*corev1.Pod) (int, error) {
	list := &corev1.PodList{}
	if err := p.kube.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{gang.Label: key.Name}); err != nil {
		return 0, fmt.Errorf("listing the pods of gang %s: %w", key, err)
	}
	n := 0
	for i := range list.Items {
		pod := &list.Items[i]
		if inBatch[pod.UID] || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, pending := unbound[pod.UID]; !pending || p.tracker.Planned(pod.UID) {
			n++
		}
	}
	return n, nil
}

// solveGangs plans the batch's pods all or nothing per gang, and tells each refused gang's
// PodGroup and pods why it got no capacity. It returns the plan and the pods it planned:
// the input's, but the members of the gangs refused.
func (p *Provisioner) solveGangs(ctx context.Context, input packing.Input, unbound map[types.UID]*corev1.Pod) (packing.Plan, []*corev1.Pod, error) {
	specs, counted, err := p.gangsOf(ctx, input.Pods, unbound)
	if err != nil {
		return packing.Plan{}, nil, err
	}
	if len(specs) == 0 {
		return packing.Solve(input), input.Pods, nil
	}
	plan, refusals := gang.Plan(input.Pods, specs, counted, func(pods []*corev1.Pod) packing.Plan {
		in := input
		in.Pods = pods
		return packing.Solve(in)
	})
	refused := map[*corev1.Pod]bool{}
	for _, r := range refusals {
		msg := r.Message()
		if r.Spec.Object != nil {
			p.recorder.Event(r.Spec.Object, corev1.EventTypeWarning, ReasonGangNotProvisioned, msg)
		}
		for _, pod := range r.Pods {
			refused[pod] = true
			p.recorder.Event(pod, corev1.EventTypeWarning, ReasonGangNotProvisioned, msg)
		}
		log.FromContext(ctx).Info("gang not provisioned", "gang", r.Spec.Key.String(), "minMember", r.Spec.MinMember, "pending", len(r.Pods), "placed", r.Placed, "counted", r.Counted)
	}
	planned := slices.DeleteFunc(slices.Clone(input.Pods), func(pod *corev1.Pod) bool { return refused[pod] })
	return plan, planned, nil
}
