package localaws

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// Capacity reservation attributes, with EC2's values.
const (
	reservationTypeDefault       = "default"
	reservationTypeCapacityBlock = "capacity-block"
	matchCriteriaOpen            = "open"
	matchCriteriaTargeted        = "targeted"
	reservationStateActive       = "active"
	reservationStateExpired      = "expired"
	reservationStateScheduled    = "scheduled"
	// codeReservationCapacityExceeded is EC2's error for a launch that targets a reservation
	// with no instance left.
	codeReservationCapacityExceeded = "ReservationCapacityExceeded"
	// capacityBlockTerminationLead is how long before a capacity block ends EC2 begins to
	// terminate its instances (it warns ten minutes before that).
	capacityBlockTerminationLead = 30 * time.Minute
)

var reservationIDPattern = regexp.MustCompile(`^cr-[0-9a-f]{17}$`)

// CapacityReservationSpec adds a capacity reservation through the admin API. Zero values
// take EC2's defaults: this account as the owner, open matching, type default, starting now,
// with no end.
type CapacityReservationSpec struct {
	// ID is the reservation's id; empty means a new one.
	ID           string `json:"id,omitempty"`
	OwnerID      string `json:"ownerId,omitempty"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	// Count is the reservation's TotalInstanceCount.
	Count int `json:"count"`
	// InstanceMatchCriteria is open or targeted.
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
	// ReservationType is default or capacity-block; a capacity block needs an end.
	ReservationType string            `json:"reservationType,omitempty"`
	Start           time.Time         `json:"start,omitempty"`
	End             time.Time         `json:"end,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
}

// CapacityReservationSummary is a reservation as the admin API lists it.
type CapacityReservationSummary struct {
	CapacityReservationSpec
	State     string `json:"state"`
	Available int    `json:"available"`
}

// capacityReservation is an EC2 capacity reservation. Its instances are those launched
// into it that are not terminated, counted when asked.
type capacityReservation struct {
	id            string
	ownerID       string
	instanceType  string
	zone          zone
	total         int
	matchCriteria string
	kind          string
	created       time.Time
	start, end    time.Time
	tags          []tag
}

// stateAt is the reservation's state: scheduled before its start, expired from its end.
func (r *capacityReservation) stateAt(now time.Time) string {
	switch {
	case now.Before(r.start):
		return reservationStateScheduled
	case !r.end.IsZero() && !now.Before(r.end):
		return reservationStateExpired
	default:
		return reservationStateActive
	}
}

// availableAt is how many more instances the reservation takes now: none once a capacity
// block's instances are being terminated. s.mu must be held.
func (s *Server) availableAt(r *capacityReservation, now time.Time) int {
	if r.stateAt(now) != reservationStateActive {
		return 0
	}
	if r.kind == reservationTypeCapacityBlock && !now.Before(r.end.Add(-capacityBlockTerminationLead)) {
		return 0
	}
	used := 0
	for _, i := range s.instances {
		if i.capacityReservationID == r.id && i.terminatedAt.IsZero() {
			used++
		}
	}
	return max(0, r.total-used)
}

// AddCapacityReservation adds a capacity reservation, as if bought in the console.
func (s *Server) AddCapacityReservation(spec CapacityReservationSpec) (CapacityReservationSummary, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &capacityReservation{
		id:            spec.ID,
		ownerID:       spec.OwnerID,
		instanceType:  spec.InstanceType,
		total:         spec.Count,
		matchCriteria: spec.InstanceMatchCriteria,
		kind:          spec.ReservationType,
		created:       now,
		start:         spec.Start,
		end:           spec.End,
	}
	if r.id == "" {
		r.id = s.newID("cr", 17)
	}
	if r.ownerID == "" {
		r.ownerID = accountID
	}
	if r.matchCriteria == "" {
		r.matchCriteria = matchCriteriaOpen
	}
	if r.kind == "" {
		r.kind = reservationTypeDefault
	}
	if r.start.IsZero() {
		r.start = now
	}
	for k, v := range spec.Tags {
		r.tags = append(r.tags, tag{key: k, value: v})
	}
	r.tags = sortedTags(r.tags...)
	if err := s.checkReservation(r, spec.Zone); err != nil {
		return CapacityReservationSummary{}, err
	}
	s.reservations = append(s.reservations, r)
	s.logger.V(2).Info("added capacity reservation", "capacityReservation", r.id, "instanceType", r.instanceType, "zone", r.zone.name, "count", r.total)
	return s.reservationSummary(r, now), nil
}

// checkReservation refuses a reservation EC2 could not have, and sets its zone. s.mu must
// be held.
func (s *Server) checkReservation(r *capacityReservation, zoneName string) error {
	switch {
	case !reservationIDPattern.MatchString(r.id):
		return fmt.Errorf("id %q must be cr- and 17 hexadecimal digits", r.id)
	case s.reservationByID(r.id) != nil:
		return fmt.Errorf("capacity reservation %s exists already", r.id)
	case s.typesByName[r.instanceType] == nil:
		return fmt.Errorf("instanceType %q is not in the catalog", r.instanceType)
	case r.total < 1:
		return fmt.Errorf("count must be at least 1, not %d", r.total)
	case r.matchCriteria != matchCriteriaOpen && r.matchCriteria != matchCriteriaTargeted:
		return fmt.Errorf("instanceMatchCriteria must be open or targeted, not %q", r.matchCriteria)
	case r.kind != reservationTypeDefault && r.kind != reservationTypeCapacityBlock:
		return fmt.Errorf("reservationType must be default or capacity-block, not %q", r.kind)
	case r.kind == reservationTypeCapacityBlock && r.end.IsZero():
		return fmt.Errorf("a capacity block needs an end")
	case !r.end.IsZero() && !r.end.After(r.start):
		return fmt.Errorf("end %s must be after start %s", r.end.Format(time.RFC3339), r.start.Format(time.RFC3339))
	}
	found := false
	for _, z := range s.zones {
		if z.name == zoneName {
			r.zone, found = z, true
		}
	}
	if !found {
		return fmt.Errorf("zone %q is not a zone of the region", zoneName)
	}
	if _, _, sold := offeringPrice(s.typesByName[r.instanceType], r.zone.name, capacityOnDemand); !sold {
		return fmt.Errorf("%s is not sold in %s", r.instanceType, r.zone.name)
	}
	return nil
}

// CapacityReservations lists the capacity reservations, in the order they were added.
func (s *Server) CapacityReservations() []CapacityReservationSummary {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CapacityReservationSummary, 0, len(s.reservations))
	for _, r := range s.reservations {
		out = append(out, s.reservationSummary(r, now))
	}
	return out
}

// reservationSummary is what the admin API shows of r. s.mu must be held.
func (s *Server) reservationSummary(r *capacityReservation, now time.Time) CapacityReservationSummary {
	return CapacityReservationSummary{
		CapacityReservationSpec: CapacityReservationSpec{
			ID: r.id, OwnerID: r.ownerID, InstanceType: r.instanceType, Zone: r.zone.name, Count: r.total,
			InstanceMatchCriteria: r.matchCriteria, ReservationType: r.kind, Start: r.start.UTC(), End: r.end.UTC(),
			Tags: tagMap(r.tags),
		},
		State:     r.stateAt(now),
		Available: s.availableAt(r, now),
	}
}

// serveCapacityReservations serves GET and POST /_admin/capacity-reservations.
func (s *Server) serveCapacityReservations(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.writeAdminJSON(w, s.CapacityReservations())
	case http.MethodPost:
		var spec CapacityReservationSpec
		if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
			http.Error(w, "decoding capacity reservation: "+err.Error(), http.StatusBadRequest)
			return
		}
		added, err := s.AddCapacityReservation(spec)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.writeAdminJSON(w, added)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// reservationByID returns the reservation with the id, nil if there is none. s.mu must be held.
func (s *Server) reservationByID(id string) *capacityReservation {
	for _, r := range s.reservations {
		if r.id == id {
			return r
		}
	}
	return nil
}

type describeCapacityReservationsResponse struct {
	XMLName xml.Name `xml:"DescribeCapacityReservationsResponse"`
	ec2Envelope
	CapacityReservations []xmlCapacityReservation `xml:"capacityReservationSet>item"`
	NextToken            string                   `xml:"nextToken,omitempty"`
}

type xmlCapacityReservation struct {
	CapacityReservationID  string   `xml:"capacityReservationId"`
	OwnerID                string   `xml:"ownerId"`
	CapacityReservationArn string   `xml:"capacityReservationArn"`
	AvailabilityZoneID     string   `xml:"availabilityZoneId"`
	InstanceType           string   `xml:"instanceType"`
	InstancePlatform       string   `xml:"instancePlatform"`
	AvailabilityZone       string   `xml:"availabilityZone"`
	Tenancy                string   `xml:"tenancy"`
	TotalInstanceCount     int      `xml:"totalInstanceCount"`
	AvailableInstanceCount int      `xml:"availableInstanceCount"`
	EbsOptimized           bool     `xml:"ebsOptimized"`
	EphemeralStorage       bool     `xml:"ephemeralStorage"`
	State                  string   `xml:"state"`
	StartDate              string   `xml:"startDate"`
	EndDate                string   `xml:"endDate,omitempty"`
	EndDateType            string   `xml:"endDateType"`
	InstanceMatchCriteria  string   `xml:"instanceMatchCriteria"`
	CreateDate             string   `xml:"createDate"`
	ReservationType        string   `xml:"reservationType"`
	TagSet                 []xmlTag `xml:"tagSet>item"`
}

// endDateType is limited for a reservation with an end, unlimited otherwise.
func (r *capacityReservation) endDateType() string {
	if r.end.IsZero() {
		return "unlimited"
	}
	return "limited"
}

// reservationFilters are the DescribeCapacityReservations filters served; now is when
// the state is read.
func reservationFilters(now time.Time) filterFields[*capacityReservation] {
	return filterFields[*capacityReservation]{
		fields: map[string]func(*capacityReservation) []string{
			"instance-type":           func(r *capacityReservation) []string { return oneValue(r.instanceType) },
			"owner-id":                func(r *capacityReservation) []string { return oneValue(r.ownerID) },
			"availability-zone":       func(r *capacityReservation) []string { return oneValue(r.zone.name) },
			"instance-platform":       func(*capacityReservation) []string { return oneValue("Linux/UNIX") },
			"tenancy":                 func(*capacityReservation) []string { return oneValue("default") },
			"state":                   func(r *capacityReservation) []string { return oneValue(r.stateAt(now)) },
			"end-date-type":           func(r *capacityReservation) []string { return oneValue(r.endDateType()) },
			"instance-match-criteria": func(r *capacityReservation) []string { return oneValue(r.matchCriteria) },
		},
		tags: func(r *capacityReservation) []tag { return r.tags },
	}
}

// describeCapacityReservations lists capacity reservations by id and filters.
func (s *Server) describeCapacityReservations(p queryParams) (*describeCapacityReservationsResponse, error) {
	now := s.clock.Now()
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := reservationFilters(now).compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	candidates := s.reservations
	if ids := p.strs("CapacityReservationId"); len(ids) > 0 {
		candidates = nil
		for _, id := range ids {
			if !reservationIDPattern.MatchString(id) {
				return nil, newAPIError("InvalidCapacityReservationId.Malformed", "Invalid id: \"%s\"", id)
			}
			r := s.reservationByID(id)
			if r == nil {
				return nil, newAPIError("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
			}
			candidates = append(candidates, r)
		}
	}
	page, next, err := paginate(filterSlice(candidates, keep), maxResults, token, pageLimits{min: 1, max: 1000, fallback: 1000, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	resp := &describeCapacityReservationsResponse{NextToken: next}
	for _, r := range page {
		x := xmlCapacityReservation{
			CapacityReservationID:  r.id,
			OwnerID:                r.ownerID,
			CapacityReservationArn: "arn:aws:ec2:" + s.region + ":" + r.ownerID + ":capacity-reservation/" + r.id,
			AvailabilityZoneID:     r.zone.id,
			InstanceType:           r.instanceType,
			InstancePlatform:       "Linux/UNIX",
			AvailabilityZone:       r.zone.name,
			Tenancy:                "default",
			TotalInstanceCount:     r.total,
			AvailableInstanceCount: s.availableAt(r, now),
			State:                  r.stateAt(now),
			StartDate:              formatTime(r.start),
			EndDateType:            r.endDateType(),
			InstanceMatchCriteria:  r.matchCriteria,
			CreateDate:             formatTime(r.created),
			ReservationType:        r.kind,
			TagSet:                 toXMLTags(r.tags),
		}
		if !r.end.IsZero() {
			x.EndDate = formatTime(r.end)
		}
		resp.CapacityReservations = append(resp.CapacityReservations, x)
	}
	return resp, nil
}

// launchReservation is the reservation an on-demand launch of c's type in c's zone goes
// into: the one c's launch template targets, which must match and have room, else an
// active open one with room unless the template's preference is none. A nil reservation
// with no error launches outside any. s.mu must be held.
func (s *Server) launchReservation(c fleetCandidate, now time.Time) (*capacityReservation, *apiError) {
	target := c.lt.data.capacityReservationID
	if target != "" {
		r := s.reservationByID(target)
		switch {
		case r == nil:
			return nil, newAPIError("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", target)
		case r.stateAt(now) != reservationStateActive:
			return nil, newAPIError("InvalidCapacityReservationId.NotFound", "The capacity reservation '%s' is %s.", target, r.stateAt(now))
		case r.instanceType != c.instanceType.Name || r.zone.name != c.subnet.zone.name:
			return nil, newAPIError("InvalidParameterCombination", "The capacity reservation '%s' is for %s in %s, not %s in %s.", target, r.instanceType, r.zone.name, c.instanceType.Name, c.subnet.zone.name)
		case s.availableAt(r, now) == 0:
			return nil, newAPIError(codeReservationCapacityExceeded, "Insufficient capacity in the Capacity Reservation '%s'.", target)
		}
		return r, nil
	}
	if c.lt.data.capacityReservationPreference == "none" {
		return nil, nil
	}
	for _, r := range s.reservations {
		if r.matchCriteria == matchCriteriaOpen && r.kind == reservationTypeDefault && r.instanceType == c.instanceType.Name &&
			r.zone.name == c.subnet.zone.name && s.availableAt(r, now) > 0 {
			return r, nil
		}
	}
	if c.lt.data.capacityReservationPreference == "capacity-reservations-only" {
		return nil, newAPIError(codeInsufficientCapacity, "There is no open capacity reservation with room for %s in %s.", c.instanceType.Name, c.subnet.zone.name)
	}
	return nil, nil
}
