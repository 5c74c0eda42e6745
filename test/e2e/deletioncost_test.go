package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// TestScaleDownsDeleteThePodsOfTheNodeConsolidationWouldEmpty: three 1-CPU pods fill one
// 4-vCPU node, a fourth runs alone on a second. Left to itself, a ReplicaSet that scales
// down deletes a pod from the node with the most of its pods, and both nodes stay; with the
// deletion costs Tailor writes, it deletes the lone pod, whose node consolidation would take
// first, and the scale-down empties that node without an eviction.
func TestScaleDownsDeleteThePodsOfTheNodeConsolidationWouldEmpty(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) {
		o.ProvisionerArgs = append(o.ProvisionerArgs, "--disruption-interval=2s")
	})
	e.apply(t, "deletioncost.yaml")
	e.waitNodeClassReady(t, "default")
	const selector = "app=steered"
	e.waitPods(t, selector, 3, 2*time.Minute)
	e.scale(t, "steered", 4)
	e.waitPods(t, selector, 4, 2*time.Minute)

	// Every pod carries the cost of its node, the lone pod's the lowest.
	var pods []corev1.Pod
	perNode := map[string]int{}
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		list, err := e.cs.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods, perNode = list.Items, map[string]int{}
		for _, p := range pods {
			if _, ok := p.Annotations[deletioncost.ManagedAnnotationKey]; !ok {
				return false, nil
			}
			perNode[p.Spec.NodeName]++
		}
		return len(pods) == 4, nil
	})
	if err != nil {
		t.Fatalf("the pods did not all get a deletion cost: %v", describePodCosts(pods))
	}
	if len(perNode) != 2 {
		t.Fatalf("the four pods run on %d nodes, want three on one and one on another: %v", len(perNode), perNode)
	}
	var lone corev1.Pod
	for _, p := range pods {
		if perNode[p.Spec.NodeName] == 1 {
			lone = p
		}
	}
	loneCost := cost(t, lone)
	for _, p := range pods {
		if p.Name != lone.Name && cost(t, p) <= loneCost {
			t.Fatalf("pod %s on the full node has deletion cost %d, not above the lone pod's %d: %v", p.Name, cost(t, p), loneCost, describePodCosts(pods))
		}
	}
	t.Logf("deletion costs: %v", describePodCosts(pods))

	e.scale(t, "steered", 3)
	err = wait.PollUntilContextTimeout(e.ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods("default").Get(e.ctx, lone.Name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("the scale-down kept the lone pod %s on %s: running %d, want the three on the full node", lone.Name, lone.Spec.NodeName, e.runningPods(t, selector))
	}
	e.waitPods(t, selector, 3, time.Minute)
}

func cost(t *testing.T, p corev1.Pod) int {
	t.Helper()
	v, err := strconv.Atoi(p.Annotations[deletioncost.PodDeletionCostAnnotationKey])
	if err != nil {
		t.Fatalf("pod %s: deletion cost %q: %v", p.Name, p.Annotations[deletioncost.PodDeletionCostAnnotationKey], err)
	}
	return v
}

// describePodCosts lists each pod's node and deletion cost.
func describePodCosts(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+" on "+p.Spec.NodeName+": "+p.Annotations[deletioncost.PodDeletionCostAnnotationKey])
	}
	return out
}
