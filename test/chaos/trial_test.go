package chaos

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

func TestCheckEvictions(t *testing.T) {
	start := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	plan := Plan{Seed: 7, Phase: PhaseScaleDown, Deployments: []Deployment{
		{Name: "web", Replicas: 4, Keep: 2}, {Name: "api", Replicas: 3, Keep: 3}, {Name: "solo", Replicas: 1, Keep: 1, ReplaceBeforeEvict: true},
	}}
	tests := []struct {
		name             string
		killed           []string
		evicted, deleted []eviction
		copies           []eviction
		want             []string
	}{{
		name:    "the scale-down deletes what it drops",
		deleted: []eviction{{pod: "web-1", deployment: "web", node: "n1"}, {pod: "web-2", deployment: "web", node: "n1"}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		name:    "a deletion beyond the scale-down bypassed the budgets",
		deleted: []eviction{{pod: "api-1", deployment: "api", node: "n1"}},
		want:    []string{InvEvictedOnce},
	}, {
		name:    "pods go with the node a fault took",
		killed:  []string{"n1"},
		deleted: []eviction{{pod: "api-1", deployment: "api", node: "n1"}, {pod: "api-2", deployment: "api", node: "n1"}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		// Seed 4000: the pod replaced one lost with a reclaimed spot node; consolidation had
		// moved no pod of its Deployment, so evicting it is its first move.
		name:    "a replacement of a pod a fault took is not a moved pod",
		killed:  []string{"n1"},
		deleted: []eviction{{pod: "api-1", deployment: "api", node: "n1"}},
		evicted: []eviction{{pod: "api-4", deployment: "api", node: "n2", created: at(7 * time.Second), at: at(15 * time.Second)}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		// Seed 4000 again: the node of a reclaimed instance was drained before it went.
		name:   "the drain of a node a fault took is no consolidation",
		killed: []string{"n1"},
		evicted: []eviction{
			{pod: "api-1", deployment: "api", node: "n1", created: at(-time.Minute), at: at(6 * time.Second)},
			{pod: "api-4", deployment: "api", node: "n2", created: at(7 * time.Second), at: at(20 * time.Second)},
		},
		want: []string{InvPDB, InvEvictedOnce},
	}, {
		name: "a pod created after consolidation moved its sibling may not move within the hold",
		evicted: []eviction{
			{pod: "api-1", deployment: "api", node: "n1", created: at(-time.Minute), at: at(3 * time.Second)},
			{pod: "api-4", deployment: "api", node: "n2", created: at(4 * time.Second), at: at(20 * time.Second)},
		},
		want: []string{InvPDB},
	}, {
		name: "past the hold it may",
		evicted: []eviction{
			{pod: "api-1", deployment: "api", node: "n1", created: at(-time.Minute), at: at(3 * time.Second)},
			{pod: "api-4", deployment: "api", node: "n2", created: at(4 * time.Second), at: at(4*time.Second + MovedPodsHold)},
		},
		want: []string{InvPDB, InvEvictedOnce},
	}, {
		name:    "a copy deleted before it was handed over was no replica",
		copies:  []eviction{{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(3 * time.Second), copy: true}},
		deleted: []eviction{{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(40 * time.Second), copy: true}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		name:    "a pod replaced before its eviction goes once its copy serves",
		copies:  []eviction{{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(3 * time.Second), copy: true}},
		deleted: []eviction{{pod: "solo-1", deployment: "solo", node: "n1", created: at(-time.Minute), at: at(6 * time.Second), replaced: true, servedBy: "solo-c1"}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		name:    "a pod handed over while no other pod of its Deployment was Ready bypassed its budget",
		deleted: []eviction{{pod: "solo-1", deployment: "solo", node: "n1", created: at(-time.Minute), at: at(6 * time.Second), replaced: true}},
		want:    []string{InvEvictedOnce},
	}, {
		name: "a copy that took a moved pod's place may not be replaced within the hold",
		copies: []eviction{
			{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(3 * time.Second), copy: true},
			{pod: "solo-c2", deployment: "solo", node: "n3", created: at(15 * time.Second), at: at(15 * time.Second), copy: true},
		},
		deleted: []eviction{
			{pod: "solo-1", deployment: "solo", node: "n1", created: at(-time.Minute), at: at(6 * time.Second), replaced: true, servedBy: "solo-c1"},
			{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(18 * time.Second), replaced: true, servedBy: "solo-c2"},
		},
		want: []string{InvPDB},
	}, {
		name: "nor evicted",
		copies: []eviction{
			{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(3 * time.Second), copy: true},
		},
		deleted: []eviction{{pod: "solo-1", deployment: "solo", node: "n1", created: at(-time.Minute), at: at(6 * time.Second), replaced: true, servedBy: "solo-c1"}},
		evicted: []eviction{{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(20 * time.Second)}},
		want:    []string{InvPDB},
	}, {
		name: "past the hold it may be replaced again",
		copies: []eviction{
			{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(3 * time.Second), copy: true},
			{pod: "solo-c2", deployment: "solo", node: "n3", created: at(3*time.Second + MovedPodsHold), at: at(3*time.Second + MovedPodsHold), copy: true},
		},
		deleted: []eviction{
			{pod: "solo-1", deployment: "solo", node: "n1", created: at(-time.Minute), at: at(6 * time.Second), replaced: true, servedBy: "solo-c1"},
			{pod: "solo-c1", deployment: "solo", node: "n2", created: at(3 * time.Second), at: at(5*time.Second + MovedPodsHold), replaced: true, servedBy: "solo-c2"},
		},
		want: []string{InvPDB, InvEvictedOnce},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{inject: newInjector(&localstack.Stack{}, nil, "")}
			for _, n := range tt.killed {
				r.inject.killedNodes[n] = true
			}
			res := &TrialResult{}
			r.checkEvictions(plan, start, history{evicted: tt.evicted, deleted: tt.deleted, copies: tt.copies}, res)
			if diff := cmp.Diff(tt.want, res.Held); diff != "" {
				t.Errorf("invariants held (-want +got):\n%s\nbreaches: %+v", diff, res.Breaches)
			}
		})
	}
}

func TestCopiesLeft(t *testing.T) {
	copyOf := func(name, node string, ready bool) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
				Labels:      map[string]string{DeploymentLabel: "solo", surge.ReplacesLabelKey: "uid-1"},
				Annotations: map[string]string{surge.ReplacesAnnotationKey: "solo-1", surge.DeadlineAnnotationKey: "2026-11-28T04:00:30Z"}},
			Spec: corev1.PodSpec{NodeName: node},
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	gone := copyOf("solo-c3", "n1", true)
	gone.DeletionTimestamp = &metav1.Time{}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "solo-1", Labels: map[string]string{DeploymentLabel: "solo"}}},
		copyOf("solo-c2", "", false), copyOf("solo-c1", "n2", true), gone,
	}
	want := []string{
		"solo-c1 (Ready on n2) replacing pod solo-1, due Ready by 2026-11-28T04:00:30Z",
		"solo-c2 (not Ready on no node) replacing pod solo-1, due Ready by 2026-11-28T04:00:30Z",
	}
	if diff := cmp.Diff(want, copiesLeft(pods)); diff != "" {
		t.Errorf("copies left (-want +got):\n%s", diff)
	}
}

func TestExtraReplicas(t *testing.T) {
	deployment := func(name string, replicas int32) appsv1.Deployment {
		return appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{DeploymentLabel: name}}},
		}
	}
	pod := func(name, deployment string, change func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{DeploymentLabel: deployment}}}
		if change != nil {
			change(&p)
		}
		return p
	}
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	tests := []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"as many pods as replicas", []corev1.Pod{pod("web-1", "web", nil), pod("web-2", "web", nil), pod("solo-1", "solo", nil)}, nil},
		{"a copy left beside the pod it replaces", []corev1.Pod{
			pod("web-1", "web", nil), pod("solo-1", "solo", nil),
			pod("solo-c1", "solo", func(p *corev1.Pod) { p.Labels[surge.ReplacesLabelKey] = "uid-1" }),
		}, []string{"solo runs 2 pods for 1 replicas: [solo-1 solo-c1]"}},
		{"pods being deleted or finished do not run", []corev1.Pod{
			pod("web-1", "web", nil), pod("web-2", "web", deleting), pod("web-3", "web", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			pod("solo-1", "solo", deleting), pod("solo-c1", "solo", nil),
		}, nil},
		{"pods of another namespace are not the Deployment's", []corev1.Pod{
			pod("solo-1", "solo", nil), pod("solo-2", "solo", func(p *corev1.Pod) { p.Namespace = "other" }),
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extraReplicas([]appsv1.Deployment{deployment("web", 2), deployment("solo", 1)}, tt.pods)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("extra replicas (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCordonedNodes(t *testing.T) {
	claim := func(name, node string, deleting bool) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{NodeName: node}}
		if deleting {
			nc.DeletionTimestamp = &metav1.Time{}
		}
		return nc
	}
	node := func(name string, tainted bool, cordonedAt string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if tainted {
			n.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
		}
		if cordonedAt != "" {
			n.Annotations = map[string]string{disruption.CordonedAnnotationKey: cordonedAt}
		}
		return n
	}
	tests := []struct {
		name  string
		nodes []corev1.Node
		want  []string
	}{
		{"no node cordoned", []corev1.Node{node("n1", false, ""), node("system", false, "")}, nil},
		{"a node a lost decision cordoned", []corev1.Node{node("n1", true, "2026-11-28T04:00:00Z")},
			[]string{"n1 (NodeClaim c1) tainted karpenter.sh/disrupted:NoSchedule, cordoned at 2026-11-28T04:00:00Z"}},
		{"the taint alone", []corev1.Node{node("n1", true, "")}, []string{"n1 (NodeClaim c1) tainted karpenter.sh/disrupted:NoSchedule"}},
		{"the mark alone", []corev1.Node{node("n1", false, "2026-11-28T04:00:00Z")}, []string{"n1 (NodeClaim c1) cordoned at 2026-11-28T04:00:00Z"}},
		{"a node whose NodeClaim is being deleted goes anyway", []corev1.Node{node("n2", true, "2026-11-28T04:00:00Z")}, nil},
		{"a node of no NodeClaim is left to other invariants", []corev1.Node{node("n3", true, "")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cordonedNodes(tt.nodes, []karpv1.NodeClaim{claim("c1", "n1", false), claim("c2", "n2", true), claim("c3", "", false)})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cordoned nodes (-want +got):\n%s", diff)
			}
		})
	}
}
