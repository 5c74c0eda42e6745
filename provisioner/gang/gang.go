// Package gang plans capacity for pods that only run together, all or nothing: a gang's
// pending members get capacity when, with the members already running or planned, at least
// its MinMember of them have a place, and none of them gets any otherwise. A gang is
// declared today by a Coscheduling PodGroup (scheduling.x-k8s.io/v1alpha1) its pods name in
// the pod-group label; the planner sees only a Spec, so upstream's own gang API can declare
// one the same way.
package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Label is the pod label that names a pod's PodGroup, Coscheduling's.
const Label = schedv1alpha1.PodGroupLabel

// SingleZoneAnnotation is the PodGroup annotation that, set to "true", keeps its gang in one zone: the zone
// where capacity for all of it costs least. Distributed jobs pay for traffic between zones.
const SingleZoneAnnotation = "tailor.sh/single-zone"

// Key names a gang: the namespace of its pods and its name.
type Key = types.NamespacedName

// Spec is what a gang asks for.
type Spec struct {
	Key Key
	// MinMember is how many of its pods must run together. A gang of one or none is no
	// gang: its pods are planned each on its own.
	MinMember int
	// SingleZone keeps the gang's pending members in one zone.
	SingleZone bool
	// Object declares the gang; events about it go there. Nil when there is none to tell.
	Object client.Object
}

// KeyOf returns the gang a pod belongs to, from the pod-group label.
func KeyOf(p *corev1.Pod) (Key, bool) {
	name := p.Labels[Label]
	if name == "" {
		return Key{}, false
	}
	return Key{Namespace: p.Namespace, Name: name}, true
}

// Reader returns the spec of gangs. It is the provisioner's; PodGroups reads them from the
// cluster.
type Reader interface {
	// Gang returns the gang's spec; false when nothing declares a gang of that name.
	Gang(ctx context.Context, key Key) (Spec, bool, error)
}

// PodGroups reads gangs from Coscheduling's PodGroups. Where the PodGroup kind is not
// served (the CRD is not installed), no pod is in a gang.
type PodGroups struct {
	Client client.Reader
}

// Gang reads the PodGroup the key names.
func (r PodGroups) Gang(ctx context.Context, key Key) (Spec, bool, error) {
	pg := &schedv1alpha1.PodGroup{}
	if err := r.Client.Get(ctx, key, pg); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return Spec{}, false, nil
		}
		return Spec{}, false, fmt.Errorf("reading PodGroup %s: %w", key, err)
	}
	return Spec{Key: key, MinMember: int(pg.Spec.MinMember), SingleZone: pg.Annotations[SingleZoneAnnotation] == "true", Object: pg}, true, nil
}

// Refusal is a gang that gets no capacity in a batch, and why.
type Refusal struct {
	Spec Spec
	// Pods are its pending members the batch leaves unplanned.
	Pods []*corev1.Pod
	// Counted is how many of its members already run or have capacity planned.
	Counted int
	// Placed is how many of its pending members the plan found a place for.
	Placed int
	// Reasons say why the others found none, one per distinct reason.
	Reasons []string
}

// Message says why the gang gets no capacity, for its PodGroup and its pods' events.
func (r Refusal) Message() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gang %s needs %d pods running together: %d already run or have capacity planned, and of its %d pending pods only %d could be placed",
		r.Spec.Key, r.Spec.MinMember, r.Counted, len(r.Pods), r.Placed)
	if len(r.Reasons) > 0 {
		fmt.Fprintf(&b, " (the others: %s)", strings.Join(r.Reasons, "; "))
	}
	b.WriteString("; no capacity is launched for any of them until all fit")
	return b.String()
}

// Batch is what Plan plans: pods, the specs of the gangs they belong to (see KeyOf), and
// per gang how many of its members already run or have capacity planned.
type Batch struct {
	Pods    []*corev1.Pod
	Gangs   map[Key]Spec
	Counted map[Key]int
	// Zones the NodePools offer capacity in, where a gang kept to one zone may go.
	Zones []string
	// ZoneOf is, per gang kept to one zone, the zone its members already run or have
	// capacity planned in: the rest of it goes there too.
	ZoneOf map[Key]string
}

// Zones are the zones the NodePools' instance types are offered in, in order: where a gang
// kept to one zone may go (Batch.Zones).
func Zones(pools []packing.NodePool) []string {
	var zones []string
	for _, np := range pools {
		for _, it := range np.InstanceTypes {
			for _, o := range it.Offerings {
				if !slices.Contains(zones, o.Zone) {
					zones = append(zones, o.Zone)
				}
			}
		}
	}
	slices.Sort(zones)
	return zones
}

// Plan plans the batch's pods with solve, all or nothing per gang. A gang whose counted and
// placed members number fewer than its MinMember is left out of the plan whole, and the
// other pods are planned again without it, so that none of its capacity is launched and no
// other pod is sized around it. A gang kept to one zone is planned in each zone in turn and
// goes to the one where the batch costs least. Plan returns the plan, the pods it planned
// (those of a gang kept to one zone required to be there), and the gangs refused, in the
// order they were left out.
func Plan(b Batch, solve func([]*corev1.Pod) packing.Plan) (packing.Plan, []*corev1.Pod, []Refusal) {
	left, refusals := oneZoneEach(b, solve)
	for {
		plan := solve(left)
		short := shortGangs(left, plan, b.Gangs, b.Counted)
		if len(short) == 0 {
			return plan, left, refusals
		}
		refusals = append(refusals, short...)
		left = without(left, short)
	}
}

// oneZoneEach pins each gang kept to one zone to the zone where it fits and the batch costs
// least, and refuses those that fit in none.
func oneZoneEach(b Batch, solve func([]*corev1.Pod) packing.Plan) ([]*corev1.Pod, []Refusal) {
	pods := b.Pods
	var refusals []Refusal
	for _, key := range sortedKeys(b.Gangs) {
		spec := b.Gangs[key]
		if !spec.SingleZone || spec.MinMember <= 1 {
			continue
		}
		var best []*corev1.Pod
		bestPrice := 0.0
		var first []Refusal
		zones := b.Zones
		if zone, ok := b.ZoneOf[key]; ok {
			zones = []string{zone}
		}
		for _, zone := range zones {
			trial := pinned(pods, key, zone)
			plan := solve(trial)
			short := shortGangs(trial, plan, map[Key]Spec{key: spec}, b.Counted)
			if len(short) > 0 {
				if first == nil {
					first = short
				}
				continue
			}
			if price := plan.PricePerHour(); best == nil || price < bestPrice {
				best, bestPrice = trial, price
			}
		}
		if best != nil {
			pods = best
			continue
		}
		if first == nil {
			first = []Refusal{{Spec: spec, Counted: b.Counted[key], Pods: membersOf(pods, key)}}
		}
		first[0].Reasons = append([]string{"no one zone has room for enough of them"}, first[0].Reasons...)
		refusals = append(refusals, first...)
		pods = without(pods, first)
	}
	return pods, refusals
}

// pinned is the pods with the gang's members required to run in the zone.
func pinned(pods []*corev1.Pod, key Key, zone string) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p
		if k, ok := KeyOf(p); ok && k == key {
			out[i] = inZone(p, zone)
		}
	}
	return out
}

// inZone is a copy of the pod required to run in the zone, besides what its own node
// affinity requires.
func inZone(p *corev1.Pod, zone string) *corev1.Pod {
	p = p.DeepCopy()
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := p.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	return p
}

// without is the pods but the members of the gangs refused.
func without(pods []*corev1.Pod, refused []Refusal) []*corev1.Pod {
	out := map[Key]bool{}
	for _, r := range refused {
		out[r.Spec.Key] = true
	}
	return slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool {
		key, ok := KeyOf(p)
		return ok && out[key]
	})
}

// membersOf are the gang's pods among pods.
func membersOf(pods []*corev1.Pod, key Key) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if k, ok := KeyOf(p); ok && k == key {
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys(gangs map[Key]Spec) []Key {
	keys := make([]Key, 0, len(gangs))
	for key := range gangs {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// shortGangs are the gangs among the pods the plan does not give enough members a place,
// in order of their names.
func shortGangs(pods []*corev1.Pod, plan packing.Plan, gangs map[Key]Spec, counted map[Key]int) []Refusal {
	placed := map[types.UID]bool{}
	for _, pl := range plan.Existing {
		for _, p := range pl.Pods {
			placed[p.UID] = true
		}
	}
	for _, nc := range plan.NewNodeClaims {
		for _, p := range nc.Pods {
			placed[p.UID] = true
		}
	}
	reasons := map[types.UID]string{}
	for _, u := range plan.Unschedulable {
		reasons[u.Pod.UID] = u.Reason
	}
	members := map[Key]*Refusal{}
	var keys []Key
	for _, p := range pods {
		key, ok := KeyOf(p)
		spec, declared := gangs[key]
		if !ok || !declared || spec.MinMember <= 1 {
			continue
		}
		r, seen := members[key]
		if !seen {
			r = &Refusal{Spec: spec, Counted: counted[key]}
			members[key] = r
			keys = append(keys, key)
		}
		r.Pods = append(r.Pods, p)
		if placed[p.UID] {
			r.Placed++
		} else if reason := reasons[p.UID]; reason != "" && !slices.Contains(r.Reasons, reason) {
			r.Reasons = append(r.Reasons, reason)
		}
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	var short []Refusal
	for _, key := range keys {
		if r := members[key]; r.Counted+r.Placed < r.Spec.MinMember {
			short = append(short, *r)
		}
	}
	return short
}
