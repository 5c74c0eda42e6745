package packing

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailor-autoscaler/tailor/provisioner/packing/lowerbound"
)

// LowerBound is a lower bound on the hourly price of new capacity for the pods the plan
// puts on new NodeClaims: the LP relaxation in which nodes may be bought and pods split
// fractionally, over every offering of every NodePool each pod may use, with one more
// dimension per per-node cap (hostname anti-affinity: one pod per node; hostname spread:
// maxSkew per node). Zonal constraints are relaxed away. Plan price / LowerBound says how
// far a plan can be from optimal.
func LowerBound(in Input, plan Plan) (float64, error) {
	s := newSolver(in)
	onNew := map[*corev1.Pod]bool{}
	for _, nc := range plan.NewNodeClaims {
		for _, pod := range nc.Pods {
			onNew[pod] = true
		}
	}
	// Per-node caps become extra dimensions.
	capDims := map[*tracker]int{}
	capOf := map[*tracker]int{}
	for _, g := range s.groups {
		for _, c := range g.topology {
			if c.t.key != corev1.LabelHostname || !c.self || c.kind == kindAffinity {
				continue
			}
			perNode := 1
			if c.kind == kindSpread {
				perNode = c.t.spread.maxSkew
			}
			if _, ok := capDims[c.t]; !ok {
				capDims[c.t] = len(s.dims.names) + len(capDims)
				capOf[c.t] = perNode
			}
		}
	}
	width := len(s.dims.names) + len(capDims)
	var columns []lowerbound.Column
	base := map[*pool]int{}
	for _, p := range s.pools {
		base[p] = len(columns)
		for _, o := range p.offers {
			capacity := make([]float64, width)
			copy(capacity, toFloats(o.alloc))
			for t, d := range capDims {
				capacity[d] = float64(capOf[t])
			}
			columns = append(columns, lowerbound.Column{Price: o.price, Capacity: capacity})
		}
	}
	// One demand per distinct (node constraints, caps, pod shape): the relaxation splits a
	// demand over columns in proportion, so pods of different shapes must stay apart for it
	// to be a relaxation of the plan at all.
	type key struct {
		nodeKey string
		caps    string
		need    string
	}
	index := map[key]int{}
	var demands []lowerbound.Demand
	for _, g := range s.groups {
		count := 0
		for _, pod := range g.pods {
			if onNew[pod] {
				count++
			}
		}
		if count == 0 {
			continue
		}
		var caps []string
		amount := make([]float64, width)
		for i, x := range g.need {
			amount[i] = float64(x) * float64(count)
		}
		for _, c := range g.topology {
			if d, ok := capDims[c.t]; ok && c.self && c.kind != kindAffinity {
				amount[d] += float64(count)
				caps = append(caps, fmt.Sprint(d))
			}
		}
		k := key{g.nodeKey, strings.Join(caps, ","), fmt.Sprint(g.need)}
		if i, ok := index[k]; ok {
			for j := range amount {
				demands[i].Amount[j] += amount[j]
			}
			continue
		}
		var cols []int
		for _, p := range s.pools {
			c := p.compatibleOffers(g)
			for _, o := range p.offers {
				if c.ok[o.index] && g.need.fits(o.alloc) {
					cols = append(cols, base[p]+o.index)
				}
			}
		}
		index[k] = len(demands)
		demands = append(demands, lowerbound.Demand{Amount: amount, Columns: cols})
	}
	if len(demands) == 0 {
		return 0, nil
	}
	res, err := lowerbound.Solve(columns, demands)
	if err != nil {
		return 0, fmt.Errorf("solving the LP relaxation: %w", err)
	}
	return res.Cost, nil
}
