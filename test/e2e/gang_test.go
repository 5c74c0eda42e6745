package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
)

// gangMembers is the gang test's minMember and replica count.
const gangMembers = 16

// TestGangRunsWholeOrNotAtAll runs a 16-worker GPU job declared by a Coscheduling PodGroup
// through tailor-scheduler (Coscheduling and NodeProvisioning) and the provisioner, with
// its NodePool limited to 12 GPUs: no NodeClaim is launched, and the PodGroup says why.
// Once the limit is raised to 16, the gang is planned whole without waiting for the
// scheduler to try it again, and all 16 pods are bound within seconds of each other.
func TestGangRunsWholeOrNotAtAll(t *testing.T) {
	e := startStack(t)
	e.apply(t, "gang-nodepool.yaml")
	e.waitNodeClassReady(t, "default")
	created := time.Now()
	e.apply(t, "gang-workload.yaml")

	// Refused: the PodGroup is told, and nothing is launched, then or later.
	var refusal string
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := e.kube.List(ctx, events, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == "PodGroup" && ev.InvolvedObject.Name == "train" && ev.Reason == provisioning.ReasonGangNotProvisioned {
				refusal = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on PodGroup train: %v", provisioning.ReasonGangNotProvisioned, err)
	}
	t.Logf("refused %s after creation: %s", time.Since(created).Round(time.Second), refusal)
	// Two more batch windows: a gang planned in part would have its NodeClaims by then.
	time.Sleep(20 * time.Second)
	if claims := e.gpuClaims(t); len(claims) > 0 {
		t.Fatalf("%d NodeClaims launched for a gang that cannot run: %v", len(claims), claims)
	}

	e.setGPULimit(t, "16")
	raised := time.Now()
	bound, _ := e.waitGangRunning(t, "train", gangMembers)
	first, last := slices.MinFunc(bound, time.Time.Compare), slices.MaxFunc(bound, time.Time.Compare)
	t.Logf("all %d members running %s after the limit was raised, bound within %s of each other (to the second), on %d NodeClaims",
		gangMembers, time.Since(raised).Round(time.Second), last.Sub(first), len(e.gpuClaims(t)))
	// Coscheduling's Permit holds the members until all have a node, then binds them.
	if spread := last.Sub(first); spread > 10*time.Second {
		t.Errorf("members bound over %s, want within seconds of each other", spread)
	}

	// A gang that fits from the start: from its last member's creation to all running.
	e.setGPULimit(t, "20")
	e.apply(t, "gang-eval.yaml")
	_, evalCreated := e.waitGangRunning(t, "eval", 4)
	t.Logf("a 4-member gang that fits: all running %s after its last member was created", time.Since(slices.MaxFunc(evalCreated, time.Time.Compare)).Round(time.Second))
}

// setGPULimit sets the GPU limit of the gang test's NodePool.
func (e *env) setGPULimit(t *testing.T, gpus string) {
	t.Helper()
	np := &karpv1.NodePool{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: "gpu"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits = karpv1.Limits{"nvidia.com/gpu": resource.MustParse(gpus)}
	if err := e.kube.Update(e.ctx, np); err != nil {
		t.Fatal(err)
	}
}

// waitGangRunning waits for n pods of the app to run and returns when each was bound and
// created.
func (e *env) waitGangRunning(t *testing.T, app string, n int) (bound, created []time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := e.kube.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
			return false, err
		}
		bound, created = bound[:0], created[:0]
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				continue
			}
			created = append(created, p.CreationTimestamp.Time)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					bound = append(bound, c.LastTransitionTime.Time)
				}
			}
		}
		return len(bound) == n, nil
	})
	if err != nil {
		t.Fatalf("%d of %d pods of %s running: %v", len(bound), n, app, err)
	}
	return bound, created
}

// gpuClaims names the NodeClaims of the gang test's NodePool.
func (e *env) gpuClaims(t *testing.T) []string {
	t.Helper()
	claims := &karpv1.NodeClaimList{}
	if err := e.kube.List(e.ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: "gpu"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nc := range claims.Items {
		names = append(names, nc.Name)
	}
	return names
}
