package disruption

import (
	"math"
	"sort"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
)

// DeletionCosts steers scale-downs: it keeps the pods of each ranked node at its cost.
// deletioncost.Steerer is the one in use.
type DeletionCosts interface {
	Steer(nodes []deletioncost.Node)
}

// Deletion costs by what consolidation does with a node: a drifted node is replaced
// whatever it holds, a node the plan under way takes away goes in a later pass, and of the
// others the one with the most spent on room no pod uses is tried first. Pods without a
// cost count as 0, so that all of the ranked nodes' pods go before them.
const (
	driftedCost = -1 << 30
	plannedCost = -1 << 29
	// idleCostPerDollar turns an hourly idle spend into a cost: a hundredth of a cent an
	// hour a unit.
	idleCostPerDollar = 10_000
)

// deletionCosts ranks the nodes for the ReplicaSet controller the way consolidation would
// take them: every node of the cluster with pods, those consolidation may take ranked with
// a cost, the others unranked (their pods lose the costs Tailor wrote before).
func deletionCosts(c Cluster) []deletioncost.Node {
	consolidates := map[string]bool{}
	for _, np := range c.NodePools {
		consolidates[np.NodePool.Name] = np.NodePool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty
	}
	var ranked []Candidate
	for _, cand := range c.Candidates {
		if len(cand.Pods) > 0 && (cand.Drifted || consolidates[cand.NodePool]) {
			ranked = append(ranked, cand)
		}
	}
	idle := idleSpend(c, ranked)
	costs := make(map[string]int32, len(ranked))
	for _, cand := range ranked {
		switch {
		case cand.Drifted:
			costs[cand.Node] = driftedCost
		case cand.Planned:
			costs[cand.Node] = plannedCost
		default:
			costs[cand.Node] = -int32(min(math.Round(idle[cand.Node]*idleCostPerDollar), -plannedCost-1))
		}
	}
	out := make([]deletioncost.Node, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		if len(n.Pods) == 0 {
			continue
		}
		cost, ok := costs[n.Node.Name]
		out = append(out, deletioncost.Node{Name: n.Node.Name, Ranked: ok, Cost: cost, Pods: n.Pods})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
