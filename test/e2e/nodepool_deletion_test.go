package e2e

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// TestDeletingANodePoolDrainsAndRemovesItsNodes: deleting a NodePool deletes its NodeClaims
// (their owner references to it, through kube-controller-manager's garbage collector, as in
// Karpenter), and each goes the normal termination way: its pod is evicted, its Node removed
// and its instance terminated.
func TestDeletingANodePoolDrainsAndRemovesItsNodes(t *testing.T) {
	e := startStack(t)
	e.applyExamplePool(t)
	if _, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Create(e.ctx, pod("drained", "500m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := e.waitRunning(t, "drained", 3*time.Minute)
	claims := e.nodeClaims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims before the NodePool's deletion, want 1", len(claims))
	}

	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	if err := e.kube.Delete(e.ctx, np); err != nil {
		t.Fatal(err)
	}
	// The drain evicts the pod while its node is still there; without it the pod would go
	// only after the node did (the pod garbage collector).
	drainedFirst := false
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		left := &karpv1.NodeClaimList{}
		if err := e.kube.List(ctx, left); err != nil {
			return false, err
		}
		_, nodeErr := e.cs.CoreV1().Nodes().Get(ctx, running.Spec.NodeName, metav1.GetOptions{})
		p, podErr := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "drained", metav1.GetOptions{})
		podLeaving := apierrors.IsNotFound(podErr) || (podErr == nil && p.DeletionTimestamp != nil)
		drainedFirst = drainedFirst || (podLeaving && nodeErr == nil)
		return len(left.Items) == 0 && apierrors.IsNotFound(nodeErr) && apierrors.IsNotFound(podErr), nil
	})
	if err != nil {
		t.Fatalf("the NodePool's NodeClaim, node %s and pod are not all gone: %v", running.Spec.NodeName, err)
	}
	if !drainedFirst {
		t.Error("the pod left only after its node: it was not drained")
	}
	if err := e.kube.Get(e.ctx, client.ObjectKeyFromObject(np), np); !apierrors.IsNotFound(err) {
		t.Errorf("NodePool after its deletion: %v, want not found", err)
	}
}
