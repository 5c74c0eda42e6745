package provisioning

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// ReasonPlanned on a pod: a plan put it onto a NodeClaim, new or in flight; the message says
// which, the offering expected and how many other pods share it.
const ReasonPlanned = "Planned"

// recordPlannedOntoNew records Planned on each pod of a NodeClaim just created.
func (p *Provisioner) recordPlannedOntoNew(nodeClaim string, planned *packing.NewNodeClaim) {
	c := planned.Cheapest
	offering := fmt.Sprintf("%s %s in %s, $%.4f/hour", c.InstanceType, c.CapacityType, c.Zone, c.Price)
	p.recordPlanned(nodeClaim, offering, planned.Pods, len(planned.Pods)-1)
}

// recordPlannedOntoInFlight records Planned on each pod added to an in-flight NodeClaim,
// and Nominated when its node name is already known.
func (p *Provisioner) recordPlannedOntoInFlight(placement packing.Placement) {
	nc := placement.Node.NodeClaim
	p.recordPlanned(nc.Name, describeInFlight(nc), placement.Pods, len(placement.Node.Pods)+len(placement.Pods)-1)
	for _, pod := range placement.Pods {
		if n, ok := p.tracker.Get(pod.UID); ok && n.NodeClaim == nc.Name && n.NodeName != "" {
			nomination.RecordNominated(p.recorder, n.Pod, n.NodeName, nc.Name)
		}
	}
}

func (p *Provisioner) recordPlanned(nodeClaim, offering string, pods []*corev1.Pod, others int) {
	parts := []string{fmt.Sprintf("with %d other %s", others, plural(others, "pod", "pods"))}
	if offering != "" {
		parts = append([]string{offering}, parts...)
	}
	for _, pod := range pods {
		ref := nomination.PodReference(nomination.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID})
		p.recorder.Eventf(ref, corev1.EventTypeNormal, ReasonPlanned, "planned onto NodeClaim %s (%s)", nodeClaim, strings.Join(parts, ", "))
	}
}

// describeInFlight says what an in-flight NodeClaim is as far as its labels tell: its
// instance type, capacity type and zone once launched, fewer of them before.
func describeInFlight(nc *karpv1.NodeClaim) string {
	var words []string
	for _, key := range []string{corev1.LabelInstanceTypeStable, karpv1.CapacityTypeLabelKey} {
		if v := nc.Labels[key]; v != "" {
			words = append(words, v)
		}
	}
	if zone := nc.Labels[corev1.LabelTopologyZone]; zone != "" {
		words = append(words, "in", zone)
	}
	return strings.Join(words, " ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
