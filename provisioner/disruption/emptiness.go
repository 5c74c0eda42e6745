package disruption

import (
	"sort"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// empty deletes every empty consolidatable node the budgets allow.
func empty(c Cluster, budget Budget) (Decision, bool) {
	var empties []Candidate
	for _, cand := range c.Candidates {
		if cand.MayRemoveEmpty && !cand.Drifted && len(cand.Pods) == 0 {
			empties = append(empties, cand)
		}
	}
	sort.Slice(empties, func(i, j int) bool { return empties[i].Node < empties[j].Node })
	empties = withinBudget(empties, karpv1.DisruptionReasonEmpty, budget, len(empties))
	if len(empties) == 0 {
		return Decision{}, false
	}
	d := Decision{Reason: karpv1.DisruptionReasonEmpty, Originals: empties}
	for _, e := range empties {
		d.Savings += e.Price
	}
	return d, true
}
