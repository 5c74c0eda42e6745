package surge_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var kube client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, nil, &kube)
}

func TestOptedIn(t *testing.T) {
	pool := func(v string) *karpv1.NodePool {
		return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{surge.AnnotationKey: v}}}
	}
	pod := func(v string) *corev1.Pod {
		p := &corev1.Pod{}
		if v != "" {
			p.Annotations = map[string]string{surge.AnnotationKey: v}
		}
		return p
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		pool *karpv1.NodePool
		want bool
	}{
		{"the pod opts in", pod("true"), nil, true},
		{"the pod says nothing, nor its NodePool", pod(""), pool(""), false},
		{"the NodePool makes it the default", pod(""), pool("true"), true},
		{"the pod opts out of its NodePool's default", pod("false"), pool("true"), false},
		{"an unreadable value on the pod opts out", pod("yes please"), pool("true"), false},
		{"no NodePool", pod(""), nil, false},
	} {
		if got := surge.OptedIn(c.pod, c.pool); got != c.want {
			t.Errorf("%s: surge.OptedIn = %t, want %t", c.name, got, c.want)
		}
	}
}

// workload is a Deployment, its ReplicaSet and its pods on the API server, in a namespace
// of its own.
type workload struct {
	ns   string
	d    *appsv1.Deployment
	rs   *appsv1.ReplicaSet
	pods []*corev1.Pod
}

// newWorkload creates a Deployment of the replicas, changed by edit before it is created,
// its ReplicaSet, and its pods, Ready when ready says so.
func newWorkload(t *testing.T, ns string, ready []bool, edit func(*appsv1.Deployment)) *workload {
	t.Helper()
	ctx := context.Background()
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{surge.AnnotationKey: "true"}},
		Spec:       corev1.PodSpec{SchedulerName: "tailor-scheduler", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(len(ready))), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}
	if edit != nil {
		edit(d)
	}
	if err := kube.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	rsTmpl := *tmpl.DeepCopy()
	rsTmpl.Labels = map[string]string{"app": "web", "pod-template-hash": "abc"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-abc", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)},
		}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: &metav1.LabelSelector{MatchLabels: rsTmpl.Labels}, Template: rsTmpl},
	}
	if err := kube.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	w := &workload{ns: ns, d: d, rs: rs}
	for i, r := range ready {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-abc-" + strconv.Itoa(i), Labels: rsTmpl.Labels, Annotations: rsTmpl.Annotations,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: rsTmpl.Spec,
		}
		if err := kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionFalse
		if r {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if err := kube.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		w.pods = append(w.pods, p)
	}
	return w
}

func (w *workload) pdb(t *testing.T, allowed int32) {
	t.Helper()
	ctx := context.Background()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: w.d.Spec.Selector},
	}
	if err := kube.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status.DisruptionsAllowed, pdb.Status.ObservedGeneration = allowed, pdb.Generation
	if err := kube.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	maxSurge := func(v intstr.IntOrString) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &v}}
		}
	}
	for i, c := range []struct {
		name    string
		ready   []bool
		leaving []int
		edit    func(*appsv1.Deployment)
		// pdb, when not nil, is the disruptions a PodDisruptionBudget allows.
		pdb     *int32
		timeout time.Duration
		// want is the copy's timeout, or 0 for no surge; fallback is the fallback's text.
		want     time.Duration
		fallback string
	}{
		{name: "a lone replica", ready: []bool{true}, leaving: []int{0}, want: surge.DefaultProgressDeadline},
		{name: "a lone replica of a Deployment with a progress deadline", ready: []bool{true}, leaving: []int{0},
			edit: func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To(int32(90)) }, want: 90 * time.Second},
		{name: "the flag's bound wins over the progress deadline", ready: []bool{true}, leaving: []int{0}, timeout: time.Minute,
			edit: func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To(int32(90)) }, want: time.Minute},
		{name: "another replica is Ready and no budget holds", ready: []bool{true, true}, leaving: []int{0}},
		{name: "the other replica is not Ready", ready: []bool{true, false}, leaving: []int{0}, want: surge.DefaultProgressDeadline},
		{name: "both replicas leave with the decision", ready: []bool{true, true}, leaving: []int{0, 1}, want: surge.DefaultProgressDeadline},
		{name: "another replica is Ready but the budget allows nothing", ready: []bool{true, true}, leaving: []int{0}, pdb: ptr.To(int32(0)), want: surge.DefaultProgressDeadline},
		{name: "another replica is Ready and the budget allows one", ready: []bool{true, true}, leaving: []int{0}, pdb: ptr.To(int32(1))},
		{name: "maxSurge 0", ready: []bool{true}, leaving: []int{0}, edit: maxSurge(intstr.FromInt32(0)),
			fallback: "evicting it would leave Deployment web without a Ready replica, but its Deployment sets maxSurge 0: it runs no pod beyond its replicas"},
		{name: "maxSurge 0%", ready: []bool{true}, leaving: []int{0}, edit: maxSurge(intstr.FromString("0%")),
			fallback: "evicting it would leave Deployment web without a Ready replica, but its Deployment sets maxSurge 0: it runs no pod beyond its replicas"},
		{name: "maxSurge 10% of one replica rounds up", ready: []bool{true}, leaving: []int{0}, edit: maxSurge(intstr.FromString("10%")), want: surge.DefaultProgressDeadline},
		{name: "Recreate", ready: []bool{true}, leaving: []int{0}, pdb: ptr.To(int32(0)),
			edit: func(d *appsv1.Deployment) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			},
			fallback: "evicting it would leave Deployment web without a Ready replica, but its Deployment's strategy is Recreate, which runs no pod beyond its replicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorkload(t, "check-"+strconv.Itoa(i), c.ready, c.edit)
			if c.pdb != nil {
				w.pdb(t, *c.pdb)
			}
			leaving := map[types.UID]bool{}
			for _, i := range c.leaving {
				leaving[w.pods[i].UID] = true
			}
			v, err := surge.Checker{API: kube, Pods: kube, Timeout: c.timeout}.Check(context.Background(), w.pods[0], leaving)
			if err != nil {
				t.Fatal(err)
			}
			var got time.Duration
			if v.Plan != nil {
				got = v.Plan.Timeout
				if v.Plan.ReplicaSet.UID != w.rs.UID || v.Plan.Deployment.UID != w.d.UID || v.Plan.Pod.UID != w.pods[0].UID {
					t.Errorf("the plan names ReplicaSet %s, Deployment %s, pod %s; want %s, %s, %s",
						v.Plan.ReplicaSet.UID, v.Plan.Deployment.UID, v.Plan.Pod.UID, w.rs.UID, w.d.UID, w.pods[0].UID)
				}
			}
			if got != c.want || v.Fallback != c.fallback {
				t.Errorf("Check = timeout %s, fallback %q; want %s, %q", got, v.Fallback, c.want, c.fallback)
			}
		})
	}
}

func TestCheckFallsBackForPodsNoDeploymentOwns(t *testing.T) {
	owned := func(kind string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "o", UID: "u", Controller: ptr.To(true)}}
		}
		return p
	}
	for _, c := range []struct {
		kind, want string
	}{
		{"", "a pod no controller owns cannot be replaced before it is evicted: nothing would own its copy"},
		{"StatefulSet", "a StatefulSet's pod cannot be replaced before it is evicted: its replacement takes its name and volumes, so it starts only once the pod is gone"},
		{"Job", "a pod of a Job cannot be replaced before it is evicted: only Deployments' pods can"},
		{"ReplicaSet", "its ReplicaSet o is gone"},
	} {
		v, err := surge.Checker{API: kube, Pods: kube}.Check(context.Background(), owned(c.kind), nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Plan != nil || v.Fallback != c.want {
			t.Errorf("owner %q: plan %v, fallback %q; want none, %q", c.kind, v.Plan, v.Fallback, c.want)
		}
	}
}

// TestACopyIsTheReplicaSetsOnceReleased creates a copy on the API server and releases it:
// the copy is its ReplicaSet's template, owned by the NodeClaim until released, and then
// as any orphan the ReplicaSet adopts; the old pod gets the lowest deletion cost.
func TestACopyIsTheReplicaSetsOnceReleased(t *testing.T) {
	ctx := context.Background()
	w := newWorkload(t, "release", []bool{true}, nil)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "release-original"},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}},
		}}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	deadline := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	plan := &surge.Plan{Pod: w.pods[0], ReplicaSet: w.rs, Deployment: w.d, Timeout: time.Minute}
	copy := surge.Copy(plan, nc, deadline)
	if err := kube.Create(ctx, copy); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"app": "web", "pod-template-hash": "abc", surge.ReplacesLabelKey: string(w.pods[0].UID)}
	wantAnnotations := map[string]string{surge.AnnotationKey: "true", surge.ReplacesAnnotationKey: w.pods[0].Name,
		surge.DeadlineAnnotationKey: "2026-12-04T21:00:00Z", reservation.ControllerAnnotationKey: string(w.rs.UID)}
	if diff := cmp.Diff(wantLabels, copy.Labels); diff != "" {
		t.Errorf("the copy's labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantAnnotations, copy.Annotations); diff != "" {
		t.Errorf("the copy's annotations (-want +got):\n%s", diff)
	}
	if owner := metav1.GetControllerOf(copy); owner == nil || owner.UID != nc.UID {
		t.Errorf("the copy's controller is %v, want NodeClaim %s", owner, nc.Name)
	}
	if uid, _ := reservation.ControllerOf(copy); uid != w.rs.UID {
		t.Errorf("the copy counts for controller %s in reservations, want its ReplicaSet %s", uid, w.rs.UID)
	}
	if got, ok := surge.Deadline(copy); !ok || !got.Equal(deadline) {
		t.Errorf("surge.Deadline = %s, %t; want %s", got, ok, deadline)
	}
	if !surge.IsCopy(copy) {
		t.Error("surge.IsCopy = false for a copy not released")
	}

	if err := surge.Release(ctx, kube, copy, w.pods[0]); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(copy), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"app": "web", "pod-template-hash": "abc"}, got.Labels); diff != "" {
		t.Errorf("the released copy's labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{surge.AnnotationKey: "true"}, got.Annotations); diff != "" {
		t.Errorf("the released copy's annotations (-want +got):\n%s", diff)
	}
	if len(got.OwnerReferences) != 0 || surge.IsCopy(got) {
		t.Errorf("the released copy is still owned by %v (surge.IsCopy %t): its ReplicaSet cannot adopt it", got.OwnerReferences, surge.IsCopy(got))
	}
	old := &corev1.Pod{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(w.pods[0]), old); err != nil {
		t.Fatal(err)
	}
	if cost := old.Annotations[deletioncost.PodDeletionCostAnnotationKey]; cost != strconv.Itoa(math.MinInt32) {
		t.Errorf("the old pod's deletion cost is %q, want the lowest, %d", cost, math.MinInt32)
	}
}
