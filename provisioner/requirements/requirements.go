// Package requirements evaluates NodePool and NodeClaim requirements
// (karpenter.sh/v1 NodeSelectorRequirementWithMinValues) against node labels, including
// the Gte and Lte operators the core NodeSelector does not have.
package requirements

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// Matches reports whether labels satisfy every requirement.
func Matches(reqs []karpv1.NodeSelectorRequirementWithMinValues, labels map[string]string) bool {
	return MatchesFunc(reqs, func(key string) (string, bool) {
		v, ok := labels[key]
		return v, ok
	})
}

// MatchesFunc reports whether the labels that label looks up satisfy every requirement.
// It lets callers match computed label sets without building maps.
func MatchesFunc(reqs []karpv1.NodeSelectorRequirementWithMinValues, label func(key string) (string, bool)) bool {
	for i := range reqs {
		v, ok := label(reqs[i].Key)
		if !matchesValue(reqs[i].Operator, reqs[i].Values, v, ok) {
			return false
		}
	}
	return true
}

// MatchesOne reports whether labels satisfy one requirement. A malformed integer value
// never matches, as in the scheduler.
func MatchesOne(key string, op corev1.NodeSelectorOperator, values []string, labels map[string]string) bool {
	v, ok := labels[key]
	return matchesValue(op, values, v, ok)
}

// matchesValue reports whether a label value (ok false when the label is absent)
// satisfies an operator and its values.
func matchesValue(op corev1.NodeSelectorOperator, values []string, v string, ok bool) bool {
	switch op {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if !ok || len(values) != 1 {
			return false
		}
		have, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		want, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return false
		}
		switch op {
		case corev1.NodeSelectorOpGt:
			return have > want
		case corev1.NodeSelectorOpLt:
			return have < want
		case karpv1.NodeSelectorOpGte:
			return have >= want
		default:
			return have <= want
		}
	}
	return false
}

// Describe renders a requirement the way users write it, for explanations.
func Describe(r karpv1.NodeSelectorRequirementWithMinValues) string {
	switch r.Operator {
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		return fmt.Sprintf("%s %s", r.Key, r.Operator)
	default:
		return fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values)
	}
}

// SingleValueLabels returns the labels a set of requirements pins: keys constrained by
// In to exactly one value. Nodes launched under those requirements carry these labels.
func SingleValueLabels(reqs []karpv1.NodeSelectorRequirementWithMinValues) map[string]string {
	out := map[string]string{}
	for _, r := range reqs {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			out[r.Key] = r.Values[0]
		}
	}
	return out
}

// MinValues returns, per key, the largest minValues the requirements set; nil when none
// sets one.
func MinValues(reqs []karpv1.NodeSelectorRequirementWithMinValues) map[string]int {
	var out map[string]int
	for _, r := range reqs {
		if r.MinValues == nil || *r.MinValues <= 0 {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[r.Key] = max(out[r.Key], *r.MinValues)
	}
	return out
}
