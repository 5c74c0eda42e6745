package aws

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// The local endpoint maps us-east-1a..d to use1-az1..4, as DescribeAvailabilityZones and
// DescribeSubnets say.
func TestZoneIDs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()

	its, err := h.provider.InstanceTypes(ctx, nodePool())
	require.NoError(t, err)
	offered := map[string]string{}
	for _, it := range its {
		if it.Name != "m5.large" {
			continue
		}
		for _, o := range it.Offerings {
			offered[o.Zone] = o.ZoneID
			got, ok := it.Label(o, karpv1.ZoneIDLabelKey)
			require.True(t, ok, "offering %+v has no zone-id label", o)
			require.Equal(t, o.ZoneID, got)
		}
	}
	want := map[string]string{"us-east-1a": "use1-az1", "us-east-1b": "use1-az2", "us-east-1c": "use1-az3", "us-east-1d": "use1-az4"}
	for zone := range want {
		if _, ok := offered[zone]; !ok {
			delete(want, zone)
		}
	}
	require.NotEmpty(t, want, "m5.large is offered in no zone of the local endpoint")
	if diff := cmp.Diff(want, offered); diff != "" {
		t.Errorf("zone IDs of m5.large's offerings (-want +got):\n%s", diff)
	}

	tests := []struct {
		name     string
		zoneIDs  []string
		wantZone string
	}{
		{name: "a requirement on the zone ID picks the zone", zoneIDs: []string{"use1-az2"}, wantZone: "us-east-1b"},
		{name: "another zone ID", zoneIDs: []string{"use1-az4"}, wantZone: "us-east-1d"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := nodeClaim(string(rune('a'+i)), []string{"m5.large"}, karpv1.CapacityTypeOnDemand)
			nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.ZoneIDLabelKey, Operator: corev1.NodeSelectorOpIn, Values: tt.zoneIDs})
			launched, err := h.provider.Create(ctx, nc)
			require.NoError(t, err)
			got := map[string]string{"zone": launched.Labels[corev1.LabelTopologyZone], "zoneID": launched.Labels[karpv1.ZoneIDLabelKey]}
			if diff := cmp.Diff(map[string]string{"zone": tt.wantZone, "zoneID": tt.zoneIDs[0]}, got); diff != "" {
				t.Errorf("launched (-want +got):\n%s", diff)
			}
			listed, err := h.provider.Get(ctx, launched.Status.ProviderID)
			require.NoError(t, err)
			require.Equal(t, tt.zoneIDs[0], listed.Labels[karpv1.ZoneIDLabelKey], "Get's view of the instance")
		})
	}
}
