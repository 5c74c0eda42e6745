package localaws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// Reservation ids the tests add.
const (
	crOpen     = "cr-0000000000000000a"
	crTargeted = "cr-0000000000000000b"
	crShared   = "cr-0000000000000000c"
	crBlock    = "cr-0000000000000000d"
	crPast     = "cr-0000000000000000e"
)

// addReservation posts a reservation to the admin API, as the demo and stack tests do.
func (h *harness) addReservation(t *testing.T, spec CapacityReservationSpec) CapacityReservationSummary {
	t.Helper()
	body, err := json.Marshal(spec)
	require.NoError(t, err)
	resp, err := http.Post(h.url+"/_admin/capacity-reservations", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(answer))
	var added CapacityReservationSummary
	require.NoError(t, json.Unmarshal(answer, &added))
	return added
}

// seedReservations adds one reservation of each kind: an open and a targeted one in this
// account, one shared from another account, and a capacity block that ends in two hours.
func seedReservations(t *testing.T, h *harness) {
	t.Helper()
	for _, spec := range []CapacityReservationSpec{
		{ID: crOpen, InstanceType: "m5.large", Zone: "us-east-1a", Count: 2, Tags: map[string]string{"team": "payments"}},
		{ID: crTargeted, InstanceType: "m5.large", Zone: "us-east-1b", Count: 2, InstanceMatchCriteria: "targeted", Tags: map[string]string{"team": "payments"}},
		{ID: crShared, OwnerID: "210987654321", InstanceType: "c5.large", Zone: "us-east-1a", Count: 4, InstanceMatchCriteria: "targeted", Tags: map[string]string{"team": "search"}},
		{ID: crBlock, InstanceType: "c5.large", Zone: "us-east-1d", Count: 1, InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", End: testStart.Add(2 * time.Hour)},
	} {
		h.addReservation(t, spec)
	}
}

// reservationSummary is a described reservation as "id type@zone criteria type state available/total".
func describedReservations(out []ec2types.CapacityReservation) []string {
	var got []string
	for _, r := range out {
		got = append(got, fmt.Sprintf("%s %s@%s %s %s %s %d/%d", aws.ToString(r.CapacityReservationId), aws.ToString(r.InstanceType),
			aws.ToString(r.AvailabilityZone), r.InstanceMatchCriteria, r.ReservationType, r.State,
			aws.ToInt32(r.AvailableInstanceCount), aws.ToInt32(r.TotalInstanceCount)))
	}
	sort.Strings(got)
	return got
}

func TestDescribeCapacityReservations(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	var (
		open     = crOpen + " m5.large@us-east-1a open default active 2/2"
		targeted = crTargeted + " m5.large@us-east-1b targeted default active 2/2"
		shared   = crShared + " c5.large@us-east-1a targeted default active 4/4"
		block    = crBlock + " c5.large@us-east-1d targeted capacity-block active 1/1"
	)
	filter := func(name string, values ...string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String(name), Values: values}
	}
	tests := []struct {
		name     string
		in       ec2.DescribeCapacityReservationsInput
		want     []string
		wantCode string
	}{
		{name: "all", want: []string{open, targeted, shared, block}},
		{name: "by id", in: ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{crShared, crOpen}}, want: []string{open, shared}},
		{name: "by tag", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("tag:team", "payments")}}, want: []string{open, targeted}},
		{name: "by tag key", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("tag-key", "team")}}, want: []string{open, targeted, shared}},
		{name: "by owner", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("owner-id", "210987654321")}}, want: []string{shared}},
		{name: "by instance type", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("instance-type", "c5.*")}}, want: []string{shared, block}},
		{name: "by zone", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("availability-zone", "us-east-1a")}}, want: []string{open, shared}},
		{name: "by state", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("state", "expired")}}},
		{name: "by match criteria", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("instance-match-criteria", "open")}}, want: []string{open}},
		{name: "filters are ANDed", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("tag:team", "payments"), filter("availability-zone", "us-east-1b")}}, want: []string{targeted}},
		{name: "an unknown id", in: ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-0123456789abcdef0"}}, wantCode: "InvalidCapacityReservationId.NotFound"},
		{name: "a malformed id", in: ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"sg-1"}}, wantCode: "InvalidCapacityReservationId.Malformed"},
		{name: "an unknown filter", in: ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("color", "red")}}, wantCode: codeInvalidParameterValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.DescribeCapacityReservations(h.ctx, &tt.in)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, describedReservations(out.CapacityReservations)); diff != "" {
				t.Errorf("reservations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeCapacityReservationsDescribesEachReservation(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	out, err := h.ec2.DescribeCapacityReservations(h.ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{crBlock, crShared}})
	require.NoError(t, err)
	require.Len(t, out.CapacityReservations, 2)
	block, shared := out.CapacityReservations[0], out.CapacityReservations[1]
	require.Equal(t, testStart.Add(2*time.Hour), aws.ToTime(block.EndDate))
	require.Equal(t, ec2types.EndDateTypeLimited, block.EndDateType)
	require.Equal(t, ec2types.CapacityReservationTypeCapacityBlock, block.ReservationType)
	require.Equal(t, "use1-az4", aws.ToString(block.AvailabilityZoneId))
	require.Nil(t, shared.EndDate)
	require.Equal(t, ec2types.EndDateTypeUnlimited, shared.EndDateType)
	require.Equal(t, "210987654321", aws.ToString(shared.OwnerId))
	require.Equal(t, "arn:aws:ec2:us-east-1:210987654321:capacity-reservation/"+crShared, aws.ToString(shared.CapacityReservationArn))
	require.Equal(t, testStart, aws.ToTime(shared.StartDate))
	require.Equal(t, []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("search")}}, shared.Tags)
}

func TestDescribeCapacityReservationsPages(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	var got []string
	pages := 0
	p := ec2.NewDescribeCapacityReservationsPaginator(h.ec2, &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(3)})
	for p.HasMorePages() {
		out, err := p.NextPage(h.ctx)
		require.NoError(t, err)
		pages++
		for _, r := range out.CapacityReservations {
			got = append(got, aws.ToString(r.CapacityReservationId))
		}
	}
	require.Equal(t, 2, pages)
	require.Equal(t, []string{crOpen, crTargeted, crShared, crBlock}, got)

	_, err := h.ec2.DescribeCapacityReservations(h.ctx, &ec2.DescribeCapacityReservationsInput{NextToken: aws.String("not-a-token")})
	require.Equal(t, codeInvalidPaginationToken, errorCode(t, err))
	_, err = h.ec2.DescribeCapacityReservations(h.ctx, &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1001)})
	require.Equal(t, codeInvalidParameterValue, errorCode(t, err))
}

func TestCapacityReservationsFollowTheClock(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	h.addReservation(t, CapacityReservationSpec{ID: crPast, InstanceType: "c5.large", Zone: "us-east-1d", Count: 1, ReservationType: "capacity-block",
		Start: testStart.Add(time.Hour), End: testStart.Add(3 * time.Hour)})
	states := func() []string {
		out, err := h.ec2.DescribeCapacityReservations(h.ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{crBlock, crPast}})
		require.NoError(t, err)
		return describedReservations(out.CapacityReservations)
	}
	require.Equal(t, []string{
		crBlock + " c5.large@us-east-1d targeted capacity-block active 1/1",
		crPast + " c5.large@us-east-1d open capacity-block scheduled 0/1",
	}, states())
	h.clock.Step(2 * time.Hour)
	require.Equal(t, []string{
		crBlock + " c5.large@us-east-1d targeted capacity-block expired 0/1",
		crPast + " c5.large@us-east-1d open capacity-block active 1/1",
	}, states())
	out, err := h.ec2.DescribeCapacityReservations(h.ctx, &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{"active"}}}})
	require.NoError(t, err)
	require.Len(t, out.CapacityReservations, 4)
}

func TestAddCapacityReservationRefusesBadSpecs(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	tests := []struct {
		name string
		spec CapacityReservationSpec
		want string
	}{
		{"an unknown type", CapacityReservationSpec{InstanceType: "m5.huge", Zone: "us-east-1a", Count: 1}, `instanceType "m5.huge" is not in the catalog`},
		{"an unknown zone", CapacityReservationSpec{InstanceType: "m5.large", Zone: "eu-west-1a", Count: 1}, `zone "eu-west-1a" is not a zone of the region`},
		{"a type the zone does not sell", CapacityReservationSpec{InstanceType: "c5.large", Zone: "us-east-1c", Count: 1}, "c5.large is not sold in us-east-1c"},
		{"no instances", CapacityReservationSpec{InstanceType: "m5.large", Zone: "us-east-1a"}, "count must be at least 1, not 0"},
		{"a capacity block without an end", CapacityReservationSpec{InstanceType: "m5.large", Zone: "us-east-1a", Count: 1, ReservationType: "capacity-block"}, "a capacity block needs an end"},
		{"a bad match criteria", CapacityReservationSpec{InstanceType: "m5.large", Zone: "us-east-1a", Count: 1, InstanceMatchCriteria: "any"}, `instanceMatchCriteria must be open or targeted, not "any"`},
		{"an id taken", CapacityReservationSpec{ID: crOpen, InstanceType: "m5.large", Zone: "us-east-1a", Count: 1}, "capacity reservation " + crOpen + " exists already"},
		{"a bad id", CapacityReservationSpec{ID: "cr-1", InstanceType: "m5.large", Zone: "us-east-1a", Count: 1}, `id "cr-1" must be cr- and 17 hexadecimal digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.server.AddCapacityReservation(tt.spec)
			require.EqualError(t, err, tt.want)
		})
	}
}

// reservationLaunchTemplate creates a launch template whose instances target the
// reservation, or state the preference when target is empty.
func (h *harness) reservationLaunchTemplate(t *testing.T, name, image, target string, preference ec2types.CapacityReservationPreference) {
	t.Helper()
	spec := &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: preference}
	if target != "" {
		spec = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(target)},
		}
	}
	_, err := h.ec2.CreateLaunchTemplate(h.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), CapacityReservationSpecification: spec},
	})
	require.NoError(t, err)
}

// available reads a reservation's AvailableInstanceCount through the API.
func (h *harness) available(t *testing.T, id string) int32 {
	t.Helper()
	out, err := h.ec2.DescribeCapacityReservations(h.ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	require.NoError(t, err)
	return aws.ToInt32(out.CapacityReservations[0].AvailableInstanceCount)
}

// reservationsOf returns the capacity reservation of each instance ("" for none).
func (h *harness) reservationsOf(t *testing.T, ids []string) []string {
	t.Helper()
	out, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	require.NoError(t, err)
	var got []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			got = append(got, aws.ToString(i.CapacityReservationId))
		}
	}
	return got
}

func TestLaunchesTakeAndGiveBackReservedCapacity(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	image := h.imageID(t, al2023X86Parameter)
	subnets := h.subnets(t)
	h.reservationLaunchTemplate(t, "targeted", image, crTargeted, "")
	h.reservationLaunchTemplate(t, "shared", image, crShared, "")
	h.reservationLaunchTemplate(t, "open", image, "", "")
	h.reservationLaunchTemplate(t, "none", image, "", ec2types.CapacityReservationPreferenceNone)

	// A targeted launch takes slots; asking for more than are left launches what fits and
	// reports EC2's ReservationCapacityExceeded for the rest.
	out, err := h.ec2.CreateFleet(h.ctx, fleetInput("targeted", ec2types.DefaultTargetCapacityTypeOnDemand, 3, override("m5.large", subnets["us-east-1b"])))
	require.NoError(t, err)
	require.Equal(t, fleetSummary{
		Launched: []string{"m5.large@us-east-1b on-demand x2"},
		Errors:   []string{codeReservationCapacityExceeded + " m5.large@us-east-1b on-demand"},
	}, summarizeFleet(out))
	targetedIDs := launchedIDs(out)
	require.Equal(t, []string{crTargeted, crTargeted}, h.reservationsOf(t, targetedIDs))
	require.Equal(t, int32(0), h.available(t, crTargeted))
	resp, err := http.Get(h.url + "/_admin/capacity-reservations")
	require.NoError(t, err)
	var listed []CapacityReservationSummary
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&listed))
	resp.Body.Close()
	availableByID := map[string]int{}
	for _, r := range listed {
		availableByID[r.ID] = r.Available
	}
	require.Equal(t, map[string]int{crOpen: 2, crTargeted: 0, crShared: 4, crBlock: 1}, availableByID)

	// A full targeted reservation refuses the launch outright.
	out, err = h.ec2.CreateFleet(h.ctx, fleetInput("targeted", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", subnets["us-east-1b"])))
	require.NoError(t, err)
	require.Equal(t, fleetSummary{Errors: []string{codeReservationCapacityExceeded + " m5.large@us-east-1b on-demand"}}, summarizeFleet(out))

	// A launch of another type or zone than the reservation's is refused.
	out, err = h.ec2.CreateFleet(h.ctx, fleetInput("shared", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("c5.large", subnets["us-east-1b"])))
	require.NoError(t, err)
	require.Equal(t, fleetSummary{Errors: []string{"InvalidParameterCombination c5.large@us-east-1b on-demand"}}, summarizeFleet(out))

	// Terminating gives the slot back.
	_, err = h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: targetedIDs[:1]})
	require.NoError(t, err)
	require.Equal(t, int32(1), h.available(t, crTargeted))

	// An on-demand launch of the type in the zone of an open reservation goes into it until
	// it is full, then outside; a launch that prefers none, and spot, never do.
	out, err = h.ec2.CreateFleet(h.ctx, fleetInput("open", ec2types.DefaultTargetCapacityTypeOnDemand, 3, override("m5.large", subnets["us-east-1a"])))
	require.NoError(t, err)
	require.Equal(t, []string{crOpen, crOpen, ""}, h.reservationsOf(t, launchedIDs(out)))
	require.Equal(t, int32(0), h.available(t, crOpen))
	_, err = h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: launchedIDs(out)})
	require.NoError(t, err)
	require.Equal(t, int32(2), h.available(t, crOpen))
	out, err = h.ec2.CreateFleet(h.ctx, fleetInput("none", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", subnets["us-east-1a"])))
	require.NoError(t, err)
	require.Equal(t, []string{""}, h.reservationsOf(t, launchedIDs(out)))
	out, err = h.ec2.CreateFleet(h.ctx, fleetInput("open", ec2types.DefaultTargetCapacityTypeSpot, 1, override("m5.large", subnets["us-east-1a"])))
	require.NoError(t, err)
	require.Equal(t, []string{""}, h.reservationsOf(t, launchedIDs(out)))
	require.Equal(t, int32(2), h.available(t, crOpen))

	// An expired reservation takes no launch.
	h.clock.Step(2 * time.Hour)
	h.reservationLaunchTemplate(t, "block", image, crBlock, "")
	out, err = h.ec2.CreateFleet(h.ctx, fleetInput("block", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("c5.large", subnets["us-east-1d"])))
	require.NoError(t, err)
	require.Equal(t, fleetSummary{Errors: []string{"InvalidCapacityReservationId.NotFound c5.large@us-east-1d on-demand"}}, summarizeFleet(out))
}

func TestReservedCapacityLaunchesWhereThePoolHasNone(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	require.NoError(t, h.server.setInsufficientCapacity([]CapacityPool{{InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: capacityOnDemand}}))
	h.reservationLaunchTemplate(t, "targeted", h.imageID(t, al2023X86Parameter), crTargeted, "")
	out, err := h.ec2.CreateFleet(h.ctx, fleetInput("targeted", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", h.subnets(t)["us-east-1b"])))
	require.NoError(t, err)
	require.Equal(t, fleetSummary{Launched: []string{"m5.large@us-east-1b on-demand x1"}}, summarizeFleet(out))
}

func TestCapacityBlockInstancesAreTerminatedHalfAnHourBeforeTheBlockEnds(t *testing.T) {
	h := newHarness(t, Options{})
	seedReservations(t, h)
	h.reservationLaunchTemplate(t, "block", h.imageID(t, al2023X86Parameter), crBlock, "")
	out, err := h.ec2.CreateFleet(h.ctx, fleetInput("block", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("c5.large", h.subnets(t)["us-east-1d"])))
	require.NoError(t, err)
	ids := launchedIDs(out)
	require.Equal(t, []string{crBlock}, h.reservationsOf(t, ids))
	state := func() ec2types.InstanceStateName {
		described, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		require.NoError(t, err)
		return described.Reservations[0].Instances[0].State.Name
	}

	h.clock.Step(90*time.Minute - time.Second)
	require.Equal(t, ec2types.InstanceStateNameRunning, state())
	require.Equal(t, int32(0), h.available(t, crBlock))

	h.clock.Step(time.Second)
	require.Eventually(t, func() bool { return state() == ec2types.InstanceStateNameTerminated }, 5*time.Second, 10*time.Millisecond)
	// The block takes no launch in its last half hour, though it is still active.
	out, err = h.ec2.CreateFleet(h.ctx, fleetInput("block", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("c5.large", h.subnets(t)["us-east-1d"])))
	require.NoError(t, err)
	require.Equal(t, fleetSummary{Errors: []string{codeReservationCapacityExceeded + " c5.large@us-east-1d on-demand"}}, summarizeFleet(out))
}
