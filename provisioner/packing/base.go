package packing

import (
	"cmp"
	"hash/maphash"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// base is what a planning round plans against, apart from the pods it plans: the resources
// it counts, the NodePools' offerings, the nodes with the room their pods leave, and those
// pods as topology spread and pod affinity count them. Solve builds one for its round; a
// Snapshot keeps one for many rounds.
type base struct {
	in    Input
	dims  *dims
	pools []*pool
	nodes []*node
	// byName indexes nodes by name, built on first use.
	byName  map[string]*node
	topo    *topologyIndex
	volumes *volumeIndex
	daemons []*daemon
	// sets are the distinct namespaces and label sets of the nodes' pods, by their key;
	// held are those of pods on the input nodes, and heldByLabel those by each key=value
	// label they have: a new tracker counts pods on the nodes of the sets it may match.
	sets        map[string]*labelSet
	held        []*labelSet
	heldByLabel map[string][]*labelSet
	// domains caches compatibleDomains; fitting caches fitting.
	domains map[domainKey]map[string][]*node
	fitting map[fitKey][]*node
	// eligible caches eligibleDomains.
	eligible map[eligibleKey]map[string][]*node
	// keyer keys pods; shapes are the pods' requests and keys, and protos the groups built
	// for pods like them, kept for the rounds to come.
	keyer  *podKeyer
	shapes map[*corev1.Pod]podShape
	protos map[protoKey]*group
	// nodeKeys numbers the groups' node constraints (group.nodeKey).
	nodeKeys numbering
	nextID   int
	// reservedLeft is how many more nodes the round may plan into each capacity
	// reservation, by id: planned nodes of its offerings take one each.
	reservedLeft map[string]int
	// guide is the price the rounds rank and pick offerings by.
	guide guide
	// round numbers the planning rounds. The trackers and anti-affinity terms a round's
	// groups use carry its number: a Snapshot keeps those of earlier rounds, which the
	// round must not count pods for nor pin labels by.
	round int
}

// labelSet is a namespace and the labels of pods in it.
type labelSet struct {
	namespace string
	labels    labels.Set
	// trackers are those matching the set's pods, as of the index's version.
	trackers []*tracker
	version  int
	// holders are the input nodes whose pods have the set, with how many.
	holders []setCount
}

// matching returns the trackers that match the set's pods.
func (set *labelSet) matching(x *topologyIndex) []*tracker {
	if set.version != len(x.trackers) {
		set.trackers = set.trackers[:0]
		x.matchingTrackers(set.namespace, set.labels, func(t *tracker) { set.trackers = append(set.trackers, t) })
		set.version = len(x.trackers)
	}
	return set.trackers
}

// setCount is how many of a node's pods have a label set: on a node, set names the set;
// among a set's holders, node names the node.
type setCount struct {
	set  *labelSet
	node *node
	n    int
}

// newBase prepares the nodes and NodePools of in for rounds planning pods with the given
// requests. With nodeDims, the resources the nodes' pods request are counted too, so that
// a Snapshot can plan those pods again.
func newBase(in Input, pending []corev1.ResourceList, nodeDims bool) *base {
	b := &base{in: in, dims: newDims(), topo: newTopologyIndex(), volumes: newVolumeIndex(in.Volumes),
		sets: map[string]*labelSet{}, heldByLabel: map[string][]*labelSet{}, domains: map[domainKey]map[string][]*node{}, fitting: map[fitKey][]*node{}, eligible: map[eligibleKey]map[string][]*node{},
		keyer: &podKeyer{seed: maphash.MakeSeed()}, shapes: map[*corev1.Pod]podShape{}, protos: map[protoKey]*group{}, nodeKeys: numbering{}}
	b.topo.onNewTracker = b.countTracker
	for _, list := range pending {
		for name := range list {
			b.dims.add(name)
		}
	}
	for _, ds := range in.DaemonSets {
		for _, c := range ds.Spec.Template.Spec.Containers {
			for name := range c.Resources.Requests {
				b.dims.add(name)
			}
		}
	}
	requests := make([][]corev1.ResourceList, len(in.Nodes))
	for i := range in.Nodes {
		requests[i] = make([]corev1.ResourceList, len(in.Nodes[i].Pods))
		for j, pod := range in.Nodes[i].Pods {
			requests[i][j] = boundRequests(pod)
			if nodeDims {
				for name := range requests[i][j] {
					b.dims.add(name)
				}
			}
		}
	}
	for _, ds := range in.DaemonSets {
		b.daemons = append(b.daemons, newDaemon(ds, b.dims))
	}
	for _, np := range in.NodePools {
		b.pools = append(b.pools, newPool(np, b.dims, b.daemons))
	}
	slices.SortStableFunc(b.pools, func(x, y *pool) int {
		if c := cmp.Compare(y.weight, x.weight); c != 0 {
			return c
		}
		return cmp.Compare(x.nodePool.Name, y.nodePool.Name)
	})
	for i := range in.Nodes {
		b.nodes = append(b.nodes, b.existingNode(&in.Nodes[i], requests[i]))
	}
	return b
}

func (b *base) newID() int {
	b.nextID++
	return b.nextID
}

// existingNode is a node of the input with the room its pods leave, its pods counted by
// label set, and the anti-affinity terms they carry counted.
func (b *base) existingNode(in *Node, requests []corev1.ResourceList) *node {
	n := &node{id: b.newID(), name: in.Node.Name, input: in}
	n.free = b.dims.of(in.Node.Status.Allocatable)
	bySet := map[*labelSet]int{}
	for i, pod := range in.Pods {
		n.free.sub(b.dims.of(requests[i]))
		n.ports = append(n.ports, podHostPorts(pod)...)
		set := b.labelSet(pod)
		if _, ok := bySet[set]; !ok {
			n.sets = append(n.sets, setCount{set: set})
		}
		bySet[set]++
		for _, term := range requiredAntiTerms(pod) {
			n.anti = append(n.anti, b.topo.antiTermOf(pod, &term))
		}
	}
	for i := range n.sets {
		set := n.sets[i].set
		n.sets[i].n = bySet[set]
		b.hold(set, n, bySet[set])
	}
	b.countAnti(n, 1)
	if in.NodeClaim != nil {
		// DaemonSet pods not running yet on a launched node will take their share.
		for _, ds := range b.daemons {
			present := slices.ContainsFunc(in.Pods, ds.owns)
			if present || !tolerates(ds.pod.Spec.Tolerations, in.Node.Spec.Taints) {
				continue
			}
			if ok, _ := ds.affinity.Match(in.Node); ok {
				n.free.sub(ds.need)
				n.ports = append(n.ports, ds.ports...)
			}
		}
	}
	n.baseFree = slices.Clone(n.free)
	return n
}

type fitKey struct{ nodeKey, need string }

type podShape struct {
	need vec
	key  uint64
}

type protoKey struct {
	key     uint64
	relaxed int
}

// fitting lists, in order, the schedulable input nodes that accept the group's pods and
// have room for one before any round places pods: no other node can take one.
func (s *solver) fitting(g *group) []*node {
	k := fitKey{nodeKey: g.nodeKey, need: g.need.key()}
	nodes, ok := s.base.fitting[k]
	if !ok {
		for _, n := range s.nodesFor(g) {
			if n.input.Schedulable && g.need.fits(n.baseFree) && n.compatible(g) {
				nodes = append(nodes, n)
			}
		}
		s.base.fitting[k] = nodes
	}
	return nodes
}

// nodesFor are the existing nodes the group may run on by name: those its node affinity
// names (see group.onNodes), else all.
func (b *base) nodesFor(g *group) []*node {
	if g.onNodes == nil {
		return b.nodes
	}
	if b.byName == nil {
		b.byName = make(map[string]*node, len(b.nodes))
		for _, n := range b.nodes {
			b.byName[n.name] = n
		}
	}
	var out []*node
	for _, name := range g.onNodes {
		if n, ok := b.byName[name]; ok {
			out = append(out, n)
		}
	}
	return out
}

// labelSet returns the pod's namespace and labels, shared by the pods that have the same.
func (b *base) labelSet(pod *corev1.Pod) *labelSet {
	key := string(appendSortedMap([]byte(pod.Namespace+"\x00"), pod.Labels))
	set, ok := b.sets[key]
	if !ok {
		set = &labelSet{namespace: pod.Namespace, labels: labels.Set(pod.Labels)}
		b.sets[key] = set
	}
	return set
}

// hold records that k of the node's pods have the set.
func (b *base) hold(set *labelSet, n *node, k int) {
	if len(set.holders) == 0 {
		b.held = append(b.held, set)
		for key, value := range set.labels {
			label := key + "=" + value
			b.heldByLabel[label] = append(b.heldByLabel[label], set)
		}
	}
	set.holders = append(set.holders, setCount{node: n, n: k})
}

// countAnti adds (sign 1) or removes (sign -1) the node's pods to the anti-affinity terms
// they carry.
func (b *base) countAnti(n *node, sign int) {
	for _, a := range n.anti {
		a.refs += sign
		if v, ok := n.domainAt(a.keyID, a.key); ok {
			addCount(a.owners, v, sign)
		}
	}
}

// countTracker counts a new tracker's pods on the nodes: those of the label sets it may
// match, found by its index label when it has one, so that a tracker of one Deployment's
// pods reads the nodes they are on rather than every node.
func (b *base) countTracker(t *tracker) {
	sets := b.held
	if t.label != "" {
		sets = b.heldByLabel[t.label]
	}
	for _, set := range sets {
		if !t.matchesSet(set) {
			continue
		}
		for _, h := range set.holders {
			if v, ok := h.node.domainAt(t.keyID, t.key); ok && t.countsOn(h.node) {
				addCount(t.counts, v, h.n)
				t.total += h.n
			}
		}
	}
}

// beginRound starts a planning round: pools launch within their limits afresh.
func (b *base) beginRound() {
	b.round++
	b.reservedLeft = map[string]int{}
	for _, p := range b.pools {
		p.remaining = slices.Clone(p.limit)
		p.guide = b.guide
		for id, n := range p.reserved {
			b.reservedLeft[id] = n
		}
	}
}
