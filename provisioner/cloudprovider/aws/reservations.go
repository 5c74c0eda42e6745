package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// capacityBlockExpiryWarning is how long before a capacity block ends it is reported
// expiring: EC2 warns then that the block's instances will be terminated.
const capacityBlockExpiryWarning = 40 * time.Minute

// Reasons of the CapacityReservationsReady condition.
const (
	ReasonCapacityReservationsResolved  = "Resolved"
	ReasonCapacityReservationsUnmatched = "SelectorMatchedNothing"
)

// resolvedReservations is what a class's capacityReservationSelectorTerms select.
type resolvedReservations struct {
	// reservations are the active reservations selected, sorted by id.
	reservations []awsv1.CapacityReservation
	// unmatched are the indexes of the terms that selected no active reservation.
	unmatched []int
}

// condition reports the resolution on the class: true when every term matched, false with
// the terms that did not and the fix.
func (r resolvedReservations) condition() metav1.Condition {
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

// resolveCapacityReservations describes the active capacity reservations each term selects:
// by id, or by tags and owner. An id EC2 does not know selects nothing, like a tag no
// reservation has, rather than failing the class.
func (p *Provider) resolveCapacityReservations(ctx context.Context, terms []awsv1.CapacityReservationSelectorTerm, now time.Time) (resolvedReservations, error) {
	var out resolvedReservations
	seen := map[string]awsv1.CapacityReservation{}
	for i, term := range terms {
		in := &ec2.DescribeCapacityReservationsInput{
			Filters: append(tagFilters(term.Tags), ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}),
		}
		if term.ID != "" {
			in.CapacityReservationIds = []string{term.ID}
		}
		if term.OwnerID != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{term.OwnerID}})
		}
		matched := false
		pages := ec2.NewDescribeCapacityReservationsPaginator(p.ec2, in)
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
			}
		}
		if !matched {
			out.unmatched = append(out.unmatched, i)
		}
	}
	for _, r := range seen {
		out.reservations = append(out.reservations, r)
	}
	sort.Slice(out.reservations, func(i, j int) bool { return out.reservations[i].ID < out.reservations[j].ID })
	return out, nil
}

// isUnknownReservation reports whether EC2 refused a reservation id it does not know.
func isUnknownReservation(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidCapacityReservationId.NotFound"
}

// reservationStatus is how the class's status shows a reservation: a capacity block is
// expiring from capacityBlockExpiryWarning before its end.
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
		if status.ReservationType == awsv1.CapacityReservationTypeCapacityBlock && !now.Before(r.EndDate.Add(-capacityBlockExpiryWarning)) {
			status.State = awsv1.CapacityReservationStateExpiring
		}
	}
	return status
}
