package drain

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var (
	kube client.Client
	cs   kubernetes.Interface
)

// TestMain runs the tests on a real API server, whose Eviction API enforces
// PodDisruptionBudgets and which selects pods by spec.nodeName itself.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(cfg *rest.Config) error {
		var err error
		if cs, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
		kube, err = client.New(cfg, client.Options{Scheme: apischeme.New()})
		return err
	}))
}

type podSpec struct {
	name        string
	daemon      bool
	priority    string
	annotations map[string]string
	tolerations []corev1.Toleration
	labels      map[string]string
}

func createPods(t *testing.T, ns, node string, specs []podSpec) {
	t.Helper()
	for _, s := range specs {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name, Annotations: s.annotations, Labels: s.labels},
			Spec: corev1.PodSpec{
				NodeName: node, PriorityClassName: s.priority, Tolerations: s.tolerations,
				// No kubelet runs here: a pod with no grace period goes at once when deleted.
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if s.daemon {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}}
		}
		if err := kube.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		// Running and Ready, as the kubelet would report: the Eviction API lets pods that
		// are not running go whatever their budget says.
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := kube.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "drain-"}}
	if err := kube.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// pass drains once and gives the API server a moment to delete what was evicted.
func pass(t *testing.T, d *Drainer, node string, deadline, now time.Time) Result {
	t.Helper()
	res, err := d.Drain(context.Background(), node, deadline, now)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	return res
}

// TestDrainGoesInWavesAndHonoursBudgets drains a node with a pod of every kind: ordinary
// pods go first, a pod its budget protects and a do-not-disrupt pod hold the later waves
// back, and once the grace period has ended everything left is deleted. Mirror pods,
// finished pods and pods tolerating the disruption taint stay.
func TestDrainGoesInWavesAndHonoursBudgets(t *testing.T) {
	ns, node := namespace(t), "node-waves"
	tolerating := []corev1.Toleration{{Key: karpv1.DisruptedNoScheduleTaint.Key, Operator: corev1.TolerationOpExists}}
	createPods(t, ns, node, []podSpec{
		{name: "web-0"},
		{name: "web-1"},
		{name: "guarded", labels: map[string]string{"app": "guarded"}},
		{name: "pinned", annotations: map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}},
		{name: "agent", daemon: true},
		{name: "dns", priority: "system-cluster-critical"},
		{name: "static", annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}},
		{name: "stays", tolerations: tolerating},
	})
	// A budget nobody has computed status for refuses every eviction, as one with no
	// disruptions allowed does.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}
	if err := kube.Create(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	d := New(kube, kube, cs)
	now := time.Now()
	deadline := now.Add(time.Hour)
	blocked := map[string]string{
		ns + "/guarded": "a PodDisruptionBudget allows no disruption now",
		ns + "/pinned":  karpv1.DoNotDisruptAnnotationKey + " is set; the pod leaves when the grace period ends",
	}
	steps := []struct {
		name string
		now  time.Time
		want Result
	}{
		{
			name: "the first pass evicts the ordinary pods the budget allows",
			now:  now,
			want: Result{Remaining: map[Wave]int{WaveWorkload: 4, WaveDaemon: 1, WaveCritical: 1}, Blocked: blocked},
		},
		{
			name: "the blocked pods hold back the DaemonSet and critical pods",
			now:  now.Add(time.Minute),
			want: Result{Remaining: map[Wave]int{WaveWorkload: 2, WaveDaemon: 1, WaveCritical: 1}, Blocked: blocked},
		},
		{
			name: "past the grace period every pod left is deleted",
			now:  deadline,
			want: Result{Remaining: map[Wave]int{WaveWorkload: 2, WaveDaemon: 1, WaveCritical: 1}, Blocked: map[string]string{}, Forced: 4},
		},
		{
			name: "then only the pods that stay are left",
			now:  deadline.Add(time.Second),
			want: Result{Remaining: map[Wave]int{}, Blocked: map[string]string{}},
		},
	}
	for _, step := range steps {
		got := pass(t, d, node, deadline, step.now)
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Fatalf("%s: result (-want +got):\n%s", step.name, diff)
		}
	}
	left := &corev1.PodList{}
	if err := kube.List(context.Background(), left, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left.Items {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"static", "stays"}, names); diff != "" {
		t.Errorf("pods left on the node (-want +got):\n%s", diff)
	}
}

// TestDrainEvictsWaveAfterWave drains a node without blockers: one wave per pass.
func TestDrainEvictsWaveAfterWave(t *testing.T) {
	ns, node := namespace(t), "node-free"
	createPods(t, ns, node, []podSpec{{name: "web"}, {name: "agent", daemon: true}, {name: "proxy", priority: "system-node-critical"}})
	time.Sleep(300 * time.Millisecond)
	d := New(kube, kube, cs)
	want := []map[Wave]int{
		{WaveWorkload: 1, WaveDaemon: 1, WaveCritical: 1},
		{WaveDaemon: 1, WaveCritical: 1},
		{WaveCritical: 1},
		{},
	}
	for i, w := range want {
		got := pass(t, d, node, time.Time{}, time.Now())
		if diff := cmp.Diff(w, got.Remaining); diff != "" {
			t.Fatalf("pass %d: remaining (-want +got):\n%s", i+1, diff)
		}
	}
	if got := pass(t, d, node, time.Time{}, time.Now()); !got.Done() {
		t.Errorf("after every wave: Done() = false, remaining %v", got.Remaining)
	}
}

// laggingCache is a cache whose watch has not come back since an API server outage: it lists
// no pods, whatever the API server holds.
type laggingCache struct{ client.Client }

func (laggingCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestDrainAsksTheAPIServerBeforeCallingANodeEmpty(t *testing.T) {
	ns, node := namespace(t), "node-lagging"
	createPods(t, ns, node, []podSpec{{name: "web"}, {name: "agent", daemon: true}})
	d := New(laggingCache{kube}, kube, cs)
	got := pass(t, d, node, time.Time{}, time.Now())
	if diff := cmp.Diff(map[Wave]int{WaveWorkload: 1, WaveDaemon: 1}, got.Remaining); diff != "" {
		t.Fatalf("pods the cache does not show yet (-want +got):\n%s", diff)
	}
	left := &corev1.PodList{}
	if err := kube.List(context.Background(), left, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	if diff := cmp.Diff([]string{"agent"}, names); diff != "" {
		t.Errorf("pods left after the pass, the workload evicted first (-want +got):\n%s", diff)
	}
}
