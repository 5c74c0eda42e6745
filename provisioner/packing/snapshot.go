package packing

import (
	corev1 "k8s.io/api/core/v1"
)

// Snapshot is a cluster prepared once for many plans, each of which takes some of its nodes
// away and places pods on the rest: consolidation weighs hundreds of such what-ifs against
// one cluster. Preparing the cluster (the room its nodes have left, its pods counted for
// topology, the NodePools' offerings) costs as much as a plan; a Snapshot pays for it once,
// and each plan undoes its placements when it is done. A Snapshot is not safe for
// concurrent use.
type Snapshot struct {
	b *base
}

// NewSnapshot prepares the nodes, NodePools, DaemonSets and volumes of in; its pods are
// left out, as each plan brings its own.
func NewSnapshot(in Input) *Snapshot {
	in.Pods = nil
	return &Snapshot{b: newBase(in, nil, true)}
}

// Solve plans the pods as Solve would with the snapshot's input less the nodes named in
// away (gone, their pods counted nowhere), with the nodes named in held unschedulable (they
// count as topology domains but take no pod).
func (sn *Snapshot) Solve(pods []*corev1.Pod, away, held map[string]bool) Plan {
	return sn.solve(pods, away, held, false)
}

// Estimate plans as Solve does, but each new NodeClaim carries only its NodePool, its pods
// and its cheapest offering, and offerings are ranked by whole node prices alone: what a
// what-if is priced by, at a fraction of the cost. Solve's plan of the same pods costs no
// more.
func (sn *Snapshot) Estimate(pods []*corev1.Pod, away, held map[string]bool) Plan {
	return sn.solve(pods, away, held, true)
}

func (sn *Snapshot) solve(pods []*corev1.Pod, away, held map[string]bool, priceOnly bool) Plan {
	requests := make([]corev1.ResourceList, len(pods))
	for i, pod := range pods {
		if _, ok := sn.b.shapes[pod]; ok {
			// Planned before: known to request only resources the snapshot counts.
			continue
		}
		requests[i] = podRequests(pod)
		for name := range requests[i] {
			if _, ok := sn.b.dims.index[name]; !ok {
				// A resource no pod of the cluster requests: plan from scratch.
				all := requestsOf(pods)
				return newBase(sn.input(pods, away, held), all, false).plan(pods, all, nil, nil, priceOnly)
			}
		}
	}
	return sn.b.plan(pods, requests, away, held, priceOnly)
}

// input is the snapshot's input as Solve takes it for the pods, away and held.
func (sn *Snapshot) input(pods []*corev1.Pod, away, held map[string]bool) Input {
	in := sn.b.in
	in.Pods = pods
	in.Nodes = nil
	for _, n := range sn.b.in.Nodes {
		if away[n.Node.Name] {
			continue
		}
		n.Schedulable = n.Schedulable && !held[n.Node.Name]
		in.Nodes = append(in.Nodes, n)
	}
	return in
}

// undo takes the round's pods off the nodes and puts back the pods of the nodes it took
// away, so the base is as it was before the round.
func (s *solver) undo(away map[string]bool) {
	for _, n := range s.planned {
		s.rollback(n)
	}
	for _, n := range s.touched {
		for i := len(n.placed) - 1; i >= 0; i-- {
			s.unplace(n.placed[i].g, n, n.placed[i].k)
		}
		n.placed = nil
	}
	for _, n := range s.nodes {
		if away[n.name] {
			s.takeAway(n, 1)
		}
	}
}
