package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestScaledDownCapacityIsConsolidated provisions twelve 1-CPU pods, scales them down to
// two and waits for consolidation to take the spare capacity away: the remaining pods keep
// running, on fewer and cheaper nodes, and the instances of the removed nodes are gone.
func TestScaledDownCapacityIsConsolidated(t *testing.T) {
	e := startStack(t)
	e.apply(t, "consolidation.yaml")
	e.waitNodeClassReady(t, "default")
	e.waitPods(t, "app=shrink", 12, 2*time.Minute)
	before := e.launchedCPU(t)
	t.Logf("12 pods on %d NodeClaims with %d CPUs", len(e.nodeClaims(t)), before)

	scale, err := e.cs.AppsV1().Deployments("default").GetScale(e.ctx, "shrink", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 2
	if _, err := e.cs.AppsV1().Deployments("default").UpdateScale(e.ctx, "shrink", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var after int64
	err = wait.PollUntilContextTimeout(e.ctx, 2*time.Second, 3*time.Minute, false, func(ctx context.Context) (bool, error) {
		after = e.launchedCPU(t)
		// Two 1-CPU pods fit on one 4-vCPU node at most: anything bigger is spare.
		return after <= 4 && e.runningPods(t, "app=shrink") == 2, nil
	})
	if err != nil {
		t.Fatalf("capacity not consolidated: %d CPUs launched (was %d), %d pods running: %v", after, before, e.runningPods(t, "app=shrink"), err)
	}
	// Terminations finish: every NodeClaim left has its instance, and no other instance lives.
	var claims, instances int
	err = wait.PollUntilContextTimeout(e.ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		list := e.nodeClaims(t)
		claims, instances = len(list), len(e.liveInstances(t))
		for _, nc := range list {
			if nc.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return claims == instances, nil
	})
	if err != nil {
		t.Errorf("%d live instances for %d NodeClaims: %v", instances, claims, err)
	}
	t.Logf("2 pods on %d NodeClaims with %d CPUs", claims, after)
}

// waitPods waits until n pods with the label selector run.
func (e *env) waitPods(t *testing.T, selector string, n int, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		return e.runningPods(t, selector) == n, nil
	})
	if err != nil {
		t.Fatalf("%d pods %s running, want %d: %v", e.runningPods(t, selector), selector, n, err)
	}
}

func (e *env) runningPods(t *testing.T, selector string) int {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// launchedCPU sums the CPU capacity of the NodeClaims not being deleted.
func (e *env) launchedCPU(t *testing.T) int64 {
	t.Helper()
	total := int64(0)
	for _, nc := range e.nodeClaims(t) {
		if nc.DeletionTimestamp != nil {
			continue
		}
		q := nc.Status.Capacity[corev1.ResourceCPU]
		total += q.Value()
	}
	return total
}
