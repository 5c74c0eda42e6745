package aws

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// Reservations the tests add to the endpoint.
const (
	crOpen   = "cr-0000000000000000a"
	crShared = "cr-0000000000000000b"
	crBlock  = "cr-0000000000000000c"
	crEnded  = "cr-0000000000000000d"
)

// seedReservations adds an open reservation tagged for the team, one shared from another
// account with the same tag, a capacity block ending in an hour and one that has ended.
func (h *harness) seedReservations(t *testing.T) {
	t.Helper()
	now := h.clock.Now()
	for _, spec := range []localaws.CapacityReservationSpec{
		{ID: crOpen, InstanceType: "m5.large", Zone: "us-east-1a", Count: 2, Tags: map[string]string{"team": "ml"}},
		{ID: crShared, OwnerID: "210987654321", InstanceType: "m5.xlarge", Zone: "us-east-1b", Count: 1, InstanceMatchCriteria: "targeted", Tags: map[string]string{"team": "ml"}},
		{ID: crBlock, InstanceType: "m5.large", Zone: "us-east-1b", Count: 4, InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", End: now.Add(time.Hour)},
		{ID: crEnded, InstanceType: "m5.large", Zone: "us-east-1a", Count: 1, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour), Tags: map[string]string{"team": "ml"}},
	} {
		if _, err := h.endpoint.AddCapacityReservation(spec); err != nil {
			t.Fatal(err)
		}
	}
}

// defaultClass reads the harness's class.
func (h *harness) defaultClass(t *testing.T) *awsv1.EC2NodeClass {
	t.Helper()
	class := &awsv1.EC2NodeClass{}
	if err := h.kube.Get(context.Background(), client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	return class
}

func TestCapacityReservationsResolveIntoStatus(t *testing.T) {
	h := newHarnessWithClock(t, true)
	h.seedReservations(t)
	blockEnd := metav1.NewTime(h.clock.Now().Add(time.Hour))
	var (
		open   = awsv1.CapacityReservation{ID: crOpen, InstanceType: "m5.large", AvailabilityZone: "us-east-1a", OwnerID: "123456789012", InstanceMatchCriteria: "open", ReservationType: "default", State: "active"}
		shared = awsv1.CapacityReservation{ID: crShared, InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1b", OwnerID: "210987654321", InstanceMatchCriteria: "targeted", ReservationType: "default", State: "active"}
		block  = awsv1.CapacityReservation{ID: crBlock, InstanceType: "m5.large", AvailabilityZone: "us-east-1b", OwnerID: "123456789012", InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", EndTime: &blockEnd, State: "active"}
	)
	resolved := metav1.Condition{Type: awsv1.ConditionTypeCapacityReservationsReady, Status: metav1.ConditionTrue, Reason: ReasonCapacityReservationsResolved}
	tests := []struct {
		name          string
		terms         []awsv1.CapacityReservationSelectorTerm
		want          []awsv1.CapacityReservation
		wantCondition metav1.Condition
	}{
		{name: "no terms select nothing", wantCondition: resolved},
		{
			name:  "tags select the active reservations of every owner, not the ended one",
			terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}},
			want:  []awsv1.CapacityReservation{open, shared}, wantCondition: resolved,
		},
		{
			name:  "an owner narrows tags to that account's reservations",
			terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "*"}, OwnerID: "210987654321"}},
			want:  []awsv1.CapacityReservation{shared}, wantCondition: resolved,
		},
		{
			name:  "terms are ORed and a reservation is listed once",
			terms: []awsv1.CapacityReservationSelectorTerm{{ID: crBlock}, {ID: crOpen}, {Tags: map[string]string{"team": "ml"}}},
			want:  []awsv1.CapacityReservation{open, shared, block}, wantCondition: resolved,
		},
		{
			name:  "terms that match nothing are reported, and the others still resolve",
			terms: []awsv1.CapacityReservationSelectorTerm{{ID: crOpen}, {ID: "cr-0123456789abcdef0"}, {ID: crEnded}, {Tags: map[string]string{"team": "ml"}, OwnerID: "999999999999"}},
			want:  []awsv1.CapacityReservation{open},
			wantCondition: metav1.Condition{
				Type: awsv1.ConditionTypeCapacityReservationsReady, Status: metav1.ConditionFalse, Reason: ReasonCapacityReservationsUnmatched,
				Message: "capacityReservationSelectorTerms[1], capacityReservationSelectorTerms[2], capacityReservationSelectorTerms[3] matched no active capacity reservation: " +
					"check the id, tags and ownerID (a reservation shared from another account needs its ownerID), or remove the term; the class launches without them",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := h.defaultClass(t)
			class.Spec.CapacityReservationSelectorTerms = tt.terms
			status, err := h.provider.ResolveNodeClass(context.Background(), class)
			if err != nil {
				t.Fatalf("a class is ready whatever its capacity reservation terms match: %v", err)
			}
			if diff := cmp.Diff(tt.want, status.CapacityReservations, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("status.capacityReservations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]metav1.Condition{tt.wantCondition}, status.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapacityBlocksExpireFortyMinutesBeforeTheirEnd(t *testing.T) {
	h := newHarnessWithClock(t, true)
	h.seedReservations(t)
	class := h.defaultClass(t)
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: crBlock}}
	tests := []struct {
		after time.Duration
		want  []string
	}{
		{after: 0, want: []string{"active"}},
		{after: 19*time.Minute + 59*time.Second, want: []string{"active"}},
		{after: 20 * time.Minute, want: []string{"expiring"}},
		{after: time.Hour, want: nil},
	}
	start := h.clock.Now()
	for _, tt := range tests {
		h.clock.SetTime(start.Add(tt.after))
		status, err := h.provider.ResolveNodeClass(context.Background(), class)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range status.CapacityReservations {
			got = append(got, r.State)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s into the last hour of the block: states (-want +got):\n%s", tt.after, diff)
		}
	}
}

func TestCapacityReservationsAreResolvedOncePerTTL(t *testing.T) {
	h := newHarnessWithClock(t, true)
	h.seedReservations(t)
	class := h.defaultClass(t)
	ctx := context.Background()
	if _, err := h.provider.classes.Resolved(ctx, class); err != nil {
		t.Fatal(err)
	}
	if n := h.endpoint.RequestCounts()["DescribeCapacityReservations"]; n != 0 {
		t.Errorf("%d DescribeCapacityReservations for a class without terms, want 0", n)
	}

	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}
	class.UID, class.Generation = "class-with-reservations", 2
	for range 3 {
		r, err := h.provider.classes.Resolved(ctx, class)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Reservations.Reservations) != 2 {
			t.Fatalf("resolved %d reservations, want 2", len(r.Reservations.Reservations))
		}
	}
	if n := h.endpoint.RequestCounts()["DescribeCapacityReservations"]; n != 1 {
		t.Errorf("%d DescribeCapacityReservations for three resolutions within the TTL, want 1", n)
	}
	h.clock.Step(time.Minute)
	if _, err := h.provider.classes.Resolved(ctx, class); err != nil {
		t.Fatal(err)
	}
	if n := h.endpoint.RequestCounts()["DescribeCapacityReservations"]; n != 2 {
		t.Errorf("%d DescribeCapacityReservations once the TTL passed, want 2", n)
	}
}
