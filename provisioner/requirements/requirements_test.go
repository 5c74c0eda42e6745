package requirements

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestMatchesOne(t *testing.T) {
	labels := map[string]string{"zone": "a", "cpu": "8", "bad": "eight"}
	tests := []struct {
		name   string
		key    string
		op     corev1.NodeSelectorOperator
		values []string
		want   bool
	}{
		{"In matches a listed value", "zone", corev1.NodeSelectorOpIn, []string{"a", "b"}, true},
		{"In rejects an unlisted value", "zone", corev1.NodeSelectorOpIn, []string{"b"}, false},
		{"In rejects a missing label", "arch", corev1.NodeSelectorOpIn, []string{"amd64"}, false},
		{"NotIn accepts a missing label", "arch", corev1.NodeSelectorOpNotIn, []string{"amd64"}, true},
		{"NotIn rejects a listed value", "zone", corev1.NodeSelectorOpNotIn, []string{"a"}, false},
		{"Exists needs the label", "zone", corev1.NodeSelectorOpExists, nil, true},
		{"DoesNotExist rejects a present label", "zone", corev1.NodeSelectorOpDoesNotExist, nil, false},
		{"DoesNotExist accepts a missing label", "gpu", corev1.NodeSelectorOpDoesNotExist, nil, true},
		{"Gt is strict", "cpu", corev1.NodeSelectorOpGt, []string{"8"}, false},
		{"Gt accepts larger", "cpu", corev1.NodeSelectorOpGt, []string{"4"}, true},
		{"Lt is strict", "cpu", corev1.NodeSelectorOpLt, []string{"8"}, false},
		{"Gte accepts equal", "cpu", karpv1.NodeSelectorOpGte, []string{"8"}, true},
		{"Gte rejects smaller", "cpu", karpv1.NodeSelectorOpGte, []string{"9"}, false},
		{"Lte accepts equal", "cpu", karpv1.NodeSelectorOpLte, []string{"8"}, true},
		{"Lte rejects larger", "cpu", karpv1.NodeSelectorOpLte, []string{"7"}, false},
		{"integer operators never match a non-integer label", "bad", corev1.NodeSelectorOpGt, []string{"1"}, false},
		{"integer operators never match a missing label", "mem", karpv1.NodeSelectorOpLte, []string{"1"}, false},
		{"unknown operators never match", "zone", "Like", []string{"a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchesOne(tt.key, tt.op, tt.values, labels); got != tt.want {
				t.Errorf("MatchesOne(%s %s %v) = %v, want %v", tt.key, tt.op, tt.values, got, tt.want)
			}
		})
	}
}

func TestSingleValueLabels(t *testing.T) {
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
		{Key: "tier", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}},
	}
	if diff := cmp.Diff(map[string]string{"team": "a"}, SingleValueLabels(reqs)); diff != "" {
		t.Errorf("SingleValueLabels() mismatch (-want +got):\n%s", diff)
	}
}
