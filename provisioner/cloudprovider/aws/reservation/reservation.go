// Package reservation resolves the capacity reservations EC2NodeClasses select and offers
// them to the planner as capacity type reserved.
package reservation

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/apierror"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
)

// Reasons of the CapacityReservationsReady condition.
const (
	ReasonCapacityReservationsResolved  = "Resolved"
	ReasonCapacityReservationsUnmatched = "SelectorMatchedNothing"
)

// Resolved is what a class's capacityReservationSelectorTerms select.
type Resolved struct {
	// Reservations are the active reservations selected, sorted by id.
	Reservations []awsv1.CapacityReservation
	// unmatched are the indexes of the terms that selected no active reservation.
	unmatched []int

	mu sync.Mutex
	// available is each reservation's AvailableInstanceCount when it was described, by id;
	// Took takes the launches since from it.
	available map[string]int
}

// Condition reports the resolution on the class: true when every term matched, false with
// the terms that did not and the fix.
func (r *Resolved) Condition() metav1.Condition {
	if len(r.unmatched) == 0 {
		return metav1.Condition{Type: awsv1.ConditionTypeCapacityReservationsReady, Status: metav1.ConditionTrue, Reason: ReasonCapacityReservationsResolved}
	}
	terms := make([]string, 0, len(r.unmatched))
	for _, i := range r.unmatched {
		terms = append(terms, fmt.Sprintf("capacityReservationSelectorTerms[%d]", i))
	}
	return metav1.Condition{
		Type: awsv1.ConditionTypeCapacityReservationsReady, Status: metav1.ConditionFalse, Reason: ReasonCapacityReservationsUnmatched,
		Message: strings.Join(terms, ", ") + " matched no active capacity reservation: check the id, tags and ownerID " +
			"(a reservation shared from another account needs its ownerID), or remove the term; the class launches without them",
	}
}

// Resolve describes the active capacity reservations each term selects:
// by id, or by tags and owner. An id EC2 does not know selects nothing, like a tag no
// reservation has, rather than failing the class.
func Resolve(ctx context.Context, client *ec2.Client, terms []awsv1.CapacityReservationSelectorTerm, now time.Time) (*Resolved, error) {
	out := &Resolved{available: map[string]int{}}
	seen := map[string]awsv1.CapacityReservation{}
	for i, term := range terms {
		in := &ec2.DescribeCapacityReservationsInput{
			Filters: append(tags.Filters(term.Tags), ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}),
		}
		if term.ID != "" {
			in.CapacityReservationIds = []string{term.ID}
		}
		if term.OwnerID != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{term.OwnerID}})
		}
		matched := false
		pages := ec2.NewDescribeCapacityReservationsPaginator(client, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if isUnknownReservation(err) {
				break
			}
			if err != nil {
				return out, fmt.Errorf("describing capacity reservations: %w", err)
			}
			for _, r := range page.CapacityReservations {
				matched = true
				status := reservationStatus(r, now)
				seen[status.ID] = status
				out.available[status.ID] = int(aws.ToInt32(r.AvailableInstanceCount))
			}
		}
		if !matched {
			out.unmatched = append(out.unmatched, i)
		}
	}
	for _, r := range seen {
		out.Reservations = append(out.Reservations, r)
	}
	sort.Slice(out.Reservations, func(i, j int) bool { return out.Reservations[i].ID < out.Reservations[j].ID })
	return out, nil
}

// isUnknownReservation reports whether EC2 refused a reservation id it does not know.
func isUnknownReservation(err error) bool {
	return apierror.Is(err, "InvalidCapacityReservationId.NotFound")
}

// reservationStatus is how the class's status shows a reservation: a capacity block is
// expiring from awsv1.CapacityBlockExpiryWarning before its end, when EC2 warns that its
// instances will be terminated.
func reservationStatus(r ec2types.CapacityReservation, now time.Time) awsv1.CapacityReservation {
	status := awsv1.CapacityReservation{
		ID:                    aws.ToString(r.CapacityReservationId),
		InstanceType:          aws.ToString(r.InstanceType),
		AvailabilityZone:      aws.ToString(r.AvailabilityZone),
		OwnerID:               aws.ToString(r.OwnerId),
		InstanceMatchCriteria: string(r.InstanceMatchCriteria),
		ReservationType:       awsv1.CapacityReservationTypeDefault,
		State:                 awsv1.CapacityReservationStateActive,
	}
	if r.ReservationType == ec2types.CapacityReservationTypeCapacityBlock {
		status.ReservationType = awsv1.CapacityReservationTypeCapacityBlock
	}
	if r.EndDate != nil {
		end := metav1.NewTime(r.EndDate.UTC())
		status.EndTime = &end
		if status.ReservationType == awsv1.CapacityReservationTypeCapacityBlock && !now.Before(r.EndDate.Add(-awsv1.CapacityBlockExpiryWarning)) {
			status.State = awsv1.CapacityReservationStateExpiring
		}
	}
	return status
}

// PriceDivisor divides an instance type's on-demand price into the price of its
// reserved offerings: the reservation is paid for whether it runs nodes or not, so a node
// in it costs next to nothing, and planning and consolidation prefer it to any other
// offering while the relative order of the types stays that of their on-demand prices.
const PriceDivisor = 10_000_000

// Offerings are the offerings of the class's active reservations: for each, its
// instance type in its zone as capacity type reserved, with the instances left that no
// launch since it was described took. A capacity block that is expiring takes no new node.
// zones are the class's zones, by name, with their IDs. The caller decides their
// availability with the other offerings'.
func (r *Resolved) Offerings(it *cloudprovider.InstanceType, zones map[string]string, prices *pricing.Book) []cloudprovider.Offering {
	if r == nil {
		return nil
	}
	var out []cloudprovider.Offering
	for _, res := range r.Reservations {
		if res.InstanceType != it.Name || res.State != awsv1.CapacityReservationStateActive {
			continue
		}
		zoneID, ok := zones[res.AvailabilityZone]
		if !ok {
			continue
		}
		onDemand, ok := prices.Price(it.Name, res.AvailabilityZone, karpv1.CapacityTypeOnDemand)
		if !ok {
			continue
		}
		out = append(out, cloudprovider.Offering{
			Zone: res.AvailabilityZone, ZoneID: zoneID, CapacityType: karpv1.CapacityTypeReserved,
			ReservationID: res.ID, ReservationType: res.ReservationType,
			Price: onDemand / PriceDivisor, ReservedInstances: r.Left(res.ID),
		})
	}
	return out
}

// Left is how many instances the reservation takes, as described less the
// launches into it since.
func (r *Resolved) Left(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.available[id]
}

// Took counts a launch into the reservation until the class is resolved again.
func (r *Resolved) Took(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.available[id] > 0 {
		r.available[id]--
	}
}

// Planned counts, by reservation id, the NodeClaims planned into a capacity
// reservation (its label) that have not launched yet: their instances are not taken from
// the reservation's count, but no other plan may count on them.
func Planned(ctx context.Context, claims client.Reader) (map[string]int, error) {
	var list karpv1.NodeClaimList
	if err := claims.List(ctx, &list, client.HasLabels{karpv1.CapacityReservationIDLabelKey}); err != nil {
		return nil, fmt.Errorf("listing NodeClaims planned into capacity reservations: %w", err)
	}
	out := map[string]int{}
	for _, nc := range list.Items {
		if nc.Status.ProviderID == "" && nc.DeletionTimestamp == nil {
			out[nc.Labels[karpv1.CapacityReservationIDLabelKey]]++
		}
	}
	return out, nil
}

// Type is the type of a reservation the class's status lists, default when it
// lists no such reservation.
func Type(class *awsv1.EC2NodeClass, id string) string {
	if class != nil {
		for _, r := range class.Status.CapacityReservations {
			if r.ID == id {
				return r.ReservationType
			}
		}
	}
	return awsv1.CapacityReservationTypeDefault
}
