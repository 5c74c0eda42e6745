package cloudprovider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// reservedOffering has every label an offering can have.
var reservedOffering = Offering{
	Zone: "us-east-1a", ZoneID: "use1-az1", CapacityType: karpv1.CapacityTypeReserved,
	ReservationID: "cr-1", ReservationType: "default",
}

func TestLabelOfAnInstanceTypesOffering(t *testing.T) {
	typ := &InstanceType{Name: "m5.large", Labels: map[string]string{
		corev1.LabelInstanceTypeStable: "from-labels", corev1.LabelArchStable: "amd64",
		corev1.LabelTopologyZone: "from-labels", karpv1.ZoneIDLabelKey: "from-labels",
	}}
	spot := Offering{Zone: "us-east-1b", CapacityType: karpv1.CapacityTypeSpot}
	type label struct {
		Value string
		OK    bool
	}
	tests := []struct {
		name     string
		offering Offering
		key      string
		want     label
	}{
		{name: "the instance type is the type's name", offering: spot, key: corev1.LabelInstanceTypeStable, want: label{"m5.large", true}},
		{name: "the zone is the offering's", offering: spot, key: corev1.LabelTopologyZone, want: label{"us-east-1b", true}},
		{name: "the capacity type is the offering's", offering: spot, key: karpv1.CapacityTypeLabelKey, want: label{karpv1.CapacityTypeSpot, true}},
		{name: "an unknown zone ID is absent, not the type's", offering: spot, key: karpv1.ZoneIDLabelKey, want: label{}},
		{name: "a known zone ID is the offering's", offering: reservedOffering, key: karpv1.ZoneIDLabelKey, want: label{"use1-az1", true}},
		{name: "a reservation ID is the reserved offering's", offering: reservedOffering, key: karpv1.CapacityReservationIDLabelKey, want: label{"cr-1", true}},
		{name: "a reservation type is the reserved offering's", offering: reservedOffering, key: karpv1.CapacityReservationTypeLabelKey, want: label{"default", true}},
		{name: "an offering without a reservation has none", offering: spot, key: karpv1.CapacityReservationIDLabelKey, want: label{}},
		{name: "another key is the type's label", offering: spot, key: corev1.LabelArchStable, want: label{"amd64", true}},
		{name: "a key the type has not is absent", offering: spot, key: corev1.LabelOSStable, want: label{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got label
			got.Value, got.OK = typ.Label(tt.offering, tt.key)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Label(%q) (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}

// TestOfferingLabelsAreTheKeysLabelAnswers: IsOfferingLabel and AddLabels name exactly the
// well-known keys whose values Label takes from the offering.
func TestOfferingLabelsAreTheKeysLabelAnswers(t *testing.T) {
	const fromOthers = "others"
	for key := range karpv1.WellKnownLabels {
		v, _ := reservedOffering.Label(key, map[string]string{key: fromOthers})
		if fromOffering := v != fromOthers; IsOfferingLabel(key) != fromOffering {
			t.Errorf("IsOfferingLabel(%q) = %t, but Label takes it from the offering: %t", key, IsOfferingLabel(key), fromOffering)
		}
	}
	got := map[string]string{corev1.LabelArchStable: "amd64"}
	reservedOffering.AddLabels(got)
	want := map[string]string{
		corev1.LabelArchStable: "amd64", corev1.LabelTopologyZone: "us-east-1a", karpv1.ZoneIDLabelKey: "use1-az1",
		karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved, karpv1.CapacityReservationIDLabelKey: "cr-1",
		karpv1.CapacityReservationTypeLabelKey: "default",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AddLabels (-want +got):\n%s", diff)
	}
}

// TestOfferingLabelAllocatesNothing: the planner asks for labels of every offering in its
// inner loops.
func TestOfferingLabelAllocatesNothing(t *testing.T) {
	others := map[string]string{corev1.LabelArchStable: "amd64"}
	allocs := testing.AllocsPerRun(100, func() {
		for _, key := range []string{corev1.LabelTopologyZone, karpv1.CapacityReservationTypeLabelKey, corev1.LabelArchStable, corev1.LabelOSStable} {
			_, _ = reservedOffering.Label(key, others)
		}
	})
	if allocs != 0 {
		t.Errorf("Label allocates %v times a run, want 0", allocs)
	}
}
