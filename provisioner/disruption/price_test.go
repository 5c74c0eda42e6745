package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// TestOfferingPriceIsTheWholeNode checks that consolidation (its savings and the spot-to-spot
// threshold) weighs a node at its instance price plus its node costs.
func TestOfferingPriceIsTheWholeNode(t *testing.T) {
	pool := &packing.NodePool{InstanceTypes: []*cloudprovider.InstanceType{{
		Name: "m5.large",
		Offerings: []cloudprovider.Offering{
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04, NodeCosts: cloudprovider.NodeCosts{Volumes: 0.002, PublicIPv4: 0.005}},
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: cloudprovider.NodeCosts{Volumes: 0.002}},
		},
	}}}
	labels := func(zone, capacityType string) map[string]string {
		return map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: zone, karpv1.CapacityTypeLabelKey: capacityType}
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{name: "spot with a public address", labels: labels("zone-a", karpv1.CapacityTypeSpot), want: 0.047},
		{name: "on-demand", labels: labels("zone-a", karpv1.CapacityTypeOnDemand), want: 0.098},
		{name: "unknown offering", labels: labels("zone-b", karpv1.CapacityTypeSpot), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := offeringPrice(pool, tt.labels); got < tt.want-1e-12 || got > tt.want+1e-12 {
				t.Errorf("offeringPrice() = %v, want %v", got, tt.want)
			}
		})
	}
}
