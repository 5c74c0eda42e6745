package packing

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// reservedCatalog is catalog() with a capacity reservation of left medium instances in
// zone-b, priced next to nothing as the AWS provider prices reservations.
func reservedCatalog(left int) []*cloudprovider.InstanceType {
	types := catalog()
	medium := types[1]
	medium.Offerings = append(medium.Offerings, cloudprovider.Offering{
		Zone: "zone-b", ZoneID: "zone-b-id", CapacityType: karpv1.CapacityTypeReserved,
		ReservationID: "cr-1", ReservationType: "default", Price: 0.20 / 10_000_000,
		ReservedInstances: left, Available: left > 0,
	})
	return types
}

func allowing(capacityTypes ...string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = capacityTypes }
}

// reservedSummary counts a plan's new NodeClaims by the capacity type and reservation they
// expect, and its unschedulable pods; ReservedMayLaunch are the capacity types the
// requirements of the NodeClaims planned into the reservation allow, what their launch
// falls back to when the reservation is full.
type reservedSummary struct {
	ByOffering        map[string]int
	Unschedulable     int
	ReservedMayLaunch []string
}

func summarizeReserved(p Plan) reservedSummary {
	s := reservedSummary{ByOffering: map[string]int{}, Unschedulable: len(p.Unschedulable)}
	for _, c := range p.NewNodeClaims {
		key := c.Cheapest.CapacityType
		if c.Cheapest.ReservationID != "" {
			key += " " + c.Cheapest.ReservationID + " " + c.Cheapest.ReservationType + " " + c.Cheapest.InstanceType + " " + c.Cheapest.Zone
		}
		s.ByOffering[key]++
		if c.Cheapest.ReservationID == "" {
			continue
		}
		// The last capacity type requirement is the plan's, within the NodePool's.
		for _, r := range c.Requirements {
			if r.Key == karpv1.CapacityTypeLabelKey {
				s.ReservedMayLaunch = r.Values
			}
		}
	}
	return s
}

func TestSolveReservedCapacity(t *testing.T) {
	// Each pod needs a node of its own: three CPUs and a hostname anti-affinity.
	apart := func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "apart"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "apart"}},
			}},
		}}
	}
	inReservation := func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{karpv1.CapacityReservationIDLabelKey: "cr-1"}
	}
	reserved := "reserved cr-1 default medium zone-b"
	tests := []struct {
		name  string
		input Input
		want  reservedSummary
	}{
		{
			name: "reserved wins while the reservation has instances, on-demand takes the rest",
			input: Input{
				Pods:      pods("web", 5, "3", "1Gi", apart),
				NodePools: []NodePool{{NodePool: nodePool("general", allowing("reserved", "on-demand")), InstanceTypes: reservedCatalog(2)}},
			},
			want: reservedSummary{ByOffering: map[string]int{reserved: 2, "on-demand": 3}, ReservedMayLaunch: []string{"on-demand", "reserved"}},
		},
		{
			name: "a NodePool that does not allow reserved does not use it",
			input: Input{
				Pods:      pods("web", 2, "3", "1Gi", apart),
				NodePools: []NodePool{{NodePool: nodePool("general", allowing("on-demand")), InstanceTypes: reservedCatalog(2)}},
			},
			want: reservedSummary{ByOffering: map[string]int{"on-demand": 2}},
		},
		{
			name: "a reservation with nothing left is not planned",
			input: Input{
				Pods:      pods("web", 2, "3", "1Gi", apart),
				NodePools: []NodePool{{NodePool: nodePool("general", allowing("reserved", "on-demand")), InstanceTypes: reservedCatalog(0)}},
			},
			want: reservedSummary{ByOffering: map[string]int{"on-demand": 2}},
		},
		{
			name: "NodePools sharing a reservation share its instances",
			input: Input{
				Pods: pods("web", 4, "3", "1Gi", apart),
				NodePools: []NodePool{
					{NodePool: nodePool("a", allowing("reserved", "on-demand")), InstanceTypes: reservedCatalog(3)},
					{NodePool: nodePool("b", allowing("reserved", "on-demand")), InstanceTypes: reservedCatalog(3)},
				},
			},
			want: reservedSummary{ByOffering: map[string]int{reserved: 3, "on-demand": 1}, ReservedMayLaunch: []string{"on-demand", "reserved"}},
		},
		{
			name: "pods that select the reservation wait for its instances",
			input: Input{
				Pods:      pods("web", 3, "3", "1Gi", apart, inReservation),
				NodePools: []NodePool{{NodePool: nodePool("general", allowing("reserved", "on-demand")), InstanceTypes: reservedCatalog(2)}},
			},
			want: reservedSummary{ByOffering: map[string]int{reserved: 2}, Unschedulable: 1, ReservedMayLaunch: []string{"reserved"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarizeReserved(Solve(tt.input))); diff != "" {
				t.Errorf("Solve() by offering (-want +got):\n%s", diff)
			}
		})
	}
}
