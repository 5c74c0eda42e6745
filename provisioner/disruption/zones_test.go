package disruption

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

func TestZonePins(t *testing.T) {
	web := map[string]string{"app": "web"}
	spread := func(when corev1.UnsatisfiableConstraintAction) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchLabels: web},
			}}
		}
	}
	sameZone := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: web},
		}}}}
	}
	// cluster runs, per zone a, b and c (one node each), that many web pods, each changed by
	// the mutation.
	cluster := func(perZone [3]int, mutate func(*corev1.Pod)) Cluster {
		var c Cluster
		for z, count := range perZone {
			zone := fmt.Sprintf("zone-%c", 'a'+z)
			n := packing.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + zone, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}}
			for i := range count {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%c%d", 'a'+z, i), Labels: web}}
				if mutate != nil {
					mutate(p)
				}
				n.Pods = append(n.Pods, p)
			}
			c.Nodes = append(c.Nodes, n)
			c.Candidates = append(c.Candidates, Candidate{Node: n.Node.Name, Pods: n.Pods})
		}
		return c
	}

	tests := []struct {
		name string
		c    Cluster
		want map[string]string
	}{
		{
			name: "a spread that holds: every pod keeps its zone",
			c:    cluster([3]int{1, 2, 1}, spread(corev1.DoNotSchedule)),
			want: map[string]string{"web-a0": "zone-a", "web-b0": "zone-b", "web-b1": "zone-b", "web-c0": "zone-c"},
		},
		{
			// Zone a runs two more than b: a replacement goes to b while a pod of a is missing.
			name: "a spread a scale-down broke: the pods of the zone with too many may go where the scheduler sends them",
			c:    cluster([3]int{3, 1, 2}, spread(corev1.DoNotSchedule)),
			want: map[string]string{"web-b0": "zone-b", "web-c0": "zone-c", "web-c1": "zone-c"},
		},
		{
			name: "a spread that may be broken pins nothing",
			c:    cluster([3]int{3, 0, 1}, spread(corev1.ScheduleAnyway)),
			want: map[string]string{},
		},
		{
			name: "pods that require their siblings' zone keep it",
			c:    cluster([3]int{2, 0, 0}, sameZone),
			want: map[string]string{"web-a0": "zone-a", "web-a1": "zone-a"},
		},
		{
			name: "pods free of zones are not pinned",
			c:    cluster([3]int{3, 0, 1}, nil),
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for key, p := range zonePins(tt.c) {
				got[key.Name] = p
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pins (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSimulateKeepsPinnedPodsInTheirZone(t *testing.T) {
	c := decideCluster(
		node{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
		node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}},
	)
	// b is in another zone, where a's pod may not go.
	c.Nodes[1].Node.Labels[corev1.LabelTopologyZone] = "us-east-1b"
	pod := c.Candidates[0].Pods[0]
	c.pins = map[types.NamespacedName]string{{Namespace: pod.Namespace, Name: pod.Name}: "us-east-1a"}
	plan, ok := simulate(c, c.Candidates[:1], nil)
	if !ok {
		t.Fatal("a's pod found no room")
	}
	if len(plan.Existing) != 0 || len(plan.NewNodeClaims) != 1 || plan.NewNodeClaims[0].Cheapest.Zone != "us-east-1a" {
		t.Errorf("a's pod went to %d existing nodes and %d new ones (%+v), want one new node in us-east-1a", len(plan.Existing), len(plan.NewNodeClaims), plan.NewNodeClaims)
	}
}
