package localstack

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// kwokManagedAnnotation marks the nodes kwok plays the kubelet of (see startKwok).
const kwokManagedAnnotation = "kwok.x-k8s.io/node"

// SetNodeHealthy makes a simulated node's kubelet stop or start again. An unhealthy node is
// left by kwok, so its lease is no longer renewed and its pods' status no longer changes,
// and reports Ready=False (KubeletNotReady) at once, as a kubelet that lost its container
// runtime does; the node lifecycle controller turns that into Ready=Unknown once the lease
// runs out. A healthy one is kwok's again, which reports it ready.
func SetNodeHealthy(ctx context.Context, cs kubernetes.Interface, node string, healthy bool) error {
	if healthy {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"fake"}}}`, kwokManagedAnnotation)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("handing node %s back to kwok: %w", node, err)
		}
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, kwokManagedAnnotation)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("taking node %s from kwok: %w", node, err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	status := fmt.Appendf(nil, `{"status":{"conditions":[{"type":%q,"status":%q,"reason":"KubeletNotReady","message":"container runtime is down (local stack)","lastTransitionTime":%q,"lastHeartbeatTime":%q}]}}`,
		corev1.NodeReady, corev1.ConditionFalse, now, now)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("setting node %s not ready: %w", node, err)
	}
	return nil
}
