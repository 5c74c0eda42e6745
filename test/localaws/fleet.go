package localaws

import (
	"encoding/xml"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// maxFleetCapacity bounds the instances one CreateFleet call may launch.
const maxFleetCapacity = 1000

// Allocation strategies, by capacity type, and whether each picks by priority.
var (
	spotStrategies = map[string]bool{
		"": false, "lowest-price": false, "price-capacity-optimized": false, "capacity-optimized": false,
		"diversified": false, "capacity-optimized-prioritized": true,
	}
	onDemandStrategies = map[string]bool{"": false, "lowest-price": false, "prioritized": true}
)

// CapacityPool is an instance type sold in a zone as a capacity type (spot or on-demand).
type CapacityPool struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

// fleetRecord remembers the response to a ClientToken, and the request it answered.
type fleetRecord struct {
	fingerprint string
	response    *createFleetResponse
}

// fleetRequest is a decoded CreateFleet request.
type fleetRequest struct {
	clientToken      string
	fingerprint      string
	configs          []fleetConfig
	capacity         map[string]int
	spotStrategy     string
	onDemandStrategy string
	tagSpecs         []tagSpecification
}

// fleetConfig is one LaunchTemplateConfigs entry.
type fleetConfig struct {
	spec      xmlFleetLaunchTemplateSpec
	overrides []fleetOverride
}

// fleetOverride is one Overrides entry.
type fleetOverride struct {
	instanceType string
	subnetID     string
	zone         string
	imageID      string
	maxPrice     string
	priority     *float64
}

// fleetCandidate is an override that can launch: everything resolved and priced.
type fleetCandidate struct {
	lt           *launchTemplate
	response     xmlLaunchTemplateAndOverrides
	instanceType *catalog.InstanceType
	subnet       *subnet
	imageID      string
	price        float64
	priority     float64
	// reservation is the capacity reservation an on-demand launch goes into, if any.
	reservation *capacityReservation
	// offeredOutsideReservations is whether the pool sells the type beyond the reservation.
	offeredOutsideReservations bool
}

type createFleetResponse struct {
	XMLName xml.Name `xml:"CreateFleetResponse"`
	ec2Envelope
	FleetID   string             `xml:"fleetId"`
	Errors    []xmlFleetError    `xml:"errorSet>item"`
	Instances []xmlFleetInstance `xml:"fleetInstanceSet>item"`
}

type xmlFleetError struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	ErrorCode                  string                        `xml:"errorCode"`
	ErrorMessage               string                        `xml:"errorMessage"`
}

type xmlFleetInstance struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	InstanceIDs                []string                      `xml:"instanceIds>item"`
	InstanceType               string                        `xml:"instanceType"`
	AvailabilityZone           string                        `xml:"availabilityZone"`
	SubnetID                   string                        `xml:"subnetId"`
	Platform                   string                        `xml:"platform,omitempty"`
}

type xmlLaunchTemplateAndOverrides struct {
	LaunchTemplateSpecification xmlFleetLaunchTemplateSpec `xml:"launchTemplateSpecification"`
	Overrides                   xmlFleetOverrides          `xml:"overrides"`
}

type xmlFleetLaunchTemplateSpec struct {
	LaunchTemplateID   string `xml:"launchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
	Version            string `xml:"version,omitempty"`
}

type xmlFleetOverrides struct {
	InstanceType     string   `xml:"instanceType,omitempty"`
	SubnetID         string   `xml:"subnetId,omitempty"`
	AvailabilityZone string   `xml:"availabilityZone,omitempty"`
	ImageID          string   `xml:"imageId,omitempty"`
	MaxPrice         string   `xml:"maxPrice,omitempty"`
	Priority         *float64 `xml:"priority,omitempty"`
}

// createFleet launches an instant fleet: for each capacity type asked for, every override is
// checked, those that cannot launch are reported in the errorSet, and all instances of that
// capacity type launch in the one pool the allocation strategy picks. A repeated ClientToken
// returns the first response and launches nothing.
func (s *Server) createFleet(p queryParams) (*createFleetResponse, error) {
	req, err := parseFleetRequest(p)
	if err != nil {
		return nil, err
	}
	if d := s.launchLatency(); d > 0 {
		<-s.clock.After(d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.clientToken != "" {
		if rec, ok := s.fleets[req.clientToken]; ok {
			if rec.fingerprint != req.fingerprint {
				return nil, newAPIError("IdempotentParameterMismatch", "The client token %s was used before with different parameters.", req.clientToken)
			}
			again := *rec.response
			return &again, nil
		}
	}
	resp := s.launchFleet(req)
	if req.clientToken != "" {
		s.fleets[req.clientToken] = &fleetRecord{fingerprint: req.fingerprint, response: resp}
	}
	return resp, nil
}

// parseFleetRequest decodes and checks a CreateFleet request.
func parseFleetRequest(p queryParams) (fleetRequest, error) {
	req := fleetRequest{
		clientToken:      p.str("ClientToken"),
		spotStrategy:     p.str("SpotOptions.AllocationStrategy"),
		onDemandStrategy: p.str("OnDemandOptions.AllocationStrategy"),
		capacity:         map[string]int{},
	}
	if t := p.str("Type"); t != "instant" {
		return req, newAPIError("UnsupportedOperation", "The local endpoint launches only fleets of type instant, not %q.", t)
	}
	if _, ok := spotStrategies[req.spotStrategy]; !ok {
		return req, invalidParameter("The spot allocation strategy '%s' is invalid.", req.spotStrategy)
	}
	if _, ok := onDemandStrategies[req.onDemandStrategy]; !ok {
		return req, invalidParameter("The on-demand allocation strategy '%s' is invalid.", req.onDemandStrategy)
	}
	if !p.has("TargetCapacitySpecification.TotalTargetCapacity") {
		return req, newAPIError(codeMissingParameter, "The request must contain the parameter TargetCapacitySpecification.TotalTargetCapacity")
	}
	total, err := p.integer("TargetCapacitySpecification.TotalTargetCapacity")
	if err != nil {
		return req, err
	}
	onDemand, err := p.integer("TargetCapacitySpecification.OnDemandTargetCapacity")
	if err != nil {
		return req, err
	}
	spot, err := p.integer("TargetCapacitySpecification.SpotTargetCapacity")
	if err != nil {
		return req, err
	}
	if total < 1 || total > maxFleetCapacity || onDemand < 0 || spot < 0 || onDemand+spot > total {
		return req, invalidParameter("The target capacity (total %d, on-demand %d, spot %d) is invalid: the total must be 1 to %d and hold the others.", total, onDemand, spot, maxFleetCapacity)
	}
	defaultType := p.str("TargetCapacitySpecification.DefaultTargetCapacityType")
	if defaultType != capacitySpot && defaultType != capacityOnDemand {
		return req, invalidParameter("The default target capacity type '%s' is invalid; use spot or on-demand.", defaultType)
	}
	req.capacity[capacityOnDemand] = onDemand
	req.capacity[capacitySpot] = spot
	req.capacity[defaultType] += total - onDemand - spot
	if req.tagSpecs, err = p.tagSpecifications("TagSpecification"); err != nil {
		return req, err
	}
	for _, m := range p.members("LaunchTemplateConfigs") {
		cfg := fleetConfig{spec: xmlFleetLaunchTemplateSpec{
			LaunchTemplateID:   p.str(m + ".LaunchTemplateSpecification.LaunchTemplateId"),
			LaunchTemplateName: p.str(m + ".LaunchTemplateSpecification.LaunchTemplateName"),
			Version:            p.str(m + ".LaunchTemplateSpecification.Version"),
		}}
		if cfg.spec.LaunchTemplateID == "" && cfg.spec.LaunchTemplateName == "" {
			return req, newAPIError(codeMissingParameter, "%s.LaunchTemplateSpecification needs a LaunchTemplateId or a LaunchTemplateName.", m)
		}
		for _, om := range p.members(m + ".Overrides") {
			o := fleetOverride{
				instanceType: p.str(om + ".InstanceType"),
				subnetID:     p.str(om + ".SubnetId"),
				zone:         p.str(om + ".AvailabilityZone"),
				imageID:      p.str(om + ".ImageId"),
				maxPrice:     p.str(om + ".MaxPrice"),
			}
			if o.priority, err = p.optionalFloat(om + ".Priority"); err != nil {
				return req, err
			}
			cfg.overrides = append(cfg.overrides, o)
		}
		if len(cfg.overrides) == 0 {
			cfg.overrides = []fleetOverride{{}}
		}
		req.configs = append(req.configs, cfg)
	}
	if len(req.configs) == 0 {
		return req, newAPIError(codeMissingParameter, "The request must contain the parameter LaunchTemplateConfigs")
	}
	fingerprint := url.Values{}
	for k, v := range p {
		if k != "Version" {
			fingerprint[k] = v
		}
	}
	req.fingerprint = fingerprint.Encode()
	return req, nil
}

// launchFleet launches the instances of a checked request. s.mu must be held.
func (s *Server) launchFleet(req fleetRequest) *createFleetResponse {
	now := s.clock.Now()
	resp := &createFleetResponse{FleetID: "fleet-" + uuidFrom(s.clusterName, "fleet", strconv.FormatUint(s.nextSequence(), 10))}
	limit, shortfallCode := s.fleetLimit()
	for _, capacityType := range []string{capacityOnDemand, capacitySpot} {
		count := req.capacity[capacityType]
		if count == 0 {
			continue
		}
		shortfall := 0
		if limit >= 0 {
			shortfall = max(0, count-limit)
			count -= shortfall
			limit -= count
		}
		var candidates []fleetCandidate
		for _, cfg := range req.configs {
			for _, o := range cfg.overrides {
				c, err := s.checkOverride(cfg, o, capacityType)
				if err != nil {
					resp.Errors = append(resp.Errors, xmlFleetError{
						LaunchTemplateAndOverrides: c.response,
						Lifecycle:                  capacityType,
						ErrorCode:                  err.code,
						ErrorMessage:               err.message,
					})
					continue
				}
				candidates = append(candidates, c)
			}
		}
		if len(candidates) == 0 {
			continue
		}
		byPriority := spotStrategies[req.spotStrategy]
		if capacityType == capacityOnDemand {
			byPriority = onDemandStrategies[req.onDemandStrategy]
		}
		best := chooseCandidate(candidates, byPriority)
		if shortfall > 0 {
			resp.Errors = append(resp.Errors, xmlFleetError{
				LaunchTemplateAndOverrides: best.response,
				Lifecycle:                  capacityType,
				ErrorCode:                  shortfallCode,
				ErrorMessage:               fmt.Sprintf("The fleet launched %d of %d %s instances asked for.", count, count+shortfall, capacityType),
			})
		}
		reservationID := s.newID("r", 17)
		launched := xmlFleetInstance{
			LaunchTemplateAndOverrides: best.response,
			Lifecycle:                  capacityType,
			InstanceType:               best.instanceType.Name,
			AvailabilityZone:           best.subnet.zone.name,
			SubnetID:                   best.subnet.id,
		}
		for range count {
			i, err := s.launchInstance(best, capacityType, req, resp.FleetID, reservationID, now)
			if err != nil {
				resp.Errors = append(resp.Errors, xmlFleetError{
					LaunchTemplateAndOverrides: best.response,
					Lifecycle:                  capacityType,
					ErrorCode:                  err.code,
					ErrorMessage:               err.message,
				})
				break
			}
			launched.InstanceIDs = append(launched.InstanceIDs, i.id)
		}
		if len(launched.InstanceIDs) > 0 {
			resp.Instances = append(resp.Instances, launched)
		}
	}
	return resp
}

// chooseCandidate picks the pool to launch in: the lowest priority number when the strategy is
// prioritized, else the lowest price; ties go to the cheaper, then the earlier override.
func chooseCandidate(candidates []fleetCandidate, byPriority bool) fleetCandidate {
	best := candidates[0]
	for _, c := range candidates[1:] {
		if byPriority && c.priority != best.priority {
			if c.priority < best.priority {
				best = c
			}
			continue
		}
		if c.price < best.price {
			best = c
		}
	}
	return best
}

// checkOverride resolves an override against its launch template, the subnets, the AMIs and the
// catalog's offerings. It returns the candidate, whose response part is filled in even when an
// error says why the override cannot launch as the capacity type. s.mu must be held.
func (s *Server) checkOverride(cfg fleetConfig, o fleetOverride, capacityType string) (fleetCandidate, *apiError) {
	c := fleetCandidate{
		response: xmlLaunchTemplateAndOverrides{
			LaunchTemplateSpecification: cfg.spec,
			Overrides: xmlFleetOverrides{
				InstanceType:     o.instanceType,
				SubnetID:         o.subnetID,
				AvailabilityZone: o.zone,
				ImageID:          o.imageID,
				MaxPrice:         o.maxPrice,
				Priority:         o.priority,
			},
		},
		priority: math.Inf(1),
	}
	if o.priority != nil {
		c.priority = *o.priority
	}
	var err error
	if cfg.spec.LaunchTemplateID != "" {
		c.lt, err = s.launchTemplateByID(cfg.spec.LaunchTemplateID)
	} else {
		c.lt, err = s.launchTemplateByName(cfg.spec.LaunchTemplateName)
	}
	if err != nil {
		return c, asAPIError(err)
	}
	c.response.LaunchTemplateSpecification.LaunchTemplateID = c.lt.id
	c.response.LaunchTemplateSpecification.LaunchTemplateName = c.lt.name
	if !knownVersion(cfg.spec.Version) {
		return c, newAPIError(codeLaunchTemplateVersionAbsent, "Could not find launch template version %s for template %s.", cfg.spec.Version, c.lt.id)
	}

	typeName := o.instanceType
	if typeName == "" {
		typeName = c.lt.data.instanceType
	}
	c.response.Overrides.InstanceType = typeName
	if typeName == "" {
		return c, newAPIError(codeMissingParameter, "No instance type was given by the override or the launch template.")
	}
	var ok bool
	if c.instanceType, ok = s.typesByName[typeName]; !ok {
		return c, invalidParameter("Invalid value '%s' for InstanceType.", typeName)
	}

	if c.subnet, err = s.overrideSubnet(o); err != nil {
		return c, asAPIError(err)
	}
	c.response.Overrides.SubnetID = c.subnet.id
	c.response.Overrides.AvailabilityZone = c.subnet.zone.name
	if c.subnet.available() == 0 {
		return c, insufficientFreeAddresses(c.subnet)
	}

	c.imageID = o.imageID
	if c.imageID == "" {
		c.imageID = c.lt.data.imageID
	}
	img := s.imageByID(c.imageID)
	switch {
	case c.imageID == "":
		return c, newAPIError(codeMissingParameter, "No AMI was given by the override or the launch template.")
	case img == nil:
		return c, newAPIError("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", c.imageID)
	case img.arch != ec2Arch(c.instanceType.Arch):
		return c, invalidParameter("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again.", ec2Arch(c.instanceType.Arch), img.arch)
	}
	for _, id := range c.lt.data.securityGroupIDs {
		if s.securityGroupByID(id) == nil {
			return c, newAPIError("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}

	zoneName := c.subnet.zone.name
	price, offered, soldInZone := offeringPrice(c.instanceType, zoneName, capacityType)
	pool := CapacityPool{InstanceType: typeName, Zone: zoneName, CapacityType: capacityType}
	if soldInZone && capacityType == capacityOnDemand {
		var rerr *apiError
		if c.reservation, rerr = s.launchReservation(c, s.clock.Now()); rerr != nil {
			return c, rerr
		}
	}
	switch {
	case !soldInZone:
		return c, newAPIError(codeUnsupported, "Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", typeName, zoneName)
	case c.reservation != nil:
		// Reserved capacity is there even when the pool has none to sell.
		c.offeredOutsideReservations = offered && !s.insufficient[pool]
	case !offered || s.insufficient[pool]:
		if capacityType == capacitySpot {
			return c, newAPIError(codeInsufficientCapacity, "There is no Spot capacity available that matches your request.")
		}
		return c, newAPIError(codeInsufficientCapacity, "We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", typeName, zoneName)
	}
	if capacityType == capacitySpot && o.maxPrice != "" {
		if maxPrice, perr := strconv.ParseFloat(o.maxPrice, 64); perr == nil && maxPrice < price {
			return c, newAPIError("SpotMaxPriceTooLow", "Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %s.", o.maxPrice, strconv.FormatFloat(price, 'f', -1, 64))
		}
	}
	c.price = price
	return c, nil
}

// overrideSubnet returns the override's subnet: the one named, else the first in the named zone,
// else the first seeded subnet. s.mu must be held.
func (s *Server) overrideSubnet(o fleetOverride) (*subnet, error) {
	if o.subnetID != "" {
		sn := s.subnetByID(o.subnetID)
		if sn == nil {
			return nil, newAPIError("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", o.subnetID)
		}
		if o.zone != "" && o.zone != sn.zone.name {
			return nil, invalidParameter("The subnet %s is in %s, not in the requested Availability Zone %s.", sn.id, sn.zone.name, o.zone)
		}
		return sn, nil
	}
	for _, sn := range s.subnets {
		if o.zone == "" || sn.zone.name == o.zone {
			return sn, nil
		}
	}
	return nil, invalidParameter("Invalid availability zone: [%s]", o.zone)
}

// insufficientFreeAddresses is EC2's error for a launch into a subnet without a free address.
func insufficientFreeAddresses(sn *subnet) *apiError {
	return newAPIError(codeInsufficientFreeAddresses, "There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", sn.id)
}

// offeringPrice returns the price of a type in a zone as a capacity type, whether it is
// offered so, and whether the zone sells the type at all.
func offeringPrice(t *catalog.InstanceType, zoneName, capacityType string) (float64, bool, bool) {
	soldInZone := false
	for _, o := range t.Offerings {
		if o.Zone != zoneName {
			continue
		}
		soldInZone = true
		if o.CapacityType == capacityType {
			return o.PricePerHour, true, true
		}
	}
	return 0, false, soldInZone
}

// launchInstance creates one instance of a candidate. s.mu must be held.
func (s *Server) launchInstance(c fleetCandidate, capacityType string, req fleetRequest, fleetID, reservationID string, now time.Time) (*instance, *apiError) {
	sn := c.subnet
	var reservation *capacityReservation
	if capacityType == capacityOnDemand {
		// Each instance takes a slot, so a reservation may fill up in the middle of a fleet.
		var err *apiError
		if reservation, err = s.launchReservation(c, now); err != nil {
			return nil, err
		}
		if reservation == nil && c.reservation != nil && !c.offeredOutsideReservations {
			return nil, newAPIError(codeInsufficientCapacity, "We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", c.instanceType.Name, sn.zone.name)
		}
	}
	ip, ok := sn.takeAddress()
	if !ok {
		return nil, insufficientFreeAddresses(sn)
	}
	i := &instance{
		id:            s.newID("i", 17),
		reservationID: reservationID,
		instanceType:  c.instanceType,
		zone:          sn.zone,
		subnetID:      sn.id,
		vpcID:         sn.vpcID,
		imageID:       c.imageID,
		capacityType:  capacityType,
		pricePerHour:  c.price,
		privateIP:     ip.String(),
		privateDNS:    s.privateDNSName(ip.String()),
		data:          c.lt.data,
		launchedAt:    now,
	}
	if reservation != nil {
		i.capacityReservationID = reservation.id
		if reservation.kind == reservationTypeCapacityBlock {
			// availableAt took no launch past this moment, so it is still to come.
			s.terminateAt(i.id, reservation.end.Add(-capacityBlockTerminationLead))
		}
	}
	i.pendingFor, i.bootFor, i.neverRegister = s.launchTiming()
	if capacityType == capacitySpot {
		i.spotRequestID = "sir-" + hexDigits(8, i.id, "spot")
	}
	i.tags = mergeTags(tagsFor(c.lt.data.tagSpecifications, "instance"), tagsFor(req.tagSpecs, "instance"))
	i.tags = mergeTags(i.tags, []tag{
		{"aws:ec2:fleet-id", fleetID},
		{"aws:ec2launchtemplate:id", c.lt.id},
		{"aws:ec2launchtemplate:version", "1"},
	})
	s.instances = append(s.instances, i)
	s.launched++
	s.logger.V(2).Info("launched instance", "instance", i.id, "instanceType", i.instanceType.Name, "zone", i.zone.name, "capacityType", capacityType, "privateDNSName", i.privateDNS)
	return i, nil
}

// privateDNSName is EC2's internal host name for an address, e.g. ip-10-0-64-4.ec2.internal.
func (s *Server) privateDNSName(ip string) string {
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if s.region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + s.region + ".compute.internal"
}

// setInsufficientCapacity replaces the pools that report InsufficientInstanceCapacity.
func (s *Server) setInsufficientCapacity(pools []CapacityPool) error {
	set := make(map[CapacityPool]bool, len(pools))
	for _, p := range pools {
		if _, ok := s.typesByName[p.InstanceType]; !ok {
			return fmt.Errorf("unknown instance type %q", p.InstanceType)
		}
		if p.CapacityType != capacitySpot && p.CapacityType != capacityOnDemand {
			return fmt.Errorf("capacity type of %s in %s must be spot or on-demand, got %q", p.InstanceType, p.Zone, p.CapacityType)
		}
		if !slices.ContainsFunc(s.zones, func(z zone) bool { return z.name == p.Zone }) {
			return fmt.Errorf("unknown zone %q", p.Zone)
		}
		set[p] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.insufficient = set
	return nil
}

// insufficientCapacity lists the pools that report InsufficientInstanceCapacity.
func (s *Server) insufficientCapacity() []CapacityPool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CapacityPool, 0, len(s.insufficient))
	for p := range s.insufficient {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b CapacityPool) int {
		return strings.Compare(a.InstanceType+"/"+a.Zone+"/"+a.CapacityType, b.InstanceType+"/"+b.Zone+"/"+b.CapacityType)
	})
	return out
}
