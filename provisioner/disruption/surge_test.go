package disruption

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// deployment creates on the API server an opted-in Deployment of one replica (edit changes
// it first), its ReplicaSet, and its pod bound to the fixture's node and Ready, and puts the
// pod on the node.
func (f *fixture) deployment(node string, edit func(*appsv1.Deployment)) *corev1.Pod {
	f.t.Helper()
	name := f.prefix + "-web"
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{surge.AnnotationKey: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}},
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}
	if edit != nil {
		edit(d)
	}
	if err := kube.Create(f.ctx, d); err != nil {
		f.t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-abc", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)},
		}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: tmpl},
	}
	if err := kube.Create(f.ctx, rs); err != nil {
		f.t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: rs.Name + "-old", Labels: labels, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	p.Spec.NodeName = f.prefix + "-" + node
	if err := kube.Create(f.ctx, p); err != nil {
		f.t.Fatal(err)
	}
	f.setReady(p)
	f.pods[p.Spec.NodeName] = append(f.pods[p.Spec.NodeName], p)
	return p
}

// setReady reports the pod Ready, as its kubelet would.
func (f *fixture) setReady(p *corev1.Pod) {
	f.t.Helper()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := kube.Status().Update(f.ctx, p); err != nil {
		f.t.Fatal(err)
	}
}

// copies are the pods that replace old before its eviction, as the API server has them.
func (f *fixture) copies(old *corev1.Pod) []corev1.Pod {
	f.t.Helper()
	pods := &corev1.PodList{}
	if err := kube.List(f.ctx, pods, client.InNamespace(old.Namespace), client.MatchingLabels{surge.ReplacesLabelKey: string(old.UID)}); err != nil {
		f.t.Fatal(err)
	}
	return pods.Items
}

// events drains the recorder's events and returns their reasons.
func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

// countReplacements returns a function that reports the replacements, by result, since it
// was made.
func countReplacements() func() map[string]float64 {
	results := []string{surge.ResultDone, surge.ResultAbandoned, surge.ResultFallback}
	start := map[string]float64{}
	for _, r := range results {
		start[r] = surgeTotal(r)
	}
	return func() map[string]float64 {
		out := map[string]float64{}
		for _, r := range results {
			out[r] = surgeTotal(r) - start[r]
		}
		return out
	}
}

// surgeTotal reads tailor_replace_before_evict_total{result} from the registry surge
// registers with.
func surgeTotal(result string) float64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range families {
		if mf.GetName() != "tailor_replace_before_evict_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// replacingFixture is a fixture where consolidation replaces nodes a and b by one small
// node: a runs the opted-in lone replica of a Deployment, b a pod of no controller. It
// returns after the pass that finds the replacement up.
func replacingFixture(t *testing.T, name string, edit func(*appsv1.Deployment)) (*fixture, *corev1.Pod, *record.FakeRecorder) {
	f := newFixture(t, name)
	recorder := record.NewFakeRecorder(100)
	f.ctrl.recorder = recorder
	f.node("a", "big.2xlarge")
	web := f.deployment("a", edit)
	f.node("b", "big.2xlarge", "1")
	f.pass()
	if f.launched != 1 {
		t.Fatalf("launched %d replacements, want 1 small node for both", f.launched)
	}
	f.initializeReplacement(1)
	f.pass()
	return f, web, recorder
}

func TestAnOptedInLoneReplicaIsReplacedBeforeItsNodeGoes(t *testing.T) {
	counts := countReplacements()
	f, web, recorder := replacingFixture(t, "surge", nil)
	copies := f.copies(web)
	if len(copies) != 1 {
		t.Fatalf("%d copies of the lone replica, want 1", len(copies))
	}
	copy := copies[0]
	if owner := metav1.GetControllerOf(&copy); owner == nil || owner.Kind != "NodeClaim" || owner.Name != f.prefix+"-a" {
		t.Errorf("the copy is owned by %v, want NodeClaim %s-a until it is Ready", owner, f.prefix)
	}
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("while the copy starts (-want +got):\n%s", diff)
	}
	want := map[string]map[types.UID]int{f.prefix + "-replacement-1": {web.OwnerReferences[0].UID: 1}}
	if diff := cmp.Diff(want, f.reservations(f.prefix+"-replacement-1")); diff != "" {
		t.Errorf("the replacement keeps room for the copy (-want +got):\n%s", diff)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("while the copy is not Ready (-want +got):\n%s", diff)
	}

	f.setReady(&copy)
	f.pass()
	released := &corev1.Pod{}
	if err := kube.Get(f.ctx, client.ObjectKeyFromObject(&copy), released); err != nil {
		t.Fatal(err)
	}
	if surge.IsCopy(released) || len(released.OwnerReferences) != 0 {
		t.Errorf("the Ready copy keeps its marks or owner %v: its ReplicaSet cannot adopt it", released.OwnerReferences)
	}
	old := &corev1.Pod{}
	if err := kube.Get(f.ctx, client.ObjectKeyFromObject(web), old); err != nil {
		t.Fatal(err)
	}
	if got := old.Annotations["controller.kubernetes.io/pod-deletion-cost"]; got != "-2147483648" {
		t.Errorf("the old pod's deletion cost is %q, want the lowest: its ReplicaSet deletes it first", got)
	}
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("while the ReplicaSet has not taken the old pod away (-want +got):\n%s", diff)
	}

	// The ReplicaSet controller deletes the pod of the lowest cost.
	if err := kube.Delete(f.ctx, old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "deleted"}, f.state("a", "b")); diff != "" {
		t.Errorf("once the old pod is gone (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{surge.ResultDone: 1, surge.ResultAbandoned: 0, surge.ResultFallback: 0}, counts()); diff != "" {
		t.Errorf("replacements by result (-want +got):\n%s", diff)
	}
	got := events(recorder)
	for _, reason := range []string{surge.ReasonReplacing, surge.ReasonReplaced} {
		if !slices.Contains(got, reason) {
			t.Errorf("no %s event among %v", reason, got)
		}
	}
}

func TestACopyNotReadyInTimeIsDeletedAndTheNodesKept(t *testing.T) {
	counts := countReplacements()
	f, web, recorder := replacingFixture(t, "surgelate", func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To(int32(120)) })
	copies := f.copies(web)
	if len(copies) != 1 {
		t.Fatalf("%d copies of the lone replica, want 1", len(copies))
	}
	f.clock.Step(119 * time.Second)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "cordoned", "b": "cordoned"}, f.state("a", "b")); diff != "" {
		t.Fatalf("within the Deployment's progress deadline (-want +got):\n%s", diff)
	}
	f.clock.Step(2 * time.Second)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("past the Deployment's progress deadline (-want +got):\n%s", diff)
	}
	if left := f.copies(web); len(left) != 0 {
		t.Errorf("%d copies left after the replacement was abandoned", len(left))
	}
	if got := f.reservations(f.prefix + "-replacement-1"); len(got) != 0 {
		t.Errorf("the abandoned replacement's reservation is left: %v", got)
	}
	if err := kube.Get(f.ctx, client.ObjectKeyFromObject(web), &corev1.Pod{}); err != nil {
		t.Errorf("the old pod: %v, want it kept", err)
	}
	if diff := cmp.Diff(map[string]float64{surge.ResultDone: 0, surge.ResultAbandoned: 1, surge.ResultFallback: 0}, counts()); diff != "" {
		t.Errorf("replacements by result (-want +got):\n%s", diff)
	}
	if got := events(recorder); !slices.Contains(got, surge.ReasonReplacementAbandoned) {
		t.Errorf("no %s event among %v", surge.ReasonReplacementAbandoned, got)
	}
}

// TestANewLeaderDeletesTheCopiesOfItsPredecessor: a leader that stops while a copy starts
// leaves it and the cordons behind; its successor lifts the cordons and deletes the copy.
func TestANewLeaderDeletesTheCopiesOfItsPredecessor(t *testing.T) {
	f, web, _ := replacingFixture(t, "surgeleader", nil)
	if n := len(f.copies(web)); n != 1 {
		t.Fatalf("%d copies of the lone replica, want 1", n)
	}
	successor := NewController(kube, kube, f, f, f, record.NewFakeRecorder(100), f.clock, f.ctrl.opts)
	if err := successor.Pass(f.ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("after the successor's first pass (-want +got):\n%s", diff)
	}
	if left := f.copies(web); len(left) != 0 {
		t.Errorf("%d copies left by the predecessor", len(left))
	}
	if err := kube.Get(f.ctx, client.ObjectKeyFromObject(web), &corev1.Pod{}); err != nil {
		t.Errorf("the old pod: %v, want it kept", err)
	}
}

func TestADeploymentWithoutSurgeFallsBackToEviction(t *testing.T) {
	counts := countReplacements()
	noSurge := func(d *appsv1.Deployment) {
		zero := intstr.FromInt32(0)
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero}}
	}
	f, web, recorder := replacingFixture(t, "nosurge", noSurge)
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "deleted"}, f.state("a", "b")); diff != "" {
		t.Errorf("once the replacement is up (-want +got):\n%s", diff)
	}
	if left := f.copies(web); len(left) != 0 {
		t.Errorf("%d copies of a pod of a Deployment with maxSurge 0", len(left))
	}
	if diff := cmp.Diff(map[string]float64{surge.ResultDone: 0, surge.ResultAbandoned: 0, surge.ResultFallback: 1}, counts()); diff != "" {
		t.Errorf("replacements by result (-want +got):\n%s", diff)
	}
	if got := events(recorder); !slices.Contains(got, surge.ReasonNoReplacement) {
		t.Errorf("no %s event among %v", surge.ReasonNoReplacement, got)
	}
}

// closedBudget creates a PodDisruptionBudget of the labels that allows no disruption now.
func (f *fixture) closedBudget(name string, labels map[string]string) {
	f.t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if err := kube.Create(f.ctx, pdb); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = kube.Delete(context.Background(), pdb) })
	pdb.Status.DisruptionsAllowed, pdb.Status.ObservedGeneration = 0, pdb.Generation
	if err := kube.Status().Update(f.ctx, pdb); err != nil {
		f.t.Fatal(err)
	}
}

// TestANodeABudgetHoldsIsLeftAlone: a node running a pod no one may evict now is not
// disrupted (its drain could not finish, and would hold every later decision), unless the
// pod is replaced before its eviction.
func TestANodeABudgetHoldsIsLeftAlone(t *testing.T) {
	for _, c := range []struct {
		name   string
		optOut bool
		want   map[string]string
	}{
		// a runs the held pod. Replaced first, it does not hold a: a and b go for one small
		// node. Not opted in, it keeps a, and b's pod moves onto a.
		{"the held pod is replaced before its eviction", false, map[string]string{"a": "cordoned", "b": "cordoned"}},
		{"the held pod is not opted in", true, map[string]string{"a": "kept", "b": "deleted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix := "held"
			if c.optOut {
				prefix = "heldout"
			}
			f := newFixture(t, prefix)
			f.node("a", "big.2xlarge")
			f.deployment("a", func(d *appsv1.Deployment) {
				if c.optOut {
					d.Spec.Template.Annotations[surge.AnnotationKey] = "false"
				}
			})
			if c.optOut {
				for _, p := range f.pods[f.prefix+"-a"] {
					p.Annotations = map[string]string{surge.AnnotationKey: "false"}
				}
			}
			f.node("b", "big.2xlarge", "1")
			f.closedBudget(f.prefix+"-web", map[string]string{"app": f.prefix + "-web"})
			f.pass()
			if diff := cmp.Diff(c.want, f.state("a", "b")); diff != "" {
				t.Errorf("after a pass (-want +got):\n%s", diff)
			}
		})
	}
}
