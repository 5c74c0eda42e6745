package packing

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// resizing is a pod whose spec asks for cpu while its container was allocated and runs with
// allocated, with the resize condition given (none when empty).
func resizing(cpu, allocated string, condition corev1.PodConditionType, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		have := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocated), corev1.ResourceMemory: resource.MustParse("1Gi")}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "app", AllocatedResources: have, Resources: &corev1.ResourceRequirements{Requests: have},
		}}
		if condition != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: condition, Status: corev1.ConditionTrue, Reason: reason}}
		}
	}
}

func TestRequestsOfAPodResizedInPlace(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		wantPlaced string
		wantBound  string
	}{
		{
			name:       "no resize",
			pod:        pod("web", "1", "1Gi", resizing("1", "1", "", "")),
			wantPlaced: "1", wantBound: "1",
		},
		{
			name:       "a resize up in progress takes the larger spec on its node",
			pod:        pod("web", "3", "1Gi", resizing("3", "1", corev1.PodResizeInProgress, "")),
			wantPlaced: "3", wantBound: "3",
		},
		{
			name:       "a resize down pending keeps what it was allocated on its node",
			pod:        pod("web", "1", "1Gi", resizing("1", "2", corev1.PodResizePending, corev1.PodReasonDeferred)),
			wantPlaced: "1", wantBound: "2",
		},
		{
			name:       "an infeasible resize takes only what it was allocated on its node, and its spec when placed",
			pod:        pod("web", "6", "1Gi", resizing("6", "2", corev1.PodResizePending, corev1.PodReasonInfeasible)),
			wantPlaced: "6", wantBound: "2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			placed, bound := PodRequests(tt.pod), BoundRequests(tt.pod)
			got := []string{placed.Cpu().String(), bound.Cpu().String()}
			if diff := cmp.Diff([]string{tt.wantPlaced, tt.wantBound}, got); diff != "" {
				t.Errorf("CPU requested when placed, on its node (-want +got):\n%s", diff)
			}
		})
	}
}

// TestANodeCountsItsPodsResizes: a node whose pod is being resized up has the room of its
// new size taken; one whose pod's resize is infeasible keeps the room of its old size free.
func TestANodeCountsItsPodsResizes(t *testing.T) {
	tests := []struct {
		name    string
		running func(*corev1.Pod)
		want    summary
	}{
		{
			name:    "resize in progress",
			running: resizing("3", "1", corev1.PodResizeInProgress, ""),
			want: summary{NodeClaims: []claimSummary{{NodePool: "general", Pods: 1,
				Cheapest: Choice{InstanceType: "medium", Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.20}}}},
		},
		{
			name:    "infeasible resize",
			running: resizing("3", "1", corev1.PodResizePending, corev1.PodReasonInfeasible),
			want:    summary{Existing: map[string][]string{"node-a": {"new"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := existing("node-a", "4", "running")
			tt.running(node.Pods[0])
			in := Input{
				Pods:      []*corev1.Pod{pod("new", "2", "1Gi")},
				NodePools: []NodePool{{NodePool: nodePool("general"), InstanceTypes: catalog()}},
				Nodes:     []Node{node},
			}
			if diff := cmp.Diff(tt.want, summarize(Solve(in))); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
