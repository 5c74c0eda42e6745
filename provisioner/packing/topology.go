package packing

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The planner mirrors the InterPodAffinity and PodTopologySpread filters: trackers count,
// per topology domain (a value of the topology key; a node for kubernetes.io/hostname),
// the pods a label selector matches, over existing pods and pods planned in this round.

// tracker counts pods matching a selector per domain of a topology key.
type tracker struct {
	key string
	// keyID numbers the key (see topologyIndex.keys).
	keyID      int
	namespaces map[string]bool // nil: every namespace
	selector   labels.Selector
	counts     map[string]int
	total      int
	// spread is set for topology spread constraints, whose counts only include pods on
	// nodes eligible under the constraint's node inclusion policies.
	spread *spread
	// round is the last planning round whose groups use the tracker.
	round int
	// sets caches whether the selector matches the pods of a label set.
	sets map[*labelSet]bool
	// label is a key=value label every pod the selector matches has, or "" (indexLabel).
	label string
}

// spread is what a topology spread constraint adds to its tracker.
type spread struct {
	owner         *group
	maxSkew       int
	minDomains    int
	honorAffinity bool
	honorTaints   bool
	// quota is, for keys other than hostname, how many more of the constraint's pods each
	// domain may take: computed once so the final counts are balanced within maxSkew.
	quota map[string]int
	// eligible caches eligibility per existing node and per offering of planned nodes.
	eligible map[any]bool
	// domains caches eligibleDomains.
	domains map[string][]*node
}

func (t *tracker) matches(namespace string, l labels.Set) bool {
	return (t.namespaces == nil || t.namespaces[namespace]) && t.selector.Matches(l)
}

func (t *tracker) matchesSet(set *labelSet) bool {
	ok, cached := t.sets[set]
	if !cached {
		ok = t.matches(set.namespace, set.labels)
		if t.sets == nil {
			t.sets = map[*labelSet]bool{}
		}
		t.sets[set] = ok
	}
	return ok
}

// countsOn reports whether pods on the node count for the tracker.
func (t *tracker) countsOn(n *node) bool {
	if t.spread == nil {
		return true
	}
	var key any = n.input
	if n.offer != nil {
		key = n.offer
	}
	if ok, cached := t.spread.eligible[key]; cached {
		return ok
	}
	ok := t.spread.eligibleNode(n, t.key)
	t.spread.eligible[key] = ok
	return ok
}

func (s *spread) eligibleNode(n *node, key string) bool {
	if _, ok := n.domain(key); !ok {
		return false
	}
	if n.offer != nil {
		if s.honorAffinity && !s.owner.matchesRequired(n.offer.nodeObject()) {
			return false
		}
		return !s.honorTaints || tolerates(s.owner.tolerations, n.pool.taints)
	}
	if s.honorAffinity && !s.owner.matchesRequired(n.input.Node) {
		return false
	}
	return !s.honorTaints || tolerates(s.owner.tolerations, n.input.Node.Spec.Taints)
}

// matchesRequired is the pod's own node selector and required node affinity, without
// honoured preferences or volumes: what nodeAffinityPolicy Honor looks at.
func (g *group) matchesRequired(node *corev1.Node) bool {
	ok, _ := g.affinity.Match(node)
	return ok
}

// antiTerm is a required pod anti-affinity term; owners counts the pods carrying it per
// domain, since the InterPodAffinity filter also keeps pods away from pods whose
// anti-affinity they match.
type antiTerm struct {
	key        string
	keyID      int
	namespaces map[string]bool
	selector   labels.Selector
	owners     map[string]int
	// refs counts the pods on the round's nodes that carry the term.
	refs int
	// round is the last planning round whose groups carry the term.
	round int
}

func (a *antiTerm) matches(namespace string, l labels.Set) bool {
	return (a.namespaces == nil || a.namespaces[namespace]) && a.selector.Matches(l)
}

type constraintKind int

const (
	kindSpread constraintKind = iota
	kindAffinity
	kindAnti
)

// constraint is one pod topology constraint of a group.
type constraint struct {
	kind constraintKind
	t    *tracker
	// self is whether the group's pods match the constraint's selector.
	self bool
	// preferred marks a soft constraint honoured as required.
	preferred bool
}

func (c *constraint) String() string {
	switch c.kind {
	case kindSpread:
		return fmt.Sprintf("topology spread on %s (maxSkew %d)", c.t.key, c.t.spread.maxSkew)
	case kindAffinity:
		return fmt.Sprintf("pod affinity on %s (%s)", c.t.key, c.t.selector)
	default:
		return fmt.Sprintf("pod anti-affinity on %s (%s)", c.t.key, c.t.selector)
	}
}

// topologyIndex holds the round's trackers and anti-affinity terms, indexed by one label
// their selectors require so that matching pods against them stays cheap.
type topologyIndex struct {
	trackers     map[string]*tracker
	trackerIndex labelIndex[*tracker]
	anti         map[string]*antiTerm
	antiIndex    labelIndex[*antiTerm]
	// onNewTracker counts the pods already on nodes for a tracker when it is created.
	onNewTracker func(*tracker)
	// keys numbers the topology keys of trackers and terms, so that nodes can cache their
	// values by number.
	keys numbering
}

func newTopologyIndex() *topologyIndex {
	return &topologyIndex{trackers: map[string]*tracker{}, anti: map[string]*antiTerm{}, keys: numbering{}}
}

// labelIndex finds the items whose selectors may match a pod's labels: those indexed under
// a key=value pair the selector requires, and those with no such pair.
type labelIndex[T interface {
	matches(string, labels.Set) bool
}] struct {
	byLabel map[string][]T
	rest    []T
}

func (x *labelIndex[T]) add(item T, label string) {
	if label == "" {
		x.rest = append(x.rest, item)
		return
	}
	if x.byLabel == nil {
		x.byLabel = map[string][]T{}
	}
	x.byLabel[label] = append(x.byLabel[label], item)
}

// matching calls fn for every item whose selector and namespaces match the pod's.
func (x *labelIndex[T]) matching(namespace string, l map[string]string, fn func(T)) {
	set := labels.Set(l)
	for k, v := range l {
		for _, item := range x.byLabel[k+"="+v] {
			if item.matches(namespace, set) {
				fn(item)
			}
		}
	}
	for _, item := range x.rest {
		if item.matches(namespace, set) {
			fn(item)
		}
	}
}

// indexLabel is a key=value pair every pod the selector matches has, or "".
func indexLabel(sel *metav1.LabelSelector) string {
	if sel == nil {
		return ""
	}
	best := ""
	for k, v := range sel.MatchLabels {
		if best == "" || k+"="+v < best {
			best = k + "=" + v
		}
	}
	if best != "" {
		return best
	}
	for _, e := range sel.MatchExpressions {
		if e.Operator == metav1.LabelSelectorOpIn && len(e.Values) == 1 {
			return e.Key + "=" + e.Values[0]
		}
	}
	return ""
}

// termNamespaces is the namespaces an affinity term looks at: its namespaces, the pod's own
// when it names none, every namespace for a namespace selector (the planner has no
// namespace labels, so a non-empty namespace selector is read as every namespace).
func termNamespaces(pod *corev1.Pod, term *corev1.PodAffinityTerm) map[string]bool {
	if term.NamespaceSelector != nil {
		return nil
	}
	out := map[string]bool{}
	for _, ns := range term.Namespaces {
		out[ns] = true
	}
	if len(out) == 0 {
		out[pod.Namespace] = true
	}
	return out
}

func namespacesKey(ns map[string]bool) string {
	if ns == nil {
		return "*"
	}
	list := make([]string, 0, len(ns))
	for n := range ns {
		list = append(list, n)
	}
	slices.Sort(list)
	return strings.Join(list, ",")
}

func selectorOf(sel *metav1.LabelSelector) labels.Selector {
	if sel == nil {
		return labels.Nothing()
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return labels.Nothing()
	}
	return s
}

// termTracker returns the tracker of an affinity term, creating it.
func (x *topologyIndex) termTracker(pod *corev1.Pod, term *corev1.PodAffinityTerm) *tracker {
	ns := termNamespaces(pod, term)
	sel := selectorOf(term.LabelSelector)
	id := "term|" + term.TopologyKey + "|" + namespacesKey(ns) + "|" + sel.String()
	if t, ok := x.trackers[id]; ok {
		return t
	}
	t := &tracker{key: term.TopologyKey, namespaces: ns, selector: sel, counts: map[string]int{}}
	x.add(id, t, indexLabel(term.LabelSelector))
	return t
}

// spreadLabelSelector is the label selector of the pods a topology spread constraint of the
// pod counts: the constraint's, narrowed to the pod's values of its match label keys.
func spreadLabelSelector(pod *corev1.Pod, c *corev1.TopologySpreadConstraint) *metav1.LabelSelector {
	ls := c.LabelSelector
	if ls != nil && len(c.MatchLabelKeys) > 0 {
		ls = ls.DeepCopy()
		for _, k := range c.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
	}
	return ls
}

// SpreadSelector selects the pods a topology spread constraint of the pod counts, as the
// scheduler does; it selects nothing when the constraint has no valid selector.
func SpreadSelector(pod *corev1.Pod, c *corev1.TopologySpreadConstraint) labels.Selector {
	return selectorOf(spreadLabelSelector(pod, c))
}

// spreadTracker returns the tracker of a topology spread constraint of the group's pods.
func (x *topologyIndex) spreadTracker(g *group, c *corev1.TopologySpreadConstraint) *tracker {
	ls := spreadLabelSelector(g.rep, c)
	sel := selectorOf(ls)
	s := &spread{
		owner:         g,
		maxSkew:       int(c.MaxSkew),
		minDomains:    1,
		honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
		honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
		eligible:      map[any]bool{},
	}
	if c.MinDomains != nil {
		s.minDomains = int(*c.MinDomains)
	}
	id := fmt.Sprintf("spread|%s|%s|%s|%d|%d|%t|%t|%s", c.TopologyKey, g.rep.Namespace, sel, s.maxSkew, s.minDomains, s.honorAffinity, s.honorTaints, nodeKeyOf(g.rep, nil, nil))
	if t, ok := x.trackers[id]; ok {
		return t
	}
	t := &tracker{key: c.TopologyKey, namespaces: map[string]bool{g.rep.Namespace: true}, selector: sel, counts: map[string]int{}, spread: s}
	x.add(id, t, indexLabel(ls))
	return t
}

func (x *topologyIndex) add(id string, t *tracker, label string) {
	t.keyID = x.keys.of(t.key)
	t.label = label
	x.trackers[id] = t
	x.trackerIndex.add(t, label)
	if x.onNewTracker != nil {
		x.onNewTracker(t)
	}
}

// antiTermOf returns the anti-affinity term's owner counter, creating it.
func (x *topologyIndex) antiTermOf(pod *corev1.Pod, term *corev1.PodAffinityTerm) *antiTerm {
	ns := termNamespaces(pod, term)
	sel := selectorOf(term.LabelSelector)
	id := term.TopologyKey + "|" + namespacesKey(ns) + "|" + sel.String()
	if a, ok := x.anti[id]; ok {
		return a
	}
	a := &antiTerm{key: term.TopologyKey, keyID: x.keys.of(term.TopologyKey), namespaces: ns, selector: sel, owners: map[string]int{}}
	x.anti[id] = a
	x.antiIndex.add(a, indexLabel(term.LabelSelector))
	return a
}

// matchingTrackers calls fn for every tracker counting pods with these labels.
func (x *topologyIndex) matchingTrackers(namespace string, l map[string]string, fn func(*tracker)) {
	x.trackerIndex.matching(namespace, l, fn)
}

// matchingAntiTerms calls fn for every anti-affinity term whose selector matches pods with
// these labels.
func (x *topologyIndex) matchingAntiTerms(namespace string, l map[string]string, fn func(*antiTerm)) {
	x.antiIndex.matching(namespace, l, fn)
}

// requiredAntiTerms lists a pod's required anti-affinity terms.
func requiredAntiTerms(pod *corev1.Pod) []corev1.PodAffinityTerm {
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		return a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

func requiredAffinityTerms(pod *corev1.Pod) []corev1.PodAffinityTerm {
	if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil {
		return a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

// allows is how many of the group's pods the constraint lets into the domain (ok false
// when the node has no value for the key); math.MaxInt when it does not limit them.
func (c *constraint) allows(value string, ok bool) int {
	t := c.t
	switch c.kind {
	case kindSpread:
		if !ok {
			return 0
		}
		s := t.spread
		self := 0
		if c.self {
			self = 1
		}
		if s.quota != nil {
			return s.quota[value]
		}
		// Hostname: a new node is always a domain with no matching pods, so the global
		// minimum is zero.
		room := s.maxSkew - t.counts[value]
		if self == 0 {
			if room < 0 {
				return 0
			}
			return math.MaxInt
		}
		return max(room, 0)
	case kindAffinity:
		if !ok {
			return 0
		}
		if t.counts[value] > 0 || (t.total == 0 && c.self) {
			return math.MaxInt
		}
		return 0
	default:
		if !ok {
			return math.MaxInt
		}
		if t.counts[value] > 0 {
			return 0
		}
		if c.self {
			return 1
		}
		return math.MaxInt
	}
}

// computeQuotas balances, for each spread constraint on a key other than hostname, the
// pending pods across the domains they can be launched in: each pod goes to the domain with
// the fewest matching pods, as long as the skew against every eligible domain stays within
// maxSkew. Pods beyond that cannot be placed without breaking the constraint.
func (s *solver) computeQuotas() {
	for _, t := range s.spreadTrackers() {
		sp := t.spread
		if t.key == corev1.LabelHostname {
			continue
		}
		pending := 0
		launchable := map[string]bool{}
		for _, g := range s.groups {
			for _, c := range g.allConstraints() {
				if c.t != t {
					continue
				}
				pending += g.remaining()
				for _, v := range s.launchableValues(g, t.key) {
					launchable[v] = true
				}
			}
		}
		domains := map[string]int{}
		for v, nodes := range s.eligibleDomains(t) {
			for _, n := range nodes {
				if !n.away {
					domains[v] = t.counts[v]
					break
				}
			}
		}
		for v := range launchable {
			domains[v] = t.counts[v]
		}
		order := make([]string, 0, len(launchable))
		for v := range launchable {
			order = append(order, v)
		}
		slices.Sort(order)
		sp.quota = map[string]int{}
		for range pending {
			globalMin := math.MaxInt
			for _, c := range domains {
				globalMin = min(globalMin, c)
			}
			if len(domains) < sp.minDomains {
				globalMin = 0
			}
			best := ""
			for _, v := range order {
				if best == "" || domains[v] < domains[best] {
					best = v
				}
			}
			if best == "" || domains[best]+1-globalMin > sp.maxSkew {
				break
			}
			domains[best]++
			sp.quota[best]++
		}
	}
}

func (s *solver) spreadTrackers() []*tracker {
	var out []*tracker
	seen := map[*tracker]bool{}
	for _, g := range s.groups {
		for _, c := range g.allConstraints() {
			if c.kind == kindSpread && !seen[c.t] {
				seen[c.t] = true
				out = append(out, c.t)
			}
		}
	}
	return out
}

// eligibleDomains maps each value of a spread tracker's key to the input nodes with that
// value whose pods the tracker counts, once per tracker.
func (b *base) eligibleDomains(t *tracker) map[string][]*node {
	if t.spread.domains != nil {
		return t.spread.domains
	}
	// Eligibility depends on the key and, as the inclusion policies say, on the node
	// constraints of the constraint's pods: trackers alike in those share their domains.
	k := eligibleKey{key: t.key}
	if t.spread.honorAffinity {
		k.affinity = t.spread.owner.nodeKey
	}
	if t.spread.honorTaints {
		for _, tol := range t.spread.owner.tolerations {
			raw, _ := tol.Marshal()
			k.tolerations += string(raw) + "|"
		}
	}
	domains, ok := b.eligible[k]
	if !ok {
		domains = map[string][]*node{}
		for _, n := range b.nodes {
			if v, ok := n.domain(t.key); ok && t.countsOn(n) {
				domains[v] = append(domains[v], n)
			}
		}
		b.eligible[k] = domains
	}
	t.spread.domains = domains
	return domains
}

type eligibleKey struct{ key, affinity, tolerations string }

// launchableValues lists the values of a key the group's pods could get on new nodes or on
// schedulable existing nodes.
func (s *solver) launchableValues(g *group, key string) []string {
	seen := map[string]bool{}
	for _, p := range s.pools {
		for _, v := range p.launchable(g, key) {
			seen[v] = true
		}
	}
	for v, nodes := range s.compatibleDomains(g, key) {
		for _, n := range nodes {
			if !n.away && n.schedulable {
				seen[v] = true
				break
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	return out
}

// launchable lists the values of a key on the pool's offerings that can take a pod of the
// group, once per node constraints, request and key.
func (p *pool) launchable(g *group, key string) []string {
	c := p.compatibleOffers(g)
	if !c.any {
		return nil
	}
	k := launchKey{key: key, need: g.need.key()}
	if values, ok := c.launchable[k]; ok {
		return values
	}
	seen := map[string]bool{}
	for _, o := range p.offers {
		if c.ok[o.index] && g.need.fits(o.alloc) {
			if v, ok := o.label(key); ok {
				seen[v] = true
			}
		}
	}
	values := make([]string, 0, len(seen))
	for v := range seen {
		values = append(values, v)
	}
	if c.launchable == nil {
		c.launchable = map[launchKey][]string{}
	}
	c.launchable[k] = values
	return values
}

type launchKey struct{ key, need string }

type domainKey struct{ nodeKey, key string }

// compatibleDomains maps each value of a key to the schedulable input nodes with that
// value whose taints and labels accept the group, once per node constraints and key.
func (b *base) compatibleDomains(g *group, key string) map[string][]*node {
	k := domainKey{nodeKey: g.nodeKey, key: key}
	if domains, ok := b.domains[k]; ok {
		return domains
	}
	domains := map[string][]*node{}
	for _, n := range b.nodesFor(g) {
		if n.input.Schedulable {
			if v, ok := n.domain(key); ok && n.compatible(g) {
				domains[v] = append(domains[v], n)
			}
		}
	}
	b.domains[k] = domains
	return domains
}
