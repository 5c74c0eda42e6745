package aws

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/reservation"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// crTargeted is a targeted reservation of two m5.large in us-east-1a the launch tests add.
const crTargeted = "cr-00000000000000010"

// reservedHarness is a harness whose provider has ReservedCapacity on and whose class
// selects the reservations given by id: crTargeted, and with seed those of seedReservations
// (whose open one takes on-demand launches of m5.large in us-east-1a as EC2 does).
func reservedHarness(t *testing.T, seed bool, ids ...string) *harness {
	t.Helper()
	h := newHarnessWithClock(t, true)
	if seed {
		h.seedReservations(t)
	}
	if _, err := h.endpoint.AddCapacityReservation(localaws.CapacityReservationSpec{
		ID: crTargeted, InstanceType: "m5.large", Zone: "us-east-1a", Count: 2, InstanceMatchCriteria: "targeted",
	}); err != nil {
		t.Fatal(err)
	}
	class := h.defaultClass(t)
	for _, id := range ids {
		class.Spec.CapacityReservationSelectorTerms = append(class.Spec.CapacityReservationSelectorTerms, awsv1.CapacityReservationSelectorTerm{ID: id})
	}
	if err := h.kube.Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	h.reconfigure(t, func(o *Options) { o.ReservedCapacity = true })
	return h
}

// reservedOfferingsOf returns the reserved offerings of the type, without node costs.
func reservedOfferingsOf(t *testing.T, its []*cloudprovider.InstanceType, name string) []cloudprovider.Offering {
	t.Helper()
	var out []cloudprovider.Offering
	for _, it := range its {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == karpv1.CapacityTypeReserved {
				o.NodeCosts = cloudprovider.NodeCosts{}
				out = append(out, o)
			}
		}
	}
	return out
}

func onDemandPrice(t *testing.T, its []*cloudprovider.InstanceType, name, zone string) float64 {
	t.Helper()
	for _, it := range its {
		for _, o := range it.Offerings {
			if it.Name == name && o.Zone == zone && o.CapacityType == karpv1.CapacityTypeOnDemand {
				return o.Price
			}
		}
	}
	t.Fatalf("no on-demand offering of %s in %s", name, zone)
	return 0
}

func TestReservedOfferingsFollowTheReservations(t *testing.T) {
	planned := func(name, reservation string, launched bool) *karpv1.NodeClaim {
		nc := nodeClaim(name, []string{"m5.large"}, "reserved")
		nc.Labels[karpv1.CapacityReservationIDLabelKey] = reservation
		if launched {
			nc.Status.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
		}
		return nc
	}
	tests := []struct {
		name    string
		gateOff bool
		claims  []*karpv1.NodeClaim
		// want are the reserved offerings' reservation: instances left.
		want map[string]int
		// unavailable are the reservations whose offering is not available.
		unavailable []string
	}{
		{name: "each active reservation is an offering with its free instances", want: map[string]int{crOpen: 2, crBlock: 4, crTargeted: 2}},
		{name: "the gate off offers no reservation", gateOff: true, want: map[string]int{}},
		{
			name:   "NodeClaims planned into a reservation and not launched take its instances",
			claims: []*karpv1.NodeClaim{planned("a", crTargeted, false), planned("b", crBlock, false), planned("c", crBlock, true)},
			want:   map[string]int{crOpen: 2, crBlock: 3, crTargeted: 1},
		},
		{
			name:        "a reservation every instance of which is planned is not available",
			claims:      []*karpv1.NodeClaim{planned("a", crTargeted, false), planned("b", crTargeted, false), planned("c", crTargeted, false)},
			want:        map[string]int{crOpen: 2, crBlock: 4, crTargeted: 0},
			unavailable: []string{crTargeted},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := reservedHarness(t, true, crOpen, crBlock, crTargeted, crEnded)
			h.reconfigure(t, func(o *Options) { o.ReservedCapacity = !tt.gateOff })
			for _, nc := range tt.claims {
				if err := h.kube.Create(context.Background(), nc); err != nil {
					t.Fatal(err)
				}
			}
			its, err := h.provider.InstanceTypes(context.Background(), nodePool())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			var unavailable []string
			for _, o := range reservedOfferingsOf(t, its, "m5.large") {
				got[o.ReservationID] = o.ReservedInstances
				if !o.Available {
					unavailable = append(unavailable, o.ReservationID)
				}
				if want := onDemandPrice(t, its, "m5.large", o.Zone) / reservation.PriceDivisor; o.Price != want {
					t.Errorf("%s priced %g, want a ten-millionth of on-demand, %g", o.ReservationID, o.Price, want)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reserved offerings of m5.large, instances left (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.unavailable, unavailable, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("unavailable reservations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReservedOfferingsCarryTheReservationLabels(t *testing.T) {
	h := reservedHarness(t, true, crBlock)
	its, err := h.provider.InstanceTypes(context.Background(), nodePool())
	if err != nil {
		t.Fatal(err)
	}
	offerings := reservedOfferingsOf(t, its, "m5.large")
	if len(offerings) != 1 {
		t.Fatalf("got %d reserved offerings of m5.large, want the capacity block's", len(offerings))
	}
	var m5 *cloudprovider.InstanceType
	for _, it := range its {
		if it.Name == "m5.large" {
			m5 = it
		}
	}
	got := map[string]string{}
	for _, key := range []string{karpv1.CapacityTypeLabelKey, karpv1.CapacityReservationIDLabelKey, karpv1.CapacityReservationTypeLabelKey, "topology.kubernetes.io/zone"} {
		got[key], _ = m5.Label(offerings[0], key)
	}
	want := map[string]string{
		karpv1.CapacityTypeLabelKey: "reserved", karpv1.CapacityReservationIDLabelKey: crBlock,
		karpv1.CapacityReservationTypeLabelKey: "capacity-block", "topology.kubernetes.io/zone": "us-east-1b",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels of the reserved offering (-want +got):\n%s", diff)
	}
}

// launchedLabels are the labels of a launched NodeClaim that say where it runs.
func launchedLabels(nc *karpv1.NodeClaim) map[string]string {
	out := map[string]string{}
	for _, key := range []string{karpv1.CapacityTypeLabelKey, karpv1.CapacityReservationIDLabelKey, karpv1.CapacityReservationTypeLabelKey, "topology.kubernetes.io/zone"} {
		if v, ok := nc.Labels[key]; ok {
			out[key] = v
		}
	}
	return out
}

func reservationAvailable(t *testing.T, h *harness, id string) int {
	t.Helper()
	for _, r := range h.endpoint.CapacityReservations() {
		if r.ID == id {
			return r.Available
		}
	}
	t.Fatalf("no reservation %s", id)
	return 0
}

func TestCreateLaunchesIntoTheReservationUntilItIsFull(t *testing.T) {
	h := reservedHarness(t, false, crTargeted)
	ctx := context.Background()
	reserved := map[string]string{
		karpv1.CapacityTypeLabelKey: "reserved", karpv1.CapacityReservationIDLabelKey: crTargeted,
		karpv1.CapacityReservationTypeLabelKey: "default", "topology.kubernetes.io/zone": "us-east-1a",
	}
	for i, name := range []string{"a", "b", "c"} {
		nc := nodeClaim(name, []string{"m5.large"}, "reserved", "on-demand")
		launched, err := h.provider.Create(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		got := launchedLabels(launched)
		if i < 2 {
			if diff := cmp.Diff(reserved, got); diff != "" {
				t.Errorf("NodeClaim %s, within the reservation's two instances: labels (-want +got):\n%s", name, diff)
			}
			continue
		}
		// The provider counted the two launches: the third goes on-demand without trying.
		if got[karpv1.CapacityTypeLabelKey] != "on-demand" || got[karpv1.CapacityReservationIDLabelKey] != "" {
			t.Errorf("NodeClaim %s, past the reservation: labels %v, want on-demand outside it", name, got)
		}
	}
	if n := reservationAvailable(t, h, crTargeted); n != 0 {
		t.Errorf("the reservation has %d instances left, want 0", n)
	}
	if errs := h.endpoint.RequestCounts()["CreateFleet"]; errs != 3 {
		t.Errorf("%d CreateFleet calls, want 3: none is tried into the full reservation", errs)
	}
}

func TestCreateFallsBackWhenTheReservationFilledUp(t *testing.T) {
	h := reservedHarness(t, false, crTargeted)
	ctx := context.Background()
	// This provider described the reservation with both instances free; another launcher
	// takes them since.
	if _, err := h.provider.InstanceTypes(ctx, nodePool()); err != nil {
		t.Fatal(err)
	}
	other := h.newProvider(t, h.clock)
	for _, name := range []string{"x", "y"} {
		if _, err := other.Create(ctx, nodeClaim(name, []string{"m5.large"}, "reserved")); err != nil {
			t.Fatal(err)
		}
	}
	launched, err := h.provider.Create(ctx, nodeClaim("a", []string{"m5.large"}, "reserved", "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	if got := launchedLabels(launched); got[karpv1.CapacityTypeLabelKey] != "on-demand" || got[karpv1.CapacityReservationIDLabelKey] != "" {
		t.Errorf("labels %v, want on-demand after ReservationCapacityExceeded", got)
	}
	// The reservation is kept from planning like an offering out of capacity.
	its, err := h.provider.InstanceTypes(ctx, nodePool())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range reservedOfferingsOf(t, its, "m5.large") {
		if o.Available {
			t.Errorf("reserved offering %s is available after ReservationCapacityExceeded", o.ReservationID)
		}
	}
	// A NodeClaim that allows only the reservation gets a capacity error naming it.
	_, err = h.provider.Create(ctx, nodeClaim("b", []string{"m5.large"}, "reserved"))
	if !cloudprovider.IsInsufficientCapacityError(err) {
		t.Errorf("a reserved-only NodeClaim into a full reservation: %v, want an insufficient capacity error", err)
	}
}

func TestReservedLaunchTemplatesTargetTheReservation(t *testing.T) {
	h := reservedHarness(t, false, crTargeted)
	lc, err := h.provider.launchContext(context.Background(), nodePool().Spec.Template.Spec.NodeClassRef)
	if err != nil {
		t.Fatal(err)
	}
	nc := nodeClaim("a", []string{"m5.large"}, "reserved", "on-demand")
	nc.Labels[karpv1.CapacityReservationIDLabelKey] = crOpen
	tests := []struct {
		name       string
		offering   cloudprovider.Offering
		wantTarget string
		wantLabels map[string]string
	}{
		{
			name:       "reserved targets its reservation and labels the node with it",
			offering:   cloudprovider.Offering{CapacityType: "reserved", ReservationID: crTargeted, ReservationType: "default"},
			wantTarget: crTargeted,
			wantLabels: map[string]string{karpv1.CapacityTypeLabelKey: "reserved", karpv1.CapacityReservationIDLabelKey: crTargeted, karpv1.CapacityReservationTypeLabelKey: "default"},
		},
		{
			name:       "on-demand targets nothing and drops the planned reservation's label",
			offering:   cloudprovider.Offering{CapacityType: "on-demand"},
			wantLabels: map[string]string{karpv1.CapacityTypeLabelKey: "on-demand"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, spec, err := h.provider.launcher.Template(nc, lc.Context, amd64Type(t, lc.types), tt.offering)
			if err != nil {
				t.Fatal(err)
			}
			var target string
			if s := spec.Data().CapacityReservationSpecification; s != nil && s.CapacityReservationTarget != nil {
				target = *s.CapacityReservationTarget.CapacityReservationId
			}
			if target != tt.wantTarget {
				t.Errorf("launch template targets %q, want %q", target, tt.wantTarget)
			}
			for key, want := range tt.wantLabels {
				if !containsLabel(spec.UserData, key+"="+want) {
					t.Errorf("user data lacks node label %s=%s", key, want)
				}
			}
			if tt.wantLabels[karpv1.CapacityReservationIDLabelKey] == "" && containsLabel(spec.UserData, karpv1.CapacityReservationIDLabelKey) {
				t.Errorf("user data labels the node with a reservation it is not launched into")
			}
		})
	}
}

// containsLabel reports whether the base64 user data has the text, such as key=value of a
// node label.
func containsLabel(userData, text string) bool {
	raw, err := base64.StdEncoding.DecodeString(userData)
	return err == nil && strings.Contains(string(raw), text)
}

func TestInstancesInAReservationAreReserved(t *testing.T) {
	tests := []struct {
		name    string
		gateOff bool
		want    map[string]string
	}{
		{
			name: "an on-demand launch an open reservation absorbs is reserved",
			want: map[string]string{karpv1.CapacityTypeLabelKey: "reserved", karpv1.CapacityReservationIDLabelKey: crOpen, karpv1.CapacityReservationTypeLabelKey: "default", "topology.kubernetes.io/zone": "us-east-1a"},
		},
		{name: "with the gate off it stays on-demand", gateOff: true, want: map[string]string{karpv1.CapacityTypeLabelKey: "on-demand", "topology.kubernetes.io/zone": "us-east-1a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := reservedHarness(t, true, crOpen)
			h.reconfigure(t, func(o *Options) { o.ReservedCapacity = !tt.gateOff })
			// The class's status lists the reservation, as the status controller writes it.
			class := h.defaultClass(t)
			status, err := h.provider.ResolveNodeClass(context.Background(), class)
			if err != nil {
				t.Fatal(err)
			}
			class.Status = status
			if err := h.kube.Update(context.Background(), class); err != nil {
				t.Fatal(err)
			}
			nc := nodeClaim("a", []string{"m5.large"}, "on-demand")
			nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: "topology.kubernetes.io/zone", Operator: "In", Values: []string{"us-east-1a"}})
			launched, err := h.provider.Create(context.Background(), nc)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, launchedLabels(launched)); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

// amd64Type is an amd64 instance type among types.
func amd64Type(t *testing.T, types []*cloudprovider.InstanceType) *cloudprovider.InstanceType {
	t.Helper()
	for _, it := range types {
		if it.Labels[corev1.LabelArchStable] == "amd64" {
			return it
		}
	}
	t.Fatal("no amd64 instance type")
	return nil
}
