package disruption

import (
	"sort"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// drift replaces the first drifted node the budget allows: its pods go to other nodes or to
// replacements, whatever they cost, but not to the other drifted nodes, which are replaced in
// turn: a pod moved there would move again.
func drift(c Cluster, budget Budget) (Decision, bool) {
	var drifted []Candidate
	for _, cand := range c.Candidates {
		if cand.Drifted {
			drifted = append(drifted, cand)
		}
	}
	sort.Slice(drifted, func(i, j int) bool { return drifted[i].Node < drifted[j].Node })
	for _, cand := range withinBudget(drifted, karpv1.DisruptionReasonDrifted, budget, 1) {
		later := map[string]bool{}
		for _, other := range drifted {
			if other.Node != cand.Node {
				later[other.Node] = true
			}
		}
		plan, ok := simulate(c, []Candidate{cand}, later)
		if !ok {
			continue
		}
		return Decision{
			Reason: karpv1.DisruptionReasonDrifted, Originals: []Candidate{cand},
			Replacements: plan.NewNodeClaims, Placements: plan.Existing,
			Savings: cand.Price - price(plan.NewNodeClaims),
		}, true
	}
	return Decision{}, false
}
