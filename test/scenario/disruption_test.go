package scenario

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

func TestOutagesCountOnlyTimeWithoutAReadyEndpointAfterBegin(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type obs struct {
		svc   string
		ready bool
		at    int
	}
	for _, tc := range []struct {
		name  string
		begin int
		obs   []obs
		end   int
		want  map[string]time.Duration
	}{
		{
			name: "ready throughout", begin: 10, end: 100,
			obs:  []obs{{"a", true, 0}, {"a", true, 50}},
			want: map[string]time.Duration{"a": 0},
		},
		{
			name: "one gap after begin", begin: 10, end: 100,
			obs:  []obs{{"a", true, 0}, {"a", false, 20}, {"a", true, 23}},
			want: map[string]time.Duration{"a": 3 * time.Second},
		},
		{
			name: "a gap before begin does not count, one across it counts from begin", begin: 10, end: 100,
			obs:  []obs{{"a", true, 0}, {"a", false, 2}, {"a", true, 4}, {"a", false, 8}, {"a", true, 12}},
			want: map[string]time.Duration{"a": 2 * time.Second},
		},
		{
			name: "repeated not-ready observations keep the gap's start", begin: 0, end: 100,
			obs:  []obs{{"a", true, 0}, {"a", false, 10}, {"a", false, 15}, {"a", true, 20}},
			want: map[string]time.Duration{"a": 10 * time.Second},
		},
		{
			name: "still without at the end counts to the end", begin: 10, end: 100,
			obs:  []obs{{"a", true, 0}, {"a", false, 40}, {"b", true, 0}},
			want: map[string]time.Duration{"a": 60 * time.Second, "b": 0},
		},
		{
			name: "a Service never observed had none from begin", begin: 10, end: 100,
			want: map[string]time.Duration{"c": 90 * time.Second},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutages()
			begun := false
			for _, ob := range tc.obs {
				if !begun && ob.at >= tc.begin {
					o.begin(at(tc.begin))
					begun = true
				}
				o.observe(ob.svc, ob.ready, at(ob.at))
			}
			if !begun {
				o.begin(at(tc.begin))
			}
			got := map[string]time.Duration{}
			for svc := range tc.want {
				got[svc] = o.without(svc, at(tc.end))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("time without a ready endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

func disruptionTestPod(name, deployment string, phase corev1.PodPhase, labels map[string]string, deleting bool) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{DeploymentLabel: deployment}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for k, v := range labels {
		p.Labels[k] = v
	}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func TestExtraPodsCountPodsBeyondReplicasAndCopiesOnce(t *testing.T) {
	copyOf := map[string]string{surge.ReplacesLabelKey: "uid-old"}
	want := map[string]int{"a": 1, "b": 1, "filler": 1}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want int
	}{
		{
			name: "one pod each",
			pods: []corev1.Pod{
				disruptionTestPod("a-1", "a", corev1.PodRunning, nil, false),
				disruptionTestPod("b-1", "b", corev1.PodRunning, nil, false),
				disruptionTestPod("filler-1", "filler", corev1.PodRunning, nil, false),
			},
		},
		{
			name: "pods being deleted do not count",
			pods: []corev1.Pod{
				disruptionTestPod("a-1", "a", corev1.PodRunning, nil, false),
				disruptionTestPod("a-0", "a", corev1.PodRunning, nil, true),
				disruptionTestPod("filler-2", "filler", corev1.PodRunning, nil, true),
			},
		},
		{
			name: "a copy in flight beside its pod counts once",
			pods: []corev1.Pod{
				disruptionTestPod("a-1", "a", corev1.PodRunning, nil, false),
				disruptionTestPod("a-copy", "a", corev1.PodRunning, copyOf, false),
			},
			want: 1,
		},
		{
			name: "a copy still labelled after its pod went counts",
			pods: []corev1.Pod{disruptionTestPod("a-copy", "a", corev1.PodRunning, copyOf, false)},
			want: 1,
		},
		{
			name: "two pods beyond replicas and a copy of no Deployment of the scenario",
			pods: []corev1.Pod{
				disruptionTestPod("b-1", "b", corev1.PodRunning, nil, false),
				disruptionTestPod("b-2", "b", corev1.PodPending, nil, false),
				disruptionTestPod("b-3", "b", corev1.PodRunning, nil, false),
				disruptionTestPod("other-copy", "other", corev1.PodRunning, copyOf, false),
				disruptionTestPod("other", "other", corev1.PodRunning, nil, false),
			},
			want: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := extraPods(tc.pods, want); got != tc.want {
				t.Errorf("extraPods = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPoolDriftCountsTheDriftedNodeClaimsGone(t *testing.T) {
	drifted := map[string]string{"in-1": "opted-in", "in-2": "opted-in", "in-3": "opted-in", "base-1": "baseline"}
	deleting := metav1.Now()
	claims := []karpv1.NodeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "in-2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "base-1", DeletionTimestamp: &deleting}},
		{ObjectMeta: metav1.ObjectMeta{Name: "in-new"}},
	}
	got := []PoolDrift{poolDrift("opted-in", drifted, claims), poolDrift("baseline", drifted, claims)}
	want := []PoolDrift{{NodePool: "opted-in", Drifted: 3, Replaced: 2}, {NodePool: "baseline", Drifted: 1, Replaced: 0, Draining: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pool drift (-want +got):\n%s", diff)
	}
	if got[0].Kept() != 1 || got[1].Kept() != 1 {
		t.Errorf("kept %d and %d, want 1 and 1", got[0].Kept(), got[1].Kept())
	}
}

func TestDisruptionWaitingNamesWhatKeepsTheOptedInPoolFromConverging(t *testing.T) {
	node := func(name, pool string, unschedulable bool, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
			Spec:       corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints},
		}
	}
	claim := func(name string) karpv1.NodeClaim { return karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	drifted := map[string]string{"in-1": "opted-in", "in-2": "opted-in", "base-1": "baseline"}
	running := disruptionTestPod("a-1", "a", corev1.PodRunning, nil, false)
	for _, tc := range []struct {
		name   string
		pods   []corev1.Pod
		claims []karpv1.NodeClaim
		nodes  []corev1.Node
		want   string
	}{
		{
			name:   "converged although the baseline keeps its drifted, cordoned node",
			pods:   []corev1.Pod{running, disruptionTestPod("gone", "a", corev1.PodPending, nil, true)},
			claims: []karpv1.NodeClaim{claim("base-1"), claim("in-new")},
			nodes:  []corev1.Node{node("n-base", "baseline", false, karpv1.DisruptedNoScheduleTaint), node("n-new", "opted-in", false)},
		},
		{
			name: "everything still to do",
			pods: []corev1.Pod{
				running,
				disruptionTestPod("b-1", "b", corev1.PodPending, nil, false),
				disruptionTestPod("a-copy", "a", corev1.PodRunning, map[string]string{surge.ReplacesLabelKey: "uid"}, false),
			},
			claims: []karpv1.NodeClaim{claim("in-2"), claim("in-1"), claim("base-1")},
			nodes: []corev1.Node{
				node("n-2", "opted-in", false, karpv1.DisruptedNoScheduleTaint),
				node("n-1", "opted-in", true),
				node("n-3", "opted-in", false, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoSchedule}),
			},
			want: "2 drifted NodeClaims of NodePool opted-in to go (in-1, in-2), 1 pods pending, 1 pods labelled tailor.sh/replaces, 2 cordoned nodes of NodePool opted-in (n-1, n-2)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := disruptionWaiting("opted-in", drifted, tc.pods, tc.claims, tc.nodes); got != tc.want {
				t.Errorf("disruptionWaiting =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestDisruptionDeploymentsOptInHalfByTemplateAndNodePool(t *testing.T) {
	type summary struct {
		Name, Pool, OptIn  string
		Annotated, Service bool
		From, To           int
		MinAvailable       bool
	}
	var got []summary
	for _, d := range disruptionDeployments(5, 3) {
		got = append(got, summary{
			Name: d.name, Pool: d.pool, OptIn: d.optIn, Annotated: d.pod.Annotations[surge.AnnotationKey] == "true",
			Service: d.service, From: d.from, To: d.to, MinAvailable: d.minAvailable != nil && !d.unbudgeted,
		})
		if sel := d.pod.Spec.NodeSelector[karpv1.NodePoolLabelKey]; sel != d.pool {
			t.Errorf("%s selects NodePool %q, want %q", d.name, sel, d.pool)
		}
	}
	want := []summary{
		{Name: "template-00", Pool: "opted-in", OptIn: OptInTemplate, Annotated: true, Service: true, From: 1, To: 1, MinAvailable: true},
		{Name: "nodepool-01", Pool: "opted-in", OptIn: OptInNodePool, Service: true, From: 1, To: 1, MinAvailable: true},
		{Name: "baseline-02", Pool: "baseline", Service: true, From: 1, To: 1, MinAvailable: true},
		{Name: "baseline-03", Pool: "baseline", Service: true, From: 1, To: 1, MinAvailable: true},
		{Name: "baseline-04", Pool: "baseline", Service: true, From: 1, To: 1, MinAvailable: true},
		{Name: "filler-opted-in", Pool: "opted-in", From: 3, To: 1},
		{Name: "filler-baseline", Pool: "baseline", From: 3, To: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deployments (-want +got):\n%s", diff)
	}
}
