package disruption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestUnderusedNodesAreReplacedOnceTheReplacementIsUp(t *testing.T) {
	f := newFixture(t, "replace")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.pods[f.prefix+"-b"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	passes := countPasses()
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("after the decision (-want +got):\n%s", diff)
	}
	if f.launched != 1 {
		t.Fatalf("launched %d replacements, want 1 small node for both", f.launched)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("while the replacement is not initialized (-want +got):\n%s", diff)
	}
	f.initializeReplacement(1)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "deleted"}, f.state("a", "b")); diff != "" {
		t.Errorf("once the replacement is up (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{PassDecided: 1, PassBusy: 2, PassIdle: 0, PassPlanning: 0, PassFailed: 0}, passes()); diff != "" {
		t.Errorf("passes by result (-want +got):\n%s", diff)
	}
	want := map[string]map[types.UID]int{f.prefix + "-replacement-1": {webReplicaSet.UID: 2}}
	if diff := cmp.Diff(want, f.reservations(f.prefix+"-replacement-1")); diff != "" {
		t.Errorf("reservations for the pods of a and b (-want +got):\n%s", diff)
	}
}

func TestAFailedReplacementLeavesTheNodesInPlace(t *testing.T) {
	f := newFixture(t, "abort")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	f.pass()
	if err := kube.Delete(f.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: f.prefix + "-replacement-1"}}); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("after the replacement failed (-want +got):\n%s", diff)
	}
}

func TestAReplacementWaitsOutDoNotDisruptAddedMeanwhile(t *testing.T) {
	f := newFixture(t, "revalidate")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	f.pass()
	node := &corev1.Node{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-a"}, node); err != nil {
		t.Fatal(err)
	}
	node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	if err := kube.Update(f.ctx, node); err != nil {
		t.Fatal(err)
	}
	f.initializeReplacement(1)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("after do-not-disrupt was set during the replacement (-want +got):\n%s", diff)
	}
}

func TestNoDecisionWhileTheLastOneIsUnderWay(t *testing.T) {
	f := newFixture(t, "motion")
	f.ctrl.opts.MovedPodsHold = time.Hour
	f.setBudget("1")
	f.node("a", "big.2xlarge", "500m")
	f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.node("b", "big.2xlarge", "1")
	f.node("c", "big.2xlarge", "1")
	a := &karpv1.NodeClaim{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-a"}, a); err != nil {
		t.Fatal(err)
	}
	// Termination's finalizer keeps a deleted NodeClaim until its node is drained.
	a.Finalizers = []string{"test.tailor.sh/draining"}
	if err := kube.Update(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	// The plan takes all three, a first onto a small replacement.
	f.pass()
	f.initializeReplacement(1)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "kept", "c": "kept"}, f.state("a", "b", "c")); diff != "" {
		t.Fatalf("first decision (-want +got):\n%s", diff)
	}
	delete(f.pods, f.prefix+"-a")
	// The budget would allow the rest of the plan now.
	f.setBudget("100%")
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "kept", "c": "kept"}, f.state("b", "c")); diff != "" {
		t.Errorf("while a is still draining (-want +got):\n%s", diff)
	}
	if err := kube.Get(f.ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	a.Finalizers = nil
	if err := kube.Update(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	// The ReplicaSet made up for the pod evicted from a; the new pod waits for a node.
	f.clock.Step(time.Second)
	moved := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-2", UID: "uid-web-2", OwnerReferences: []metav1.OwnerReference{webReplicaSet},
			CreationTimestamp: metav1.NewTime(f.clock.Now())},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}},
	}
	f.pending = []*corev1.Pod{moved}
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "kept", "c": "kept"}, f.state("b", "c")); diff != "" {
		t.Errorf("while the pod moved from a waits for a node (-want +got):\n%s", diff)
	}
	f.pending = nil
	moved.Spec.NodeName = f.prefix + "-c"
	f.pods[f.prefix+"-c"] = append(f.pods[f.prefix+"-c"], moved)
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "deleted", "c": "kept"}, f.state("b", "c")); diff != "" {
		t.Errorf("once the moved pod landed on c, b goes (-want +got):\n%s", diff)
	}
}

func TestDescribeSavings(t *testing.T) {
	tests := []struct {
		savings float64
		want    string
	}{
		{savings: 0.083, want: "saves $0.0830/hour"},
		{savings: -0.437, want: "costs $0.4370/hour more until the rest of the plan moves onto the replacements"},
	}
	for _, tt := range tests {
		if got := describeSavings(Decision{Savings: tt.savings}); got != tt.want {
			t.Errorf("describeSavings(%v) = %q, want %q", tt.savings, got, tt.want)
		}
	}
}
