package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// TestOfferingPriceOfReservedNodesIsTheirReservations checks that a node in a capacity
// reservation is priced at its own reservation's offering.
func TestOfferingPriceOfReservedNodesIsTheirReservations(t *testing.T) {
	pool := &packing.NodePool{InstanceTypes: []*cloudprovider.InstanceType{{
		Name: "m5.large",
		Offerings: []cloudprovider.Offering{
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096},
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeReserved, ReservationID: "cr-1", Price: 0.0000001},
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeReserved, ReservationID: "cr-2", Price: 0.0000002},
		},
	}}}
	labels := func(capacityType, reservation string) map[string]string {
		l := map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "zone-a", karpv1.CapacityTypeLabelKey: capacityType}
		if reservation != "" {
			l[karpv1.CapacityReservationIDLabelKey] = reservation
		}
		return l
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{name: "on-demand", labels: labels(karpv1.CapacityTypeOnDemand, ""), want: 0.096},
		{name: "the first reservation", labels: labels(karpv1.CapacityTypeReserved, "cr-1"), want: 0.0000001},
		{name: "the second reservation", labels: labels(karpv1.CapacityTypeReserved, "cr-2"), want: 0.0000002},
		{name: "a reservation the class no longer selects", labels: labels(karpv1.CapacityTypeReserved, "cr-3"), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := offeringPrice(pool, tt.labels); got != tt.want {
				t.Errorf("offeringPrice() = %v, want %v", got, tt.want)
			}
		})
	}
}

// reservedCluster is decideCluster whose big.2xlarge has a reservation with left instances
// free, the nodes of capacity type reserved running in it.
func reservedCluster(left int, nodes ...node) Cluster {
	c := decideCluster(nodes...)
	for _, it := range c.NodePools[0].InstanceTypes {
		if it.Name == "big.2xlarge" {
			it.Offerings = append(it.Offerings, cloudprovider.Offering{
				Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved, ReservationID: "cr-1", ReservationType: "default",
				Price: it.Offerings[0].Price / 10_000_000, ReservedInstances: left, Available: left > 0,
			})
		}
	}
	for _, n := range c.Nodes {
		if n.Node.Labels[karpv1.CapacityTypeLabelKey] == karpv1.CapacityTypeReserved {
			n.Node.Labels[karpv1.CapacityReservationIDLabelKey] = "cr-1"
			n.Node.Labels[karpv1.CapacityReservationTypeLabelKey] = "default"
		}
	}
	for i := range c.Candidates {
		for _, n := range c.Nodes {
			if n.Node.Name == c.Candidates[i].Node {
				c.Candidates[i].Price = offeringPrice(&c.NodePools[0], n.Node.Labels)
			}
		}
	}
	return c
}

func TestDecideKeepsReservedNodes(t *testing.T) {
	all := func(string, karpv1.DisruptionReason) int { return 10 }
	tests := []struct {
		name  string
		left  int
		nodes []node
		want  *summary
	}{
		{
			name: "pods move onto the reserved node's room and the on-demand node goes",
			nodes: []node{{name: "reserved", instanceType: "big.2xlarge", capacityType: "reserved", pods: []string{"1"}},
				{name: "paid", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1"}}},
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"paid"}, Targets: []string{"reserved"}},
		},
		{
			name:  "an underused reserved node is not replaced by a smaller paid one",
			nodes: []node{{name: "reserved", instanceType: "big.2xlarge", capacityType: "reserved", pods: []string{"1"}}},
		},
		{
			name:  "a paid node is replaced by a node of the reservation while it has an instance",
			left:  1,
			nodes: []node{{name: "paid", instanceType: "large.4xlarge", capacityType: "on-demand", pods: []string{"3"}}},
			want:  &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"paid"}, Replacements: []string{"reserved big.2xlarge"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(Decide(reservedCluster(tt.left, tt.nodes...), all, DefaultOptions))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}
