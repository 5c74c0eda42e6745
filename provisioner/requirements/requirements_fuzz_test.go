package requirements

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

var operators = []corev1.NodeSelectorOperator{
	corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist,
	corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte,
}

// complement pairs operators that, on a present label with one integer value, answer
// opposite to each other.
var complement = map[corev1.NodeSelectorOperator]corev1.NodeSelectorOperator{
	corev1.NodeSelectorOpIn: corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists: corev1.NodeSelectorOpDoesNotExist,
	corev1.NodeSelectorOpGt: karpv1.NodeSelectorOpLte, corev1.NodeSelectorOpLt: karpv1.NodeSelectorOpGte,
}

// FuzzMatches matches one NodePool requirement (any operator, also unknown ones, any
// values) against a node's label: the core operators answer as the scheduler's node
// affinity does wherever it accepts the requirement, complementary operators answer
// opposite, an unknown operator matches nothing, and Describe names the key.
func FuzzMatches(f *testing.F) {
	f.Add("node.kubernetes.io/instance-type", uint8(0), "m5.large,c5.large", "m5.large", true)
	f.Add("karpenter.k8s.aws/instance-cpu", uint8(4), "4", "8", true)
	f.Add("karpenter.k8s.aws/instance-cpu", uint8(7), "-9223372036854775808", "9223372036854775807", true)
	f.Add("karpenter.k8s.aws/instance-cpu", uint8(6), "4,5", "4", true)
	f.Add("karpenter.k8s.aws/instance-cpu", uint8(5), "0x10", "16", true)
	f.Add("topology.kubernetes.io/zone", uint8(3), "", "", false)
	f.Add("", uint8(200), ",", "", true)
	f.Fuzz(func(t *testing.T, key string, which uint8, values, value string, present bool) {
		op := corev1.NodeSelectorOperator("Unknown")
		if int(which) < len(operators) {
			op = operators[which]
		}
		var vals []string
		if values != "" {
			vals = strings.Split(values, ",")
		}
		labels := map[string]string{}
		if present {
			labels[key] = value
		}
		req := karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
		got := MatchesOne(key, op, vals, labels)
		require.Equal(t, got, Matches([]karpv1.NodeSelectorRequirementWithMinValues{req}, labels))
		require.True(t, strings.HasPrefix(Describe(req), key+" "+string(op)))
		if int(which) >= len(operators) {
			require.False(t, got, "unknown operator %q matched", op)
			return
		}
		if other, ok := complement[op]; ok && present && (op == corev1.NodeSelectorOpIn || op == corev1.NodeSelectorOpExists || integers(vals, value)) {
			require.NotEqual(t, got, MatchesOne(key, other, vals, labels), "%s and %s agree", op, other)
		}
		if op == karpv1.NodeSelectorOpGte || op == karpv1.NodeSelectorOpLte {
			return
		}
		sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: vals}},
		}}})
		if err != nil {
			return // the scheduler refuses it; the API server's validation does too
		}
		node := &corev1.Node{}
		node.Labels = labels
		require.Equal(t, sel.Match(node), got, "scheduler and Tailor disagree on %s", Describe(req))
	})
}

// integers reports whether the single value and the label are both int64, where Gt, Lt,
// Gte and Lte compare.
func integers(vals []string, label string) bool {
	if len(vals) != 1 {
		return false
	}
	for _, s := range []string{vals[0], label} {
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return false
		}
	}
	return true
}
