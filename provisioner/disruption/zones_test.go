package disruption

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
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
		c.zoneOf = zonesOf(c.Nodes)
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
			name: "pods that require their siblings' zone may also go where other siblings run",
			c:    cluster([3]int{2, 1, 0}, sameZone),
			want: map[string]string{"web-a0": "zone-a,zone-b", "web-a1": "zone-a,zone-b", "web-b0": "zone-b,zone-a"},
		},
		{
			name: "a spread that holds keeps pods that require their siblings' zone in their own",
			c: cluster([3]int{1, 1, 1}, func(p *corev1.Pod) {
				sameZone(p)
				spread(corev1.DoNotSchedule)(p)
			}),
			want: map[string]string{"web-a0": "zone-a", "web-b0": "zone-b", "web-c0": "zone-c"},
		},
		{
			name: "pods free of zones are not pinned",
			c:    cluster([3]int{3, 0, 1}, nil),
			want: map[string]string{},
		},
		{
			// Three more pods with the same labels in zone a, but in another namespace.
			name: "pods of another namespace do not count for a spread",
			c: func() Cluster {
				c := cluster([3]int{1, 2, 1}, spread(corev1.DoNotSchedule))
				for i := range 3 {
					c.Nodes[0].Pods = append(c.Nodes[0].Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: fmt.Sprintf("other-%d", i), Labels: web}})
				}
				return c
			}(),
			want: map[string]string{"web-a0": "zone-a", "web-b0": "zone-b", "web-b1": "zone-b", "web-c0": "zone-c"},
		},
		{
			// Zone c has no node the pods' selector accepts: it is no domain of the spread,
			// which holds between zones a and b.
			name: "zones with no node the pods' node affinity accepts do not count for a spread",
			c: func() Cluster {
				c := cluster([3]int{2, 1, 0}, func(p *corev1.Pod) {
					spread(corev1.DoNotSchedule)(p)
					p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
				})
				for _, n := range c.Nodes[:2] {
					n.Node.Labels["disk"] = "ssd"
				}
				return c
			}(),
			want: map[string]string{"web-a0": "zone-a", "web-a1": "zone-a", "web-b0": "zone-b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for key, pin := range zonePins(tt.c) {
				got[key.Name] = strings.Join(pin.zones(nil, tt.c.zoneOf), ",")
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
	c.zoneOf = zonesOf(c.Nodes)
	c.pins = map[types.NamespacedName]zonePin{{Namespace: pod.Namespace, Name: pod.Name}: {zone: "us-east-1a"}}
	plan, ok := simulate(c, c.Candidates[:1], nil)
	if !ok {
		t.Fatal("a's pod found no room")
	}
	if len(plan.Existing) != 0 || len(plan.NewNodeClaims) != 1 || plan.NewNodeClaims[0].Cheapest.Zone != "us-east-1a" {
		t.Errorf("a's pod went to %d existing nodes and %d new ones (%+v), want one new node in us-east-1a", len(plan.Existing), len(plan.NewNodeClaims), plan.NewNodeClaims)
	}
}

func TestZonePinZones(t *testing.T) {
	zoneOf := map[string]string{"a1": "zone-a", "b1": "zone-b", "b2": "zone-b", "c1": "zone-c"}
	tests := []struct {
		name string
		pin  zonePin
		away []string
		want []string
	}{
		{name: "a pod held in its zone", pin: zonePin{zone: "zone-a"}, want: []string{"zone-a"}},
		{
			name: "siblings in other zones stay",
			pin:  zonePin{zone: "zone-a", shared: [][]string{{"b1", "c1"}}},
			want: []string{"zone-a", "zone-b", "zone-c"},
		},
		{
			name: "a zone whose siblings all go with the decision is left out",
			pin:  zonePin{zone: "zone-a", shared: [][]string{{"b1", "b2", "c1"}}},
			away: []string{"b1", "b2"},
			want: []string{"zone-a", "zone-c"},
		},
		{
			name: "every requirement must be met in the zone",
			pin:  zonePin{zone: "zone-a", shared: [][]string{{"b1", "c1"}, {"b2"}}},
			want: []string{"zone-a", "zone-b"},
		},
		{
			name: "a requirement no other zone meets keeps the pod in its own",
			pin:  zonePin{zone: "zone-a", shared: [][]string{{"b1"}, nil}},
			want: []string{"zone-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			away := map[string]bool{}
			for _, n := range tt.away {
				away[n] = true
			}
			if diff := cmp.Diff(tt.want, tt.pin.zones(away, zoneOf)); diff != "" {
				t.Errorf("zones (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideMovesAZoneSharingPodToSiblingsInAnotherZone(t *testing.T) {
	c := decideCluster(
		node{name: "a", instanceType: "small.xlarge", capacityType: "on-demand", pods: []string{"1"}},
		node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"1"}},
	)
	// b, in another zone, runs a sibling of a's pod and has room for it; a's zone offers no
	// cheaper node than a.
	c.Nodes[1].Node.Labels[corev1.LabelTopologyZone] = "us-east-1b"
	web := map[string]string{"app": "web"}
	for _, n := range c.Nodes {
		for _, p := range n.Pods {
			p.Labels = web
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: web},
			}}}}
		}
	}
	got := summarize(Decide(c, func(string, karpv1.DisruptionReason) int { return 10 }, DefaultOptions))
	want := &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a"}, Targets: []string{"b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
}
