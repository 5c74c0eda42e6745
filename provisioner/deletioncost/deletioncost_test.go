package deletioncost_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var kube client.Client

func TestMain(m *testing.M) { testenv.Main(m, nil, &kube) }

const scheduler = "tailor-scheduler"

// pod makes a pod on node in namespace ns: owned by a ReplicaSet and placed by Tailor's
// scheduler unless changed by the options.
func pod(t *testing.T, ns, name, node string, opts ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid", Controller: ptr.To(true),
		}}},
		Spec: corev1.PodSpec{SchedulerName: scheduler, NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "app"}}},
	}
	for _, o := range opts {
		o(p)
	}
	if err := kube.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "deletioncost-"}}
	if err := kube.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), ns) })
	return ns.Name
}

func start(t *testing.T, s *deletioncost.Steerer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// costs reads the deletion costs and Tailor's records of the namespace's pods, as
// "cost/record" ("-" for none).
func costs(t *testing.T, ns string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := kube.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		get := func(key string) string {
			if v, ok := p.Annotations[key]; ok {
				return v
			}
			return "-"
		}
		out[p.Name] = get(deletioncost.PodDeletionCostAnnotationKey) + "/" + get(deletioncost.ManagedAnnotationKey)
	}
	return out
}

// waitFor polls until the namespace's costs are want, and fails with the difference.
func waitFor(t *testing.T, ns string, want map[string]string) {
	t.Helper()
	var got map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		got = costs(t, ns)
		return cmp.Diff(want, got) == "", nil
	})
	if err != nil {
		t.Fatalf("deletion costs (-want +got):\n%s", cmp.Diff(want, got))
	}
}

func refresh(t *testing.T, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	for _, p := range pods {
		if err := kube.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			t.Fatal(err)
		}
	}
	return pods
}

func TestSteererWritesTheRankedNodesCostsOnlyOnThePodsTailorPlaced(t *testing.T) {
	ns := namespace(t)
	ranked := []*corev1.Pod{pod(t, ns, "a-1", "node-a"), pod(t, ns, "a-2", "node-a")}
	user := pod(t, ns, "a-user", "node-a", func(p *corev1.Pod) {
		p.Annotations = map[string]string{deletioncost.PodDeletionCostAnnotationKey: "1000"}
	})
	other := pod(t, ns, "a-other-scheduler", "node-a", func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" })
	bare := pod(t, ns, "a-bare", "node-a", func(p *corev1.Pod) { p.OwnerReferences = nil })
	onB := pod(t, ns, "b-1", "node-b")
	onC := pod(t, ns, "c-1", "node-c")

	s := deletioncost.New(kube, deletioncost.Options{Schedulers: []string{scheduler}, QPS: 1000, Burst: 10})
	start(t, s)
	s.Steer([]deletioncost.Node{
		{Name: "node-a", Ranked: true, Cost: -500, Pods: append(ranked, user, other, bare)},
		{Name: "node-b", Ranked: true, Cost: -20, Pods: []*corev1.Pod{onB}},
		{Name: "node-c", Pods: []*corev1.Pod{onC}},
	})
	waitFor(t, ns, map[string]string{
		"a-1": "-500/-500", "a-2": "-500/-500",
		"a-user": "1000/-", "a-other-scheduler": "-/-", "a-bare": "-/-",
		"b-1": "-20/-20", "c-1": "-/-",
	})

	// node-a's cost moves by less than a tenth: its pods keep theirs. node-b loses its rank,
	// and its pod the cost Tailor wrote; node-c gains one.
	refresh(t, append(ranked, onB, onC)...)
	s.Steer([]deletioncost.Node{
		{Name: "node-a", Ranked: true, Cost: -520, Pods: ranked},
		{Name: "node-b", Pods: []*corev1.Pod{onB}},
		{Name: "node-c", Ranked: true, Cost: -7, Pods: []*corev1.Pod{onC}},
	})
	waitFor(t, ns, map[string]string{
		"a-1": "-500/-500", "a-2": "-500/-500",
		"a-user": "1000/-", "a-other-scheduler": "-/-", "a-bare": "-/-",
		"b-1": "-/-", "c-1": "-7/-7",
	})
}

func TestSteererLeavesACostSomeoneElseChangedAlone(t *testing.T) {
	ns := namespace(t)
	p := pod(t, ns, "web", "node-a")
	s := deletioncost.New(kube, deletioncost.Options{Schedulers: []string{scheduler}, QPS: 1000, Burst: 10})
	start(t, s)
	s.Steer([]deletioncost.Node{{Name: "node-a", Ranked: true, Cost: -300, Pods: []*corev1.Pod{p}}})
	waitFor(t, ns, map[string]string{"web": "-300/-300"})

	// A user raises the pod's cost to keep it: Tailor's record no longer matches, and
	// neither a new cost nor the node losing its rank touches it.
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"5000"}}}`, deletioncost.PodDeletionCostAnnotationKey))
	if err := kube.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	refresh(t, p)
	s.Steer([]deletioncost.Node{{Name: "node-a", Ranked: true, Cost: -9000, Pods: []*corev1.Pod{p}}})
	s.Steer([]deletioncost.Node{{Name: "node-a", Pods: []*corev1.Pod{p}}})
	// A pod steered after the user's gives the patches time to have been applied.
	marker := pod(t, ns, "marker", "node-b")
	s.Steer([]deletioncost.Node{{Name: "node-a", Pods: []*corev1.Pod{p}}, {Name: "node-b", Ranked: true, Cost: -1, Pods: []*corev1.Pod{marker}}})
	waitFor(t, ns, map[string]string{"web": "5000/-300", "marker": "-1/-1"})
}

func TestSteererDoesNotPatchAPodRecreatedUnderTheSameName(t *testing.T) {
	ns := namespace(t)
	old := pod(t, ns, "web-0", "node-a")
	if err := kube.Delete(context.Background(), old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
		return kube.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{}) != nil, nil
	})
	if err != nil {
		t.Fatal("the old pod is not gone")
	}
	pod(t, ns, "web-0", "node-b")
	marker := pod(t, ns, "marker", "node-c")
	s := deletioncost.New(kube, deletioncost.Options{Schedulers: []string{scheduler}, QPS: 1000, Burst: 10})
	start(t, s)
	// The view still holds the old pod: its patch must not land on the new one.
	s.Steer([]deletioncost.Node{
		{Name: "node-a", Ranked: true, Cost: -50, Pods: []*corev1.Pod{old}},
		{Name: "node-c", Ranked: true, Cost: -1, Pods: []*corev1.Pod{marker}},
	})
	waitFor(t, ns, map[string]string{"web-0": "-/-", "marker": "-1/-1"})
}

func TestSteererPatchesAtMostQPSPodsASecond(t *testing.T) {
	ns := namespace(t)
	var pods []*corev1.Pod
	for i := range 6 {
		pods = append(pods, pod(t, ns, fmt.Sprintf("web-%d", i), "node-a"))
	}
	s := deletioncost.New(kube, deletioncost.Options{Schedulers: []string{scheduler}, QPS: 4, Burst: 1})
	start(t, s)
	began := time.Now()
	s.Steer([]deletioncost.Node{{Name: "node-a", Ranked: true, Cost: -10, Pods: pods}})
	want := map[string]string{}
	for _, p := range pods {
		want[p.Name] = "-10/-10"
	}
	waitFor(t, ns, want)
	// Six patches at four a second, one at once: the last waits five quarters of a second.
	if took := time.Since(began); took < time.Second {
		t.Errorf("six patches at 4 a second took %s, want at least 1s", took)
	}
}
