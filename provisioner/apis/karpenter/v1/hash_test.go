package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNodePoolHashCountsOnlyStaticTemplateFields(t *testing.T) {
	base := func() *NodePool {
		return &NodePool{Spec: NodePoolSpec{Template: NodeClaimTemplate{Spec: NodeClaimTemplateSpec{
			Requirements: []NodeSelectorRequirementWithMinValues{{Key: CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Taints: []corev1.Taint{
				{Key: "a", Effect: corev1.TaintEffectNoSchedule},
				{Key: "b", Value: "1", Effect: corev1.TaintEffectNoExecute},
			},
			ExpireAfter: MustParseNillableDuration("720h"),
		}}}}
	}
	for _, tt := range []struct {
		name   string
		change func(*NodePool)
		same   bool
	}{
		{name: "requirements", change: func(np *NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"spot", "on-demand"} }, same: true},
		{name: "taints reordered", change: func(np *NodePool) {
			ts := np.Spec.Template.Spec.Taints
			ts[0], ts[1] = ts[1], ts[0]
		}, same: true},
		{name: "empty labels", change: func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{} }, same: true},
		{name: "disruption and weight", change: func(np *NodePool) {
			np.Spec.Disruption.ConsolidationPolicy = ConsolidationPolicyWhenEmpty
			np.Spec.Weight = new(int32)
		}, same: true},
		{name: "label", change: func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "a"} }},
		{name: "annotation", change: func(np *NodePool) { np.Spec.Template.ObjectMeta.Annotations = map[string]string{"team": "a"} }},
		{name: "taint value", change: func(np *NodePool) { np.Spec.Template.Spec.Taints[1].Value = "2" }},
		{name: "startup taint", change: func(np *NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "c", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{name: "nodeClassRef", change: func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" }},
		{name: "expireAfter", change: func(np *NodePool) { np.Spec.Template.Spec.ExpireAfter = MustParseNillableDuration(Never) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			np := base()
			before := np.Hash()
			tt.change(np)
			if diff := cmp.Diff(tt.same, np.Hash() == before); diff != "" {
				t.Errorf("hash unchanged (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodePoolHashLeavesTheNodePoolAlone(t *testing.T) {
	np := &NodePool{Spec: NodePoolSpec{Template: NodeClaimTemplate{Spec: NodeClaimTemplateSpec{
		Requirements: []NodeSelectorRequirementWithMinValues{{Key: CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpExists}},
		Taints:       []corev1.Taint{{Key: "b"}, {Key: "a"}},
	}}}}
	want := np.DeepCopy()
	np.Hash()
	if diff := cmp.Diff(want, np); diff != "" {
		t.Errorf("Hash changed the NodePool (-want +got):\n%s", diff)
	}
}
