package disruption

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// whatIfs plans what-ifs of one decision against one packing.Snapshot of the cluster,
// prepared on first use, with the pods that move copied once per zones they may move to.
type whatIfs struct {
	snap    *packing.Snapshot
	pending map[pendingKey]*corev1.Pod
	// fixed are the copies of pods whose zones do not depend on the nodes taken away.
	fixed map[*corev1.Pod]*corev1.Pod
}

func newWhatIfs() *whatIfs {
	return &whatIfs{pending: map[pendingKey]*corev1.Pod{}, fixed: map[*corev1.Pod]*corev1.Pod{}}
}

type pendingKey struct {
	pod   types.NamespacedName
	zones string
}

// simulate plans the pods of the nodes taken away onto the rest of the cluster and new
// NodeClaims, each pod in the zones its pin allows, if any; false when some pod would have
// nowhere to go.
func simulate(c Cluster, gone []Candidate, later map[string]bool) (packing.Plan, bool) {
	return c.whatIf(gone, later, (*packing.Snapshot).Solve)
}

// whatIf plans, with solve, the pods of the nodes gone onto the rest of the cluster but the
// nodes later, and onto new NodeClaims.
func (c Cluster) whatIf(gone []Candidate, later map[string]bool, solve func(*packing.Snapshot, []*corev1.Pod, map[string]bool, map[string]bool) packing.Plan) (packing.Plan, bool) {
	w := c.whatIfs
	if w == nil {
		w = newWhatIfs()
		c.whatIfs = w
	}
	c.snapshot()
	away := nodeSet(gone)
	var pods []*corev1.Pod
	for _, g := range gone {
		for _, p := range g.Pods {
			pods = append(pods, w.pendingPod(c, p, away))
		}
	}
	plan := solve(w.snap, pods, away, later)
	return plan, len(plan.Unschedulable) == 0
}

// snapshot is the what-ifs' snapshot of the cluster, prepared on first use.
func (c Cluster) snapshot() *packing.Snapshot {
	w := c.whatIfs
	if w.snap == nil {
		w.snap = packing.NewSnapshot(packing.Input{Nodes: c.Nodes, NodePools: c.NodePools, DaemonSets: c.DaemonSets, Volumes: c.Volumes, MinValuesPolicy: c.MinValuesPolicy})
	}
	return w.snap
}

// pendingPod is the pod as it waits for a node once its node is gone: unbound, and kept to
// the zones its pin allows.
func (w *whatIfs) pendingPod(c Cluster, p *corev1.Pod, away map[string]bool) *corev1.Pod {
	if pending, ok := w.fixed[p]; ok {
		return pending
	}
	key := pendingKey{pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}}
	pin, pinned := c.pins[key.pod]
	var zones []string
	if pinned {
		zones = pin.zones(away, c.zoneOf)
		key.zones = strings.Join(zones, ",")
	}
	if pending, ok := w.pending[key]; ok {
		return pending
	}
	pending := p.DeepCopy()
	pending.Spec.NodeName = ""
	if pinned {
		pinToZones(pending, zones)
	}
	w.pending[key] = pending
	if len(pin.shared) == 0 {
		// Its zones do not depend on the nodes away.
		w.fixed[p] = pending
	}
	return pending
}

// podsOf is the set of the nodes' movable pods.
func podsOf(cands []Candidate) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, cand := range cands {
		for _, p := range cand.Pods {
			out[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	return out
}

// among are the pods of the list named in the set, in order.
func among(pods []*corev1.Pod, set map[types.NamespacedName]bool) []*corev1.Pod {
	in := inSet(set)
	return slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return !in(p) })
}

// holdsAny reports whether some pod of the list is named in the set.
func holdsAny(pods []*corev1.Pod, set map[types.NamespacedName]bool) bool {
	return slices.ContainsFunc(pods, inSet(set))
}

// inSet reports whether a pod is named in the set.
func inSet(set map[types.NamespacedName]bool) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return set[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] }
}

// nodeSet is the set of the candidates' node names.
func nodeSet(cands []Candidate) map[string]bool {
	out := make(map[string]bool, len(cands))
	for _, cand := range cands {
		out[cand.Node] = true
	}
	return out
}
