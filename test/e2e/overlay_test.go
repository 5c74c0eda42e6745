package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// fpga is the extended resource an overlay adds, as a device plugin would advertise it.
const fpga corev1.ResourceName = "example.com/fpga"

// TestNodeOverlay runs the NodeOverlay feature gate (see testdata/overlay.yaml): a pod that
// needs a node of its own gets the cheaper c5.large; once an overlay raises c5's price by
// 20%, the next such pod gets an m5.large; and a pod requesting an extended resource no
// instance type has is planned once an overlay adds it to c5.large, and runs there when the
// node advertises it.
func TestNodeOverlay(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) {
		o.ProvisionerArgs = append(o.ProvisionerArgs, "--feature-gates=NodeOverlay=true")
	})
	e.apply(t, "overlay.yaml")
	e.waitNodeClassReady(t, "default")

	// 1500m of 2 vCPUs: each pod needs a node of its own.
	start := time.Now()
	e.createPod(t, pod("before", "1500m"))
	if got := e.instanceTypeOf(t, e.waitRunning(t, "before", 2*time.Minute)); got != "c5.large" {
		t.Fatalf("without overlay: %s launched, want c5.large", got)
	}
	t.Logf("without overlay: running on a c5.large %s after creation", time.Since(start).Round(time.Second))

	e.createOverlay(t, &v1alpha1.NodeOverlay{
		ObjectMeta: metav1.ObjectMeta{Name: "c5-licence"},
		Spec: v1alpha1.NodeOverlaySpec{
			Requirements:    []corev1.NodeSelectorRequirement{{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"c5"}}},
			PriceAdjustment: ptr.To("+20%"),
		},
	})
	start = time.Now()
	e.createPod(t, pod("after", "1500m"))
	if got := e.instanceTypeOf(t, e.waitRunning(t, "after", 2*time.Minute)); got != "m5.large" {
		t.Fatalf("with c5 20%% dearer: %s launched, want m5.large", got)
	}
	t.Logf("c5 20%% dearer: running on an m5.large %s after creation", time.Since(start).Round(time.Second))

	// The overlay of the higher weight puts the FPGA on c5.large only: the pod must get one
	// despite its price.
	e.createOverlay(t, &v1alpha1.NodeOverlay{
		ObjectMeta: metav1.ObjectMeta{Name: "fpga"},
		Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large"}}},
			Capacity:     corev1.ResourceList{fpga: resource.MustParse("1")},
			Weight:       ptr.To[int32](10),
		},
	})
	fpgaPod := pod("fpga", "100m")
	fpgaPod.Spec.Containers[0].Resources.Requests[fpga] = resource.MustParse("1")
	fpgaPod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fpga: resource.MustParse("1")}
	start = time.Now()
	e.createPod(t, fpgaPod)
	nc := e.waitPlannedFor(t, "fpga", 2*time.Minute)
	t.Logf("FPGA pod: NodeClaim %s registered %s after creation", nc.Name, time.Since(start).Round(time.Second))
	if got := nc.Labels[corev1.LabelInstanceTypeStable]; got != "c5.large" {
		t.Fatalf("the FPGA pod's NodeClaim %s launched %s, want c5.large", nc.Name, got)
	}
	// The device plugin's part: the node advertises the FPGA.
	node := &corev1.Node{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Status.Capacity[fpga] = resource.MustParse("1")
	node.Status.Allocatable[fpga] = resource.MustParse("1")
	if err := e.kube.Status().Patch(e.ctx, node, patch); err != nil {
		t.Fatal(err)
	}
	if got := e.waitRunning(t, "fpga", 2*time.Minute).Spec.NodeName; got != nc.Status.NodeName {
		t.Errorf("the FPGA pod runs on %s, want %s, the node planned for it", got, nc.Status.NodeName)
	}
}

func (e *env) createPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := e.cs.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createOverlay creates the overlay and waits until its status controller says it is Ready.
func (e *env) createOverlay(t *testing.T, o *v1alpha1.NodeOverlay) {
	t.Helper()
	if err := e.kube.Create(e.ctx, o); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.NodeOverlay{}
		if err := e.kube.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionTypeReady), nil
	})
	if err != nil {
		t.Fatalf("NodeOverlay %s not Ready: %v", o.Name, err)
	}
}

func (e *env) instanceTypeOf(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	node := &corev1.Node{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	return node.Labels[corev1.LabelInstanceTypeStable]
}

// waitPlannedFor waits for the launched NodeClaim whose planned pods include the pod.
func (e *env) waitPlannedFor(t *testing.T, name string, timeout time.Duration) *karpv1.NodeClaim {
	t.Helper()
	var found *karpv1.NodeClaim
	err := wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, nc := range e.nodeClaims(t) {
			pods, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
			if err != nil {
				return false, err
			}
			if slices.ContainsFunc(pods, func(p nomination.Pod) bool { return p.Name == name }) && nc.Status.NodeName != "" &&
				meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
				found = &nc
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no registered NodeClaim planned for pod %s: %v", name, err)
	}
	return found
}
