package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// TestScaledDownCapacityIsConsolidated provisions twelve 1-CPU pods, scales them down to
// two and waits for consolidation to take the spare capacity away: the remaining pods keep
// running, on fewer and cheaper nodes, and the instances of the removed nodes are gone.
// The sidecar then serves Karpenter's metrics of all that, under Karpenter's names.
func TestScaledDownCapacityIsConsolidated(t *testing.T) {
	e := startStack(t)
	e.apply(t, "consolidation.yaml")
	e.waitNodeClassReady(t, "default")
	e.waitPods(t, "app=shrink", 12, 2*time.Minute)
	before := e.launchedCPU(t)
	t.Logf("12 pods on %d NodeClaims with %d CPUs", len(e.nodeClaims(t)), before)

	e.scale(t, "shrink", 2)
	var after int64
	err := wait.PollUntilContextTimeout(e.ctx, 2*time.Second, 3*time.Minute, false, func(ctx context.Context) (bool, error) {
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
	e.checkKarpenterMetrics(t)
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

// TestProvisioningAndConsolidationSettle scales a Deployment down and, while consolidation
// is under way, back up: provisioning and consolidation then act at the same time. They must
// settle: every pod runs, and for the last 20 seconds no NodeClaim is created or deleted, so
// neither undoes the other in a loop.
func TestProvisioningAndConsolidationSettle(t *testing.T) {
	e := startStack(t)
	e.apply(t, "consolidation.yaml")
	e.waitNodeClassReady(t, "default")
	e.waitPods(t, "app=shrink", 12, 2*time.Minute)
	e.scale(t, "shrink", 2)
	time.Sleep(8 * time.Second)
	e.scale(t, "shrink", 10)
	e.waitPods(t, "app=shrink", 10, 3*time.Minute)

	created := map[string]bool{}
	lastChange := time.Now()
	var live map[string]bool
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		now := map[string]bool{}
		for _, nc := range e.nodeClaims(t) {
			if nc.DeletionTimestamp == nil {
				now[nc.Name] = true
			}
			if !created[nc.Name] {
				created[nc.Name] = true
			}
		}
		if !cmp.Equal(now, live) {
			live, lastChange = now, time.Now()
		}
		return time.Since(lastChange) > 20*time.Second && e.runningPods(t, "app=shrink") == 10, nil
	})
	if err != nil {
		t.Fatalf("not settled: %d NodeClaims live, last change %s ago, %d pods running: %v",
			len(live), time.Since(lastChange).Round(time.Second), e.runningPods(t, "app=shrink"), err)
	}
	t.Logf("settled on %d NodeClaims, %d created in all", len(live), len(created))
	// 12 pods need about 3 nodes; a loop would have launched many more.
	if len(created) > 10 {
		t.Errorf("%d NodeClaims created for at most 12 pods: provisioning and consolidation undo each other", len(created))
	}
}

// scale sets a Deployment's replicas, reading it again when the Deployment controller
// updated it in between.
func (e *env) scale(t *testing.T, deployment string, replicas int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := e.cs.AppsV1().Deployments("default").GetScale(e.ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		_, err = e.cs.AppsV1().Deployments("default").UpdateScale(e.ctx, deployment, scale, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scaling Deployment %s to %d: %v", deployment, replicas, err)
	}
}
