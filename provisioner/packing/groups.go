package packing

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// group is a set of pending pods the planner treats as one: same namespace, labels,
// requests and scheduling constraints, like the replicas of one Deployment. Every pod of a
// group fits wherever another does, so the planner places them in bulk.
type group struct {
	id int
	// key identifies the pods like the group's (see podKeyer).
	key  uint64
	pods []*corev1.Pod
	// next is the index of the first pod not placed yet.
	next int
	rep  *corev1.Pod
	need vec
	// size orders groups, largest first.
	size float64

	// Node constraints. onNodes, when not nil, are the only nodes the required node affinity
	// may allow, by name (see namedNodes).
	onNodes     []string
	affinity    nodeaffinity.RequiredNodeAffinity
	extra       []*nodeaffinity.LazyErrorNodeSelector
	tolerations []corev1.Toleration
	// nodeKey identifies the node constraints: groups with the same key may use the same
	// offers.
	nodeKey string
	// nodeID numbers the node constraints within the base (see base.nodeKeys).
	nodeID int
	// offerKeys says whether the node constraints look at zone or capacity type.
	offerKeys bool
	// volumeTopology says whether the pod's volumes restrict its nodes.
	volumeTopology bool
	ports          []hostPort

	// Pod constraints: topology holds the required ones and the honoured preferences; all
	// also holds the preferences given up.
	topology []*constraint
	all      []*constraint
	// matched are the trackers counting the group's pods.
	matched []*tracker
	// owned are the required anti-affinity terms the group's pods carry; reverse are other
	// pods' terms that match the group's pods.
	owned   []*antiTerm
	reverse []*antiTerm

	// preferences honoured as if required, in the order they are given up.
	preferences []preference
	// relaxed counts the preferences given up.
	relaxed int

	// unschedulable, when set, is why no node can take the pods whatever the plan.
	unschedulable string
	// lastChoice remembers the offer of the last node opened for the group, and the value
	// filled into it, to skip re-evaluating candidates for identical nodes.
	lastChoice *offer
	lastValue  float64
}

func (g *group) remaining() int { return len(g.pods) - g.next }

func (g *group) allConstraints() []*constraint { return g.all }

// matchesNode reports whether the group's node selector, node affinity (with the
// preferred terms it honours) and volume topology accept a node with these labels.
func (g *group) matchesNode(node *corev1.Node) bool {
	if ok, _ := g.affinity.Match(node); !ok {
		return false
	}
	for _, sel := range g.extra {
		if ok, _ := sel.Match(node); !ok {
			return false
		}
	}
	return true
}

// preference is a soft constraint the planner honours until it cannot.
type preference struct {
	weight int32
	// nodeTerm is a preferred node affinity term.
	nodeTerm *corev1.NodeSelectorTerm
	// podTerm is a preferred pod affinity (anti when anti) term.
	podTerm *corev1.PodAffinityTerm
	anti    bool
	// spread is a ScheduleAnyway topology spread constraint.
	spread *corev1.TopologySpreadConstraint
}

// preferences lists the pod's soft constraints in the order they are given up: spread
// constraints first (the scheduler only scores them), then terms by increasing weight.
func preferences(pod *corev1.Pod) []preference {
	var out []preference
	for i := range pod.Spec.TopologySpreadConstraints {
		c := &pod.Spec.TopologySpreadConstraints[i]
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			out = append(out, preference{weight: -1, spread: c})
		}
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.NodeAffinity != nil {
			for i := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				t := &a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
				out = append(out, preference{weight: t.Weight, nodeTerm: &t.Preference})
			}
		}
		if a.PodAffinity != nil {
			for i := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				t := &a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
				out = append(out, preference{weight: t.Weight, podTerm: &t.PodAffinityTerm})
			}
		}
		if a.PodAntiAffinity != nil {
			for i := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				t := &a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
				out = append(out, preference{weight: t.Weight, podTerm: &t.PodAffinityTerm, anti: true})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].weight < out[j].weight })
	return out
}

func (p preference) String() string {
	switch {
	case p.spread != nil:
		return fmt.Sprintf("topology spread on %s (ScheduleAnyway)", p.spread.TopologyKey)
	case p.nodeTerm != nil:
		return fmt.Sprintf("preferred node affinity (weight %d)", p.weight)
	case p.anti:
		return fmt.Sprintf("preferred pod anti-affinity on %s (weight %d)", p.podTerm.TopologyKey, p.weight)
	default:
		return fmt.Sprintf("preferred pod affinity on %s (weight %d)", p.podTerm.TopologyKey, p.weight)
	}
}

// hostPort is a port a pod takes on its node's network.
type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				ip := p.HostIP
				if ip == "" {
					ip = "0.0.0.0"
				}
				out = append(out, hostPort{protocol: proto, ip: ip, port: p.HostPort})
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

// conflicts reports whether two host ports clash, as the NodePorts filter decides: same
// protocol and port, and the same address or either on all addresses.
func (a hostPort) conflicts(b hostPort) bool {
	if a.protocol != b.protocol || a.port != b.port {
		return false
	}
	return a.ip == b.ip || a.ip == "0.0.0.0" || b.ip == "0.0.0.0"
}

func portsConflict(want, have []hostPort) bool {
	for _, a := range want {
		for _, b := range have {
			if a.conflicts(b) {
				return true
			}
		}
	}
	return false
}

// tolerates reports whether tolerations cover every NoSchedule and NoExecute taint, as the
// TaintToleration filter requires.
func tolerates(tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	_, untolerated := untoleratedTaint(tolerations, taints)
	return !untolerated
}

// TaintComparisonOperators says whether tolerations with the Gt and Lt operators are matched
// against numeric taint values, as kube-scheduler does with its TaintTolerationComparisonOperators
// gate: alpha and off in 1.35, so the planner matches them as the shipped scheduler does.
const TaintComparisonOperators = false

func untoleratedTaint(tolerations []corev1.Toleration, taints []corev1.Taint) (corev1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, TaintComparisonOperators)
}

// namedNodes are the nodes required node affinity terms allow by name, when every term
// requires a name among some (a metadata.name field selector with operator In); nil when
// some term does not.
func namedNodes(terms []corev1.NodeSelectorTerm) []string {
	var out []string
	for _, t := range terms {
		i := slices.IndexFunc(t.MatchFields, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == metav1.ObjectNameField && r.Operator == corev1.NodeSelectorOpIn
		})
		if i < 0 {
			return nil
		}
		out = append(out, t.MatchFields[i].Values...)
	}
	if out == nil && len(terms) > 0 {
		return []string{}
	}
	return out
}

func requiredTerms(pod *corev1.Pod) []corev1.NodeSelectorTerm {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	return nil
}

// referencesOfferKeys reports whether a node selector or node selector terms look at the
// labels that vary between offerings of one instance type.
func referencesOfferKeys(selector map[string]string, terms []corev1.NodeSelectorTerm) bool {
	for k := range selector {
		if cloudprovider.IsOfferingLabel(k) {
			return true
		}
	}
	for _, t := range terms {
		for _, e := range t.MatchExpressions {
			if cloudprovider.IsOfferingLabel(e.Key) {
				return true
			}
		}
	}
	return false
}

// podKey identifies pods the planner may treat alike. Pods sharing a key have the same
// namespace, labels, requests, node and pod constraints, host ports and volumes.
type podKeyer struct {
	seed maphash.Seed
	buf  []byte
}

func (k *podKeyer) key(pod *corev1.Pod, need vec) uint64 {
	b := k.buf[:0]
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	proto := func(m interface{ Marshal() ([]byte, error) }) {
		data, _ := m.Marshal()
		b = binary.AppendUvarint(b, uint64(len(data)))
		b = append(b, data...)
	}
	str(pod.Namespace)
	b = appendSortedMap(b, pod.Labels)
	b = appendSortedMap(b, pod.Spec.NodeSelector)
	for _, x := range need {
		b = binary.AppendVarint(b, x)
	}
	if pod.Spec.Affinity != nil {
		proto(pod.Spec.Affinity)
	}
	b = append(b, '|')
	for i := range pod.Spec.Tolerations {
		proto(&pod.Spec.Tolerations[i])
	}
	b = append(b, '|')
	for i := range pod.Spec.TopologySpreadConstraints {
		proto(&pod.Spec.TopologySpreadConstraints[i])
	}
	b = append(b, '|')
	for _, p := range podHostPorts(pod) {
		str(string(p.protocol))
		str(p.ip)
		b = binary.AppendVarint(b, int64(p.port))
	}
	b = append(b, '|')
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			str(v.PersistentVolumeClaim.ClaimName)
		}
		if v.Ephemeral != nil {
			str(pod.Name + "-" + v.Name)
		}
	}
	k.buf = b
	return maphash.Bytes(k.seed, b)
}

func appendSortedMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return binary.AppendUvarint(b, uint64(len(keys)))
}

// nodeKeyOf identifies a group's node constraints, for caching which offers allow it.
func nodeKeyOf(pod *corev1.Pod, extra []*corev1.NodeSelector, honoured []preference) string {
	var sb strings.Builder
	sb.Write(appendSortedMap(nil, pod.Spec.NodeSelector))
	for _, t := range requiredTerms(pod) {
		data, _ := t.Marshal()
		sb.Write(data)
		sb.WriteByte('|')
	}
	sb.WriteByte('#')
	for _, t := range pod.Spec.Tolerations {
		data, _ := t.Marshal()
		sb.Write(data)
	}
	sb.WriteByte('#')
	for _, ns := range extra {
		data, _ := ns.Marshal()
		sb.Write(data)
		sb.WriteByte('|')
	}
	sb.WriteByte('#')
	for _, p := range honoured {
		if p.nodeTerm != nil {
			data, _ := p.nodeTerm.Marshal()
			sb.Write(data)
			sb.WriteByte('|')
		}
	}
	return sb.String()
}
