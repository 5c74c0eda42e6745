package e2e

import (
	"context"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// TestStaticNodePool runs the StaticCapacity feature gate (see testdata/static.yaml): a
// NodePool of two replicas gets two ready nodes with no pod asking for them, and follows
// its scale subresource up to four and down to one, within limits.nodes of five.
func TestStaticNodePool(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) {
		o.ProvisionerArgs = append(o.ProvisionerArgs, "--feature-gates=StaticCapacity=true")
	})
	e.apply(t, "static.yaml")
	e.waitNodeClassReady(t, "default")
	const pool = "static"
	start := time.Now()
	e.waitReadyNodes(t, pool, 2)
	t.Logf("2 replicas: 2 nodes ready %s after apply", time.Since(start).Round(time.Second))

	for _, replicas := range []int32{4, 1} {
		start = time.Now()
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: pool}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}
		if err := e.kube.SubResource("scale").Update(e.ctx, np, client.WithSubResourceBody(scale)); err != nil {
			t.Fatalf("scaling NodePool %s to %d: %v", pool, replicas, err)
		}
		e.waitReadyNodes(t, pool, int(replicas))
		t.Logf("scaled to %d: as many nodes ready, and no other NodeClaim, %s after", replicas, time.Since(start).Round(time.Second))
	}
	got := &karpv1.NodePool{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: pool}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Nodes == nil || *got.Status.Nodes != 1 {
		t.Errorf("status.nodes = %v, want 1 (the scale subresource's status)", got.Status.Nodes)
	}
}

// waitReadyNodes waits until the NodePool has exactly n ready nodes and no other NodeClaim.
func (e *env) waitReadyNodes(t *testing.T, pool string, n int) {
	t.Helper()
	var claims, ready int
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		claims, ready = 0, 0
		for _, nc := range e.nodeClaims(t) {
			if nc.Labels[karpv1.NodePoolLabelKey] != pool {
				continue
			}
			claims++
			for _, c := range nc.Status.Conditions {
				if c.Type == karpv1.ConditionTypeInitialized && c.Status == metav1.ConditionTrue && nc.DeletionTimestamp == nil {
					ready++
				}
			}
		}
		return claims == n && ready == n, nil
	})
	if err != nil {
		t.Fatalf("NodePool %s: %d NodeClaims, %d of them initialized, want %d: %v", pool, claims, ready, n, err)
	}
}
