package disruption

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// zonePins finds the candidates' pods that must keep their zone when they move. The plan
// moves pods as if all left at once, but a PodDisruptionBudget lets them go one at a time,
// and the scheduler places each replacement among the siblings still in place. For a zonal
// topology spread that must hold, the zone that takes the replacement whatever the order is
// the pod's own: each move then leaves the zones' counts as they were. That holds unless the
// counts already break the spread (a ReplicaSet scales down regardless of zones) and the
// pod's zone is one of those with too many; the scheduler then sends the replacement to an
// emptier zone, as the plan may. A pod that requires a zone shared with its siblings keeps
// its zone: they are still there when it moves. The result maps each such pod to its zone.
func zonePins(c Cluster) map[types.NamespacedName]string {
	pins := map[types.NamespacedName]string{}
	zoneOf := make(map[string]string, len(c.Nodes))
	for _, n := range c.Nodes {
		zoneOf[n.Node.Name] = n.Node.Labels[corev1.LabelTopologyZone]
	}
	for _, cand := range c.Candidates {
		zone := zoneOf[cand.Node]
		if zone == "" {
			continue
		}
		for _, p := range cand.Pods {
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			if sharesZone(p) {
				pins[key] = zone
			}
			for _, tsc := range p.Spec.TopologySpreadConstraints {
				if tsc.TopologyKey == corev1.LabelTopologyZone && tsc.WhenUnsatisfiable == corev1.DoNotSchedule && backInPlace(c, p, zone, tsc) {
					pins[key] = zone
				}
			}
		}
	}
	return pins
}

// sharesZone reports whether the pod requires a zone running pods like itself.
func sharesZone(p *corev1.Pod) bool {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAffinity == nil {
		return false
	}
	for _, term := range p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelTopologyZone {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err == nil && sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}

// backInPlace reports whether the scheduler lets the pod's replacement into the pod's own
// zone once the pod is gone: the zone then runs no more than maxSkew - 1 above the emptiest
// zone the pod may go to.
func backInPlace(c Cluster, p *corev1.Pod, zone string, tsc corev1.TopologySpreadConstraint) bool {
	sel := packing.SpreadSelector(p, &tsc)
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	counts := map[string]int{}
	for _, n := range c.Nodes {
		z := n.Node.Labels[corev1.LabelTopologyZone]
		if z == "" {
			continue
		}
		if ok, _ := affinity.Match(n.Node); !ok {
			continue
		}
		counts[z] += 0
		for _, other := range n.Pods {
			if other.Namespace == p.Namespace && other.DeletionTimestamp == nil && sel.Matches(labels.Set(other.Labels)) {
				counts[z]++
			}
		}
	}
	counts[zone]--
	least := counts[zone]
	for _, n := range counts {
		least = min(least, n)
	}
	return counts[zone]+1-least <= int(tsc.MaxSkew)
}

// pinToZone requires the pod's copy to land in the zone, on top of its own node affinity.
func pinToZone(p *corev1.Pod, zone string) {
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	required := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
		}
		return
	}
	for i := range required.NodeSelectorTerms {
		required.NodeSelectorTerms[i].MatchExpressions = append(required.NodeSelectorTerms[i].MatchExpressions, req)
	}
}
