package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/repair"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// repairToleration is how long a node may stay not ready in TestNodeRepair, instead of
// Karpenter's 30 minutes.
const repairToleration = 20 * time.Second

// TestNodeRepair runs the NodeRepair feature gate on five nodes of one NodePool (see
// testdata/repair.yaml): a node made not ready is replaced once its toleration has passed
// and its pod runs again elsewhere; two of the five made not ready are both kept, more
// than the fifth of the pool repair may replace, until one recovers and the other is
// replaced.
func TestNodeRepair(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) {
		o.ProvisionerArgs = append(o.ProvisionerArgs, "--feature-gates=NodeRepair=true",
			fmt.Sprintf("--node-repair-policies=Ready=False:%s", repairToleration))
	})
	e.apply(t, "repair.yaml")
	e.waitNodeClassReady(t, "default")
	const pool, selector = "repair", "app=repair"
	e.waitPods(t, selector, 5, 3*time.Minute)

	nodes := e.poolNodes(t, pool)
	if len(nodes) != 5 {
		t.Fatalf("NodePool %s has nodes %v, want five", pool, nodes)
	}

	t.Logf("making node %s not ready", nodes[0])
	marked := time.Now()
	e.setNodeReady(t, nodes[0], false)
	replaced, running := e.waitReplaced(t, pool, selector, nodes[0], marked)
	t.Logf("not ready → NodeClaim deleted %s (toleration %s), → its pod running on a new node %s",
		replaced.Round(time.Second), repairToleration, running.Round(time.Second))
	if replaced < repairToleration {
		t.Errorf("node %s replaced %s after it became not ready, before its toleration of %s", nodes[0], replaced, repairToleration)
	}

	nodes = e.poolNodes(t, pool)
	t.Logf("making nodes %s and %s not ready", nodes[0], nodes[1])
	marked = time.Now()
	e.setNodeReady(t, nodes[0], false)
	e.setNodeReady(t, nodes[1], false)
	e.waitEvent(t, repair.ReasonRepairBlocked, repairToleration+2*time.Minute)
	e.holdNodeClaims(t, pool, e.poolLayout(t, pool, selector))
	t.Logf("two of five not ready: neither replaced %s after", time.Since(marked).Round(time.Second))

	e.setNodeReady(t, nodes[1], true)
	healed := time.Now()
	replaced, running = e.waitReplaced(t, pool, selector, nodes[0], healed)
	t.Logf("%s ready again → %s's NodeClaim deleted %s, → its pod running %s", nodes[1], nodes[0],
		replaced.Round(time.Second), running.Round(time.Second))
	if got := e.poolNodes(t, pool); !slices.Contains(got, nodes[1]) {
		t.Errorf("node %s, ready again, was replaced too: nodes %v", nodes[1], got)
	}
}

// poolNodes are the names of the nodes of the NodePool's NodeClaims not being deleted.
func (e *env) poolNodes(t *testing.T, pool string) []string {
	t.Helper()
	var names []string
	for _, nc := range e.nodeClaims(t) {
		if nc.Labels[karpv1.NodePoolLabelKey] == pool && nc.DeletionTimestamp == nil && nc.Status.NodeName != "" {
			names = append(names, nc.Status.NodeName)
		}
	}
	return names
}

// setNodeReady makes the simulated node's kubelet stop or start again.
func (e *env) setNodeReady(t *testing.T, node string, ready bool) {
	t.Helper()
	if err := localstack.SetNodeHealthy(e.ctx, e.cs, node, ready); err != nil {
		t.Fatal(err)
	}
}

// waitReplaced waits until the NodePool no longer has node and all five pods run again,
// none on it, and returns how long after since each happened.
func (e *env) waitReplaced(t *testing.T, pool, selector, node string, since time.Time) (replaced, running time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, repairToleration+3*time.Minute, true, func(context.Context) (bool, error) {
		if replaced == 0 && !slices.Contains(e.poolNodes(t, pool), node) {
			replaced = time.Since(since)
		}
		if replaced == 0 || e.runningPods(t, selector) != 5 {
			return false, nil
		}
		for _, n := range e.poolLayout(t, pool, selector) {
			if n != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		n, getErr := e.cs.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
		if getErr == nil {
			t.Logf("node %s: conditions %+v, owners %+v", node, n.Status.Conditions, n.OwnerReferences)
		}
		t.Fatalf("node %s not replaced (NodeClaim gone after %s, pods running %d of 5): %v", node, replaced, e.runningPods(t, selector), err)
	}
	return replaced, time.Since(since)
}

// waitEvent waits for an event with reason.
func (e *env) waitEvent(t *testing.T, reason string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		events, err := e.cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, err
		}
		if len(events.Items) == 0 {
			return false, nil
		}
		ev := events.Items[0]
		t.Logf("%s %s: %s", ev.InvolvedObject.Name, ev.Reason, ev.Message)
		return true, nil
	})
	if err != nil {
		t.Fatalf("no %s event: %v", reason, err)
	}
}
