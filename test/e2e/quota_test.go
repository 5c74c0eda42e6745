package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// TestAQuotaGetsCapacityForHalfADeployment runs tailor-scheduler with CapacityScheduling
// and the provisioner with --elastic-quotas: a Deployment of four pods in a namespace whose
// ElasticQuota holds two gets capacity for two, which run, while the other two stay pending
// with an OverQuota event and nothing launched for them.
func TestAQuotaGetsCapacityForHalfADeployment(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) { o.CapacityScheduling = true })
	e.apply(t, "mixed-nodepools.yaml")
	e.waitNodeClassReady(t, "default")
	e.apply(t, "quota-workload.yaml")

	var running, pending []corev1.Pod
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := e.kube.List(ctx, pods, client.InNamespace("team-a"), client.MatchingLabels{"app": "batch"}); err != nil {
			return false, err
		}
		running, pending = nil, nil
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
			} else {
				pending = append(pending, p)
			}
		}
		return len(running) == 2 && len(pending) == 2 && e.overQuota(ctx, pending) == 2, nil
	})
	if err != nil {
		t.Fatalf("%d pods running, %d pending (%d with %s); want 2 and 2: %v", len(running), len(pending), e.overQuota(e.ctx, pending), provisioning.ReasonOverQuota, err)
	}
	// A batch window more: nothing is launched for the pods over the quota.
	time.Sleep(10 * time.Second)
	claims := &karpv1.NodeClaimList{}
	if err := e.kube.List(e.ctx, claims); err != nil {
		t.Fatal(err)
	}
	planned := 0
	for _, nc := range claims.Items {
		pods, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
		if err != nil {
			t.Fatal(err)
		}
		planned += len(pods)
	}
	t.Logf("2 pods running, 2 over the quota; %d NodeClaims, planned for %d pods", len(claims.Items), planned)
	if planned != 2 {
		t.Errorf("NodeClaims planned for %d pods, want the two the quota admits", planned)
	}
}

// overQuota counts the pods with an OverQuota event.
func (e *env) overQuota(ctx context.Context, pods []corev1.Pod) int {
	events := &corev1.EventList{}
	if err := e.kube.List(ctx, events, client.InNamespace("team-a")); err != nil {
		return 0
	}
	told := map[string]bool{}
	for _, ev := range events.Items {
		if ev.Reason == provisioning.ReasonOverQuota {
			told[ev.InvolvedObject.Name] = true
		}
	}
	n := 0
	for _, p := range pods {
		if told[p.Name] {
			n++
		}
	}
	return n
}
