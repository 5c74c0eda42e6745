package packing

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// MinValuesPolicy says what the planner does when a NodePool requirement's minValues
// cannot be met by the instance types that can take a node's pods (Karpenter's
// minValuesPolicy).
type MinValuesPolicy string

const (
	// MinValuesStrict plans no node that would list fewer values than minValues: the pods
	// go to other offerings or NodePools, or stay unschedulable.
	MinValuesStrict MinValuesPolicy = "Strict"
	// MinValuesBestEffort plans the node with the values there are, lowers minValues on
	// its NodeClaim to them and marks it relaxed.
	MinValuesBestEffort MinValuesPolicy = "BestEffort"
)

// minValue is the least number of distinct values of a key a NodeClaim must list.
type minValue struct {
	key string
	min int
}

// minValuesOf returns, per key, the largest minValues the requirements set, by key; nil
// when none sets one.
func minValuesOf(reqs []karpv1.NodeSelectorRequirementWithMinValues) []minValue {
	byKey := requirements.MinValues(reqs)
	if len(byKey) == 0 {
		return nil
	}
	out := make([]minValue, 0, len(byKey))
	for key, n := range byKey {
		out = append(out, minValue{key: key, min: n})
	}
	slices.SortFunc(out, func(a, b minValue) int { return cmp.Compare(a.key, b.key) })
	return out
}

// strictMinValues reports whether the pool's nodes must meet minValues to be planned.
func (s *solver) strictMinValues(p *pool) bool {
	return len(p.minValues) > 0 && s.in.MinValuesPolicy != MinValuesBestEffort
}

// meetsMinValues reports whether a planned node may stay in the plan: true unless the
// policy is Strict and the offerings that can take its place leave fewer values of a key
// than its NodePool's minValues.
func (s *solver) meetsMinValues(n *node) bool {
	if !s.strictMinValues(n.pool) {
		return true
	}
	_, _, ok := n.pool.minValuesShort(s.validOffer(n))
	return ok
}

// minValuesShort returns the first minValues key that the valid offerings do not reach,
// with its requirement and the number of values they have; ok when every key is met.
func (p *pool) minValuesShort(valid func(*offer) bool) (minValue, int, bool) {
	seen := make([]map[string]bool, len(p.minValues))
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	met := 0
	for _, o := range p.offers {
		if !valid(o) {
			continue
		}
		for i, mv := range p.minValues {
			if len(seen[i]) >= mv.min {
				continue
			}
			if v, ok := o.label(mv.key); ok {
				seen[i][v] = true
				if len(seen[i]) == mv.min {
					met++
				}
			}
		}
		if met == len(p.minValues) {
			return minValue{}, 0, true
		}
	}
	for i, mv := range p.minValues {
		if len(seen[i]) < mv.min {
			return mv, len(seen[i]), false
		}
	}
	return minValue{}, 0, true
}

// widen adds to the instance types chosen (a valid offering each, cheapest first) the
// cheapest valid types that bring a value of a minValues key still short, until every key
// has its minValues or no valid type is left. It returns the types and, for each key that
// stays short, the number of values it reached.
func widen(p *pool, types []*offer, valid func(*offer) bool) ([]*offer, map[string]int) {
	seen := make([]map[string]bool, len(p.minValues))
	short := 0
	taken := make(map[*typeInfo]bool, len(types))
	for i, mv := range p.minValues {
		seen[i] = map[string]bool{}
		for _, o := range types {
			if v, ok := o.label(mv.key); ok {
				seen[i][v] = true
			}
		}
		if len(seen[i]) < mv.min {
			short++
		}
	}
	for _, o := range types {
		taken[o.typ] = true
	}
	for _, o := range p.byPrice() {
		if short == 0 {
			break
		}
		if taken[o.typ] || !valid(o) {
			continue
		}
		brings := false
		for i, mv := range p.minValues {
			if v, ok := o.label(mv.key); ok && len(seen[i]) < mv.min && !seen[i][v] {
				brings = true
			}
		}
		if !brings {
			continue
		}
		taken[o.typ] = true
		types = append(types, o)
		for i, mv := range p.minValues {
			if v, ok := o.label(mv.key); ok && len(seen[i]) < mv.min && !seen[i][v] {
				if seen[i][v] = true; len(seen[i]) == mv.min {
					short--
				}
			}
		}
	}
	if short == 0 {
		return types, nil
	}
	reached := map[string]int{}
	for i, mv := range p.minValues {
		if len(seen[i]) < mv.min {
			reached[mv.key] = len(seen[i])
		}
	}
	return types, reached
}

// relaxRequirements lowers minValues of the keys reached to the values reached, on a copy
// of the requirements.
func relaxRequirements(reqs []karpv1.NodeSelectorRequirementWithMinValues, reached map[string]int) {
	for i, r := range reqs {
		if n, ok := reached[r.Key]; ok && r.MinValues != nil && *r.MinValues > n {
			reqs[i].MinValues = &n
		}
	}
}

// explainMinValues says which minValues key the offerings that can take the pod fall short
// of under the Strict policy; empty when there is none.
func (s *solver) explainMinValues(g *group, p *pool, offers []*offer) string {
	if !s.strictMinValues(p) {
		return ""
	}
	allowed := map[*offer]bool{}
	for _, o := range offers {
		if s.offerAllows(g, o) {
			allowed[o] = true
		}
	}
	mv, n, ok := p.minValuesShort(func(o *offer) bool { return allowed[o] })
	if ok {
		return ""
	}
	return fmt.Sprintf("minValues %d for %s: only %d %s can take these pods", mv.min, mv.key, n, valuesNoun(mv.key, n))
}

// valuesNoun names the values of a key, for explanations.
func valuesNoun(key string, n int) string {
	one, many := "value", "values"
	switch key {
	case corev1.LabelInstanceTypeStable:
		one, many = "instance type", "instance types"
	case karpv1.InstanceFamilyLabelKey:
		one, many = "family", "families"
	case karpv1.InstanceCategoryLabelKey:
		one, many = "category", "categories"
	case corev1.LabelTopologyZone:
		one, many = "zone", "zones"
	}
	if n == 1 {
		return one
	}
	return many
}
