package lifecycle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// waiting is the reason and message of an Initialized condition that is not True yet.
type waiting struct{ Reason, Message string }

func TestNotInitialized(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	startup := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	gpuClaim := karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("1"),
	}}}}

	tests := []struct {
		name       string
		nodeClaim  karpv1.NodeClaim
		conditions []corev1.NodeCondition
		taints     []corev1.Taint
		allocated  corev1.ResourceList
		want       waiting
	}{
		{
			name: "a node that is not Ready",
			want: waiting{"NodeNotReady", "Node status is NotReady"},
		},
		{
			name:       "a Ready node without taints",
			conditions: ready,
		},
		{
			name:       "a startup taint still present",
			nodeClaim:  karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{StartupTaints: []corev1.Taint{startup}}},
			conditions: ready,
			taints:     []corev1.Taint{startup},
			want:       waiting{"StartupTaintsExist", `StartupTaint "example.com/agent-not-ready:NoSchedule" still exists`},
		},
		{
			name:       "the node lifecycle controller's not-ready taint, lifted a few seconds after Ready",
			conditions: ready,
			taints:     []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}},
			want:       waiting{"KnownEphemeralTaintsExist", `KnownEphemeralTaint "node.kubernetes.io/not-ready:NoSchedule" still exists`},
		},
		{
			name:       "a cloud controller manager that has not initialized the node",
			conditions: ready,
			taints:     []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			want:       waiting{"KnownEphemeralTaintsExist", `KnownEphemeralTaint "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule" still exists`},
		},
		{
			name:       "Tailor's unregistered taint",
			conditions: ready,
			taints:     []corev1.Taint{karpv1.UnregisteredNoExecuteTaint},
			want:       waiting{"KnownEphemeralTaintsExist", `KnownEphemeralTaint "karpenter.sh/unregistered:NoExecute" still exists`},
		},
		{
			name:       "a user's own taint does not hold initialization back",
			conditions: ready,
			taints:     []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name:       "a GPU not reported yet",
			nodeClaim:  gpuClaim,
			conditions: ready,
			allocated:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			want:       waiting{"ResourceNotRegistered", `Resource "nvidia.com/gpu" was requested but not registered`},
		},
		{
			name:       "a GPU reported",
			nodeClaim:  gpuClaim,
			conditions: ready,
			allocated:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{
				Spec:   corev1.NodeSpec{Taints: tt.taints},
				Status: corev1.NodeStatus{Conditions: tt.conditions, Allocatable: tt.allocated},
			}
			var got waiting
			got.Reason, got.Message = notInitialized(&tt.nodeClaim, node)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("notInitialized (-want +got):\n%s", diff)
			}
		})
	}
}
