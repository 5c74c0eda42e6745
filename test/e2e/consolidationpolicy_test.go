package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// policyPassInterval is the sidecar's --disruption-interval in TestConsolidationPolicies,
// and policyHold how long a node that must stay is watched: eight passes.
const (
	policyPassInterval = 5 * time.Second
	policyHold         = 8 * policyPassInterval
)

// TestConsolidationPolicies runs one NodePool per consolidation setting on one stack (see
// testdata/consolidationpolicy.yaml: nine 1-CPU pods fill three 4-vCPU nodes per pool).
// WhenEmpty removes the nodes a scale-down empties and keeps the underutilized ones, which
// WhenEmptyOrUnderutilized then consolidates; consolidateAfter Never keeps even empty nodes
// until the NodePool allows consolidation again.
func TestConsolidationPolicies(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) {
		o.ProvisionerArgs = append(o.ProvisionerArgs, "--disruption-interval="+policyPassInterval.String())
	})
	e.apply(t, "consolidationpolicy.yaml")
	e.waitNodeClassReady(t, "default")

	t.Run("WhenEmpty removes emptied nodes and keeps underutilized ones", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		const pool, selector = "when-empty", "app=when-empty"
		e.waitPods(t, selector, 9, 2*time.Minute)
		t.Logf("9 pods on %d NodeClaims", len(e.poolLayout(t, pool, selector)))
		// The two pods left are on two nodes, each a quarter used, and the third node is empty.
		e.keepOnePodPerNode(t, selector, 2)
		e.scale(t, pool, 2)
		var layout map[string]int
		err := wait.PollUntilContextTimeout(e.ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			layout = e.poolLayout(t, pool, selector)
			counts := slices.Collect(maps.Values(layout))
			return sum(counts) == 2 && !slices.Contains(counts, 0), nil
		})
		if err != nil {
			t.Fatalf("the emptied node was not removed: pods per NodeClaim %v: %v", layout, err)
		}
		if len(layout) != 2 {
			t.Fatalf("pods per NodeClaim after the scale-down %v, want one pod on each of two NodeClaims", layout)
		}
		e.holdNodeClaims(t, pool, layout)

		e.setDisruption(t, pool, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, "5s")
		err = wait.PollUntilContextTimeout(e.ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			layout = e.poolLayout(t, pool, selector)
			return len(layout) == 1 && sum(slices.Collect(maps.Values(layout))) == 2, nil
		})
		if err != nil {
			t.Fatalf("WhenEmptyOrUnderutilized did not consolidate the two underutilized nodes: pods per NodeClaim %v: %v", layout, err)
		}
		t.Logf("took %s", time.Since(start).Round(time.Second))
	})

	t.Run("consolidateAfter Never keeps empty nodes", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		const pool, selector = "never", "app=never"
		e.waitPods(t, selector, 9, 2*time.Minute)
		e.scale(t, pool, 0)
		e.waitPods(t, selector, 0, time.Minute)
		layout := e.poolLayout(t, pool, selector)
		t.Logf("%d empty NodeClaims", len(layout))
		e.holdNodeClaims(t, pool, layout)

		e.setDisruption(t, pool, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, "0s")
		err := wait.PollUntilContextTimeout(e.ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			layout = e.poolLayout(t, pool, selector)
			return len(layout) == 0, nil
		})
		if err != nil {
			t.Fatalf("empty NodeClaims left after consolidateAfter became 0s: %v: %v", layout, err)
		}
		t.Logf("took %s", time.Since(start).Round(time.Second))
	})
}

// poolLayout maps each NodeClaim of the NodePool that is not being deleted to the number of
// running pods matching selector on its node.
func (e *env) poolLayout(t *testing.T, pool, selector string) map[string]int {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	onNode := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			onNode[p.Spec.NodeName]++
		}
	}
	layout := map[string]int{}
	for _, nc := range e.nodeClaims(t) {
		if nc.Labels[karpv1.NodePoolLabelKey] == pool && nc.DeletionTimestamp == nil {
			layout[nc.Name] = onNode[nc.Status.NodeName]
		}
	}
	return layout
}

// keepOnePodPerNode gives one running pod on each of n nodes a pod deletion cost, so that a
// scale-down to n replicas keeps those.
func (e *env) keepOnePodPerNode(t *testing.T, selector string, n int) {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, p := range pods.Items {
		if len(kept) == n || kept[p.Spec.NodeName] || p.Status.Phase != corev1.PodRunning {
			continue
		}
		kept[p.Spec.NodeName] = true
		patch := []byte(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1000"}}}`)
		if _, err := e.cs.CoreV1().Pods(p.Namespace).Patch(e.ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("giving pod %s a deletion cost: %v", p.Name, err)
		}
	}
	if len(kept) != n {
		t.Fatalf("pods run on %d nodes, want at least %d", len(kept), n)
	}
}

func sum(counts []int) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}

// holdNodeClaims fails the test when, within policyHold, the NodePool's NodeClaims are not
// exactly those of layout, none of them being deleted.
func (e *env) holdNodeClaims(t *testing.T, pool string, layout map[string]int) {
	t.Helper()
	want := slices.Sorted(maps.Keys(layout))
	deadline := time.Now().Add(policyHold)
	for time.Now().Before(deadline) {
		var got []string
		for _, nc := range e.nodeClaims(t) {
			if nc.Labels[karpv1.NodePoolLabelKey] == pool && nc.DeletionTimestamp == nil {
				got = append(got, nc.Name)
			}
		}
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Fatalf("NodeClaims of NodePool %s changed within %s: %v, want %v kept", pool, policyHold, got, want)
		}
		time.Sleep(2 * time.Second)
	}
}

// setDisruption sets a NodePool's consolidation policy and consolidateAfter.
func (e *env) setDisruption(t *testing.T, pool string, policy karpv1.ConsolidationPolicy, after string) {
	t.Helper()
	np := &karpv1.NodePool{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: pool}, np); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"disruption":{"consolidationPolicy":%q,"consolidateAfter":%q}}}`, policy, after)
	if err := e.kube.Patch(e.ctx, np, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("patching NodePool %s: %v", pool, err)
	}
}
