package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/scenario"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

func pod(name, cpu string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName:                 "tailor-scheduler",
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi"),
				}},
			}},
		},
	}
}

func (e *env) applyExamplePool(t *testing.T) {
	t.Helper()
	applier, err := localstack.NewApplier(e.stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applier.ApplyFiles(e.ctx, filepath.Join(testenv.Root(), "manifests", "examples", "general.yaml")); err != nil {
		t.Fatal(err)
	}
}

func (e *env) waitRunning(t *testing.T, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	return stacktest.WaitRunning(t, e.ctx, e.cs, name, timeout)
}

func (e *env) nodeClaims(t *testing.T) []karpv1.NodeClaim {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := e.kube.List(e.ctx, list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestUnprovisionablePodIsExplainedNotLaunched: a pod larger than every instance type gets a
// Warning event saying why per NodePool, and nothing is launched.
func TestUnprovisionablePodIsExplainedNotLaunched(t *testing.T) {
	e := startStack(t)
	e.applyExamplePool(t)
	if _, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Create(e.ctx, pod("huge", "1000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var event corev1.Event
	err := wait.PollUntilContextTimeout(e.ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := e.cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": "huge", "reason": "FailedProvisioning"}.String(),
		})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		event = events.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no FailedProvisioning event for the pod: %v", err)
	}
	if event.Type != corev1.EventTypeWarning {
		t.Errorf("event type = %s, want Warning", event.Type)
	}
	for _, want := range []string{`NodePool "general"`, "no instance type has room for the pod's requests (cpu=1k", "short of cpu"} {
		if !strings.Contains(event.Message, want) {
			t.Errorf("event message %q does not say %q", event.Message, want)
		}
	}
	if claims := e.nodeClaims(t); len(claims) != 0 {
		t.Errorf("%d NodeClaims were created for an unprovisionable pod, want none", len(claims))
	}
}

// TestSchedulingContinuesWhileTheProvisionerIsDown: with the sidecar stopped, the scheduler
// still places pods on existing nodes; a pod that needs a new node waits, and is provisioned
// once the sidecar is back.
func TestSchedulingContinuesWhileTheProvisionerIsDown(t *testing.T) {
	e := startStack(t)
	if _, err := scenario.Demo(e.ctx, e.stack, testenv.Root(), testWriter{t}); err != nil {
		t.Fatal(err)
	}
	existing := e.nodeClaims(t)
	onExisting := map[string]bool{}
	for _, nc := range existing {
		onExisting[nc.Status.NodeName] = true
	}
	e.stack.Stop(localstack.Provisioner)

	if _, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Create(e.ctx, pod("fits", "100m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.waitRunning(t, "fits", time.Minute); !onExisting[got.Spec.NodeName] {
		t.Errorf("pod fits ran on %q, want one of the nodes the demo launched %v", got.Spec.NodeName, onExisting)
	}

	if _, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Create(e.ctx, pod("needs-node", "12"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	p, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Get(e.ctx, "needs-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" || len(e.nodeClaims(t)) != len(existing) {
		t.Fatalf("with the provisioner down, pod needs-node was bound to %q and %d NodeClaims exist; want it pending and %d", p.Spec.NodeName, len(e.nodeClaims(t)), len(existing))
	}

	if err := e.stack.Start(e.ctx, localstack.Provisioner); err != nil {
		t.Fatal(err)
	}
	got := e.waitRunning(t, "needs-node", 2*time.Minute)
	if onExisting[got.Spec.NodeName] {
		t.Errorf("pod needs-node ran on the existing node %s, want a new one", got.Spec.NodeName)
	}
	if n := len(e.nodeClaims(t)); n != len(existing)+1 {
		t.Errorf("%d NodeClaims after the provisioner returned, want %d", n, len(existing)+1)
	}
}
