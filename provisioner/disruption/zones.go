package disruption

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// zonesOf maps each node to its zone.
func zonesOf(nodes []packing.Node) map[string]string {
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		out[n.Node.Name] = n.Node.Labels[corev1.LabelTopologyZone]
	}
	return out
}

// zonePin is what a moving pod must keep of its zone.
type zonePin struct {
	// zone is the pod's own zone, which it may always keep.
	zone string
	// shared, for a pod that requires a zone shared with pods like itself (and is not held
	// in its zone by a topology spread), lists per such requirement the nodes outside the
	// pod's zone that run pods the requirement selects. The pod may also move to a zone
	// that, for every requirement, one of those nodes stays in: the pods there are still
	// there when the pod's replacement is scheduled.
	shared [][]string
}

// zones are the zones the pod may move to when the nodes away go: its own and those its
// requirements share with pods that stay.
func (z zonePin) zones(away map[string]bool, zoneOf map[string]string) []string {
	var allowed map[string]bool
	for _, nodes := range z.shared {
		staying := map[string]bool{}
		for _, n := range nodes {
			if !away[n] && (allowed == nil || allowed[zoneOf[n]]) {
				staying[zoneOf[n]] = true
			}
		}
		allowed = staying
	}
	out := []string{z.zone}
	for zone := range allowed {
		if zone != z.zone {
			out = append(out, zone)
		}
	}
	slices.Sort(out[1:])
	return out
}

// zonePins finds the candidates' pods that must keep their zone when they move. The plan
// moves pods as if all left at once, but a PodDisruptionBudget lets them go one at a time,
// and the scheduler places each replacement among the siblings still in place. For a zonal
// topology spread that must hold, the zone that takes the replacement whatever the order is
// the pod's own: each move then leaves the zones' counts as they were. That holds unless the
// counts already break the spread (a ReplicaSet scales down regardless of zones) and the
// pod's zone is one of those with too many; the scheduler then sends the replacement to an
// emptier zone, as the plan may. A pod that requires a zone shared with its siblings keeps
// its zone, where they are still there when it moves, or goes to a zone where such pods run
// on nodes that stay (see zonePin). The result maps each such pod to its pin.
func zonePins(c Cluster) map[types.NamespacedName]zonePin {
	pins := map[types.NamespacedName]zonePin{}
	census := newZoneCensus(c)
	for _, cand := range c.Candidates {
		zone := c.zoneOf[cand.Node]
		if zone == "" {
			continue
		}
		for _, p := range cand.Pods {
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			held := false
			for _, tsc := range p.Spec.TopologySpreadConstraints {
				if tsc.TopologyKey == corev1.LabelTopologyZone && tsc.WhenUnsatisfiable == corev1.DoNotSchedule && census.backInPlace(p, zone, tsc) {
					held = true
				}
			}
			switch terms := zoneSharing(p); {
			case held:
				pins[key] = zonePin{zone: zone}
			case len(terms) > 0:
				pins[key] = zonePin{zone: zone, shared: census.sharedWith(p, zone, terms)}
			}
		}
	}
	return pins
}

// zoneSharing is the pod's required zonal affinity terms that select the pod itself.
func zoneSharing(p *corev1.Pod) []corev1.PodAffinityTerm {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAffinity == nil {
		return nil
	}
	var out []corev1.PodAffinityTerm
	for _, term := range p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelTopologyZone {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err == nil && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, term)
		}
	}
	return out
}

// zoneCensus counts, zone by zone, the pods the zonal constraints of the candidates' pods
// select, once per selector: the replicas of a Deployment share their constraints.
type zoneCensus struct {
	c Cluster
	// spread counts, per spread selector, namespace and node affinity, the pods selected
	// on the nodes of each zone the affinity accepts.
	spread map[string]map[string]int
	// running lists, per term selector and namespaces, the nodes running pods selected.
	running map[string][]string
	// accepted counts, per node affinity, the pods on the nodes it accepts by label set.
	accepted map[string]*zonedSets
}

// zonedSets are the pods on some nodes with a zone, by namespace and labels, counted per
// zone and indexed by each of their labels, and the zones of those nodes.
type zonedSets struct {
	sets    []*zonedSet
	byLabel map[string][]*zonedSet
	zones   []string
}

// zonedSet is the pods of one namespace with the same labels, counted per zone.
type zonedSet struct {
	namespace string
	labels    labels.Set
	perZone   map[string]int
}

func newZoneCensus(c Cluster) *zoneCensus {
	return &zoneCensus{c: c, spread: map[string]map[string]int{}, running: map[string][]string{}, accepted: map[string]*zonedSets{}}
}

// sharedWith lists, per term, the nodes outside the zone running pods the term selects, in
// the pod's namespace or those the term names. A term that selects namespaces by label
// lists none: the pod then keeps its zone.
func (z *zoneCensus) sharedWith(p *corev1.Pod, zone string, terms []corev1.PodAffinityTerm) [][]string {
	out := make([][]string, len(terms))
	for i, term := range terms {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || term.NamespaceSelector != nil {
			continue
		}
		namespaces := term.Namespaces
		if len(namespaces) == 0 {
			namespaces = []string{p.Namespace}
		}
		for _, n := range z.runningSelected(namespaces, sel) {
			if z.c.zoneOf[n] != zone {
				out[i] = append(out[i], n)
			}
		}
	}
	return out
}

// runningSelected lists the nodes with a zone that run pods the selector selects in the
// namespaces.
func (z *zoneCensus) runningSelected(namespaces []string, sel labels.Selector) []string {
	key := strings.Join(namespaces, ",") + "|" + sel.String()
	if nodes, ok := z.running[key]; ok {
		return nodes
	}
	var nodes []string
	for _, n := range z.c.Nodes {
		if z.c.zoneOf[n.Node.Name] == "" {
			continue
		}
		if slices.ContainsFunc(n.Pods, func(other *corev1.Pod) bool {
			return other.DeletionTimestamp == nil && slices.Contains(namespaces, other.Namespace) && sel.Matches(labels.Set(other.Labels))
		}) {
			nodes = append(nodes, n.Node.Name)
		}
	}
	z.running[key] = nodes
	return nodes
}

// backInPlace reports whether the scheduler lets the pod's replacement into the pod's own
// zone once the pod is gone: the zone then runs no more than maxSkew - 1 above the emptiest
// zone the pod may go to.
func (z *zoneCensus) backInPlace(p *corev1.Pod, zone string, tsc corev1.TopologySpreadConstraint) bool {
	counts := maps.Clone(z.spreadCounts(p, tsc))
	counts[zone]--
	least := counts[zone]
	for _, n := range counts {
		least = min(least, n)
	}
	return counts[zone]+1-least <= int(tsc.MaxSkew)
}

// spreadCounts counts per zone the pods the spread constraint of the pod selects, on the
// nodes its node affinity accepts; every zone of those nodes is counted, if only as zero.
func (z *zoneCensus) spreadCounts(p *corev1.Pod, tsc corev1.TopologySpreadConstraint) map[string]int {
	sel := packing.SpreadSelector(p, &tsc)
	affinityKey := nodeAffinityKey(p)
	key := p.Namespace + "|" + sel.String() + "|" + affinityKey
	if counts, ok := z.spread[key]; ok {
		return counts
	}
	sets := z.acceptedBy(p, affinityKey)
	counts := map[string]int{}
	for _, zone := range sets.zones {
		counts[zone] = 0
	}
	for _, set := range sets.selectable(sel) {
		if set.namespace == p.Namespace && sel.Matches(set.labels) {
			for zone, n := range set.perZone {
				counts[zone] += n
			}
		}
	}
	z.spread[key] = counts
	return counts
}

// acceptedBy counts by label set the pods on the nodes with a zone that the pod's node
// affinity (whose key is given) accepts, once per node affinity.
func (z *zoneCensus) acceptedBy(p *corev1.Pod, affinityKey string) *zonedSets {
	if sets, ok := z.accepted[affinityKey]; ok {
		return sets
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	sets := &zonedSets{byLabel: map[string][]*zonedSet{}}
	byKey := map[string]*zonedSet{}
	zones := map[string]bool{}
	for _, n := range z.c.Nodes {
		zone := n.Node.Labels[corev1.LabelTopologyZone]
		if zone == "" {
			continue
		}
		if ok, _ := affinity.Match(n.Node); !ok {
			continue
		}
		zones[zone] = true
		for _, other := range n.Pods {
			if other.DeletionTimestamp != nil {
				continue
			}
			k := other.Namespace + "|" + labels.Set(other.Labels).String()
			set, ok := byKey[k]
			if !ok {
				set = &zonedSet{namespace: other.Namespace, labels: labels.Set(other.Labels), perZone: map[string]int{}}
				byKey[k] = set
				sets.sets = append(sets.sets, set)
				for lk, lv := range other.Labels {
					sets.byLabel[lk+"="+lv] = append(sets.byLabel[lk+"="+lv], set)
				}
			}
			set.perZone[zone]++
		}
	}
	sets.zones = slices.Sorted(maps.Keys(zones))
	z.accepted[affinityKey] = sets
	return sets
}

// selectable are the label sets the selector may select: those with a label it requires,
// or every set.
func (s *zonedSets) selectable(sel labels.Selector) []*zonedSet {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if values := r.Values(); (r.Operator() == selection.Equals || r.Operator() == selection.DoubleEquals || r.Operator() == selection.In) && values.Len() == 1 {
			return s.byLabel[r.Key()+"="+values.UnsortedList()[0]]
		}
	}
	return s.sets
}

// nodeAffinityKey identifies the pod's node selector and required node affinity.
func nodeAffinityKey(p *corev1.Pod) string {
	var b strings.Builder
	keys := slices.Sorted(maps.Keys(p.Spec.NodeSelector))
	for _, k := range keys {
		b.WriteString(k + "=" + p.Spec.NodeSelector[k] + ",")
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		raw, _ := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.Marshal()
		b.Write(raw)
	}
	return b.String()
}

// pinToZones requires the pod's copy to land in one of the zones, on top of its own node
// affinity.
func pinToZones(p *corev1.Pod, zones []string) {
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}
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
