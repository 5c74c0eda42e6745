package localaws

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// Instance states and their EC2 codes.
const (
	statePending      = "pending"
	stateRunning      = "running"
	stateShuttingDown = "shutting-down"
	stateTerminated   = "terminated"
)

var stateCodes = map[string]int{statePending: 0, stateRunning: 16, stateShuttingDown: 32, stateTerminated: 48}

// instance is a launched instance. Its state follows from the clock: pending until the launch
// delay has passed, then running; once terminated it is shutting-down for the shutdown delay,
// then terminated, and it is forgotten an hour later, as in EC2.
type instance struct {
	id            string
	reservationID string
	instanceType  *catalog.InstanceType
	zone          zone
	subnetID      string
	vpcID         string
	imageID       string
	capacityType  string
	pricePerHour  float64
	privateIP     string
	privateDNS    string
	spotRequestID string
	// capacityReservationID is the capacity reservation the instance was launched into.
	capacityReservationID string
	data                  launchTemplateData
	tags                  []tag
	launchedAt            time.Time
	terminatedAt          time.Time
	// pendingFor and bootFor are the launch and boot delays in force at launch.
	pendingFor, bootFor time.Duration
	// neverRegister keeps the simulated kubelet from registering a Node.
	neverRegister bool
	node          nodeRegistration
}

// stateAt returns the instance's state at the time.
func (s *Server) stateAt(i *instance, now time.Time) string {
	switch {
	case !i.terminatedAt.IsZero() && !now.Before(i.terminatedAt.Add(s.shutdownDelay)):
		return stateTerminated
	case !i.terminatedAt.IsZero():
		return stateShuttingDown
	case now.Before(i.launchedAt.Add(i.pendingFor)):
		return statePending
	default:
		return stateRunning
	}
}

// forgotten reports whether a terminated instance has dropped out of EC2's view.
func (s *Server) forgotten(i *instance, now time.Time) bool {
	return !i.terminatedAt.IsZero() && !now.Before(i.terminatedAt.Add(s.shutdownDelay+terminatedRetention))
}

// visibleInstances returns the instances EC2 still shows, in launch order. s.mu must be held.
func (s *Server) visibleInstances(now time.Time) []*instance {
	return filterSlice(s.instances, func(i *instance) bool { return !s.forgotten(i, now) })
}

// instanceByID returns a visible instance. s.mu must be held.
func (s *Server) instanceByID(id string, now time.Time) *instance {
	for _, i := range s.instances {
		if i.id == id && !s.forgotten(i, now) {
			return i
		}
	}
	return nil
}

// findInstances returns the visible instances with the ids, or EC2's error naming the ids that
// are malformed or unknown. s.mu must be held.
func (s *Server) findInstances(ids []string, now time.Time) ([]*instance, error) {
	var found []*instance
	var missing []string
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return nil, newAPIError("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if i := s.instanceByID(id, now); i != nil {
			found = append(found, i)
		} else {
			missing = append(missing, id)
		}
	}
	switch len(missing) {
	case 0:
		return found, nil
	case 1:
		return nil, newAPIError(codeInstanceNotFound, "The instance ID '%s' does not exist", missing[0])
	default:
		return nil, newAPIError(codeInstanceNotFound, "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
}

type describeInstancesResponse struct {
	XMLName xml.Name `xml:"DescribeInstancesResponse"`
	ec2Envelope
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	RequesterID   string        `xml:"requesterId,omitempty"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type xmlInstance struct {
	InstanceID            string              `xml:"instanceId"`
	ImageID               string              `xml:"imageId"`
	InstanceState         xmlInstanceState    `xml:"instanceState"`
	PrivateDNSName        string              `xml:"privateDnsName"`
	DNSName               string              `xml:"dnsName"`
	Reason                string              `xml:"reason"`
	AmiLaunchIndex        int                 `xml:"amiLaunchIndex"`
	InstanceType          string              `xml:"instanceType"`
	LaunchTime            string              `xml:"launchTime"`
	Placement             xmlPlacement        `xml:"placement"`
	Monitoring            xmlMonitoring       `xml:"monitoring"`
	SubnetID              string              `xml:"subnetId,omitempty"`
	VpcID                 string              `xml:"vpcId,omitempty"`
	PrivateIPAddress      string              `xml:"privateIpAddress,omitempty"`
	GroupSet              []xmlGroup          `xml:"groupSet>item"`
	StateReason           *xmlStateReason     `xml:"stateReason,omitempty"`
	Architecture          string              `xml:"architecture"`
	RootDeviceType        string              `xml:"rootDeviceType"`
	RootDeviceName        string              `xml:"rootDeviceName"`
	InstanceLifecycle     string              `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string              `xml:"spotInstanceRequestId,omitempty"`
	CapacityReservationID string              `xml:"capacityReservationId,omitempty"`
	VirtualizationType    string              `xml:"virtualizationType"`
	TagSet                []xmlTag            `xml:"tagSet>item"`
	Hypervisor            string              `xml:"hypervisor"`
	IamInstanceProfile    *xmlIAMProfile      `xml:"iamInstanceProfile,omitempty"`
	EbsOptimized          bool                `xml:"ebsOptimized"`
	EnaSupport            bool                `xml:"enaSupport"`
	MetadataOptions       *xmlMetadataOptions `xml:"metadataOptions,omitempty"`
	Platform              string              `xml:"platform,omitempty"`
	PlatformDetails       string              `xml:"platformDetails"`
	UsageOperation        string              `xml:"usageOperation"`
}

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlPlacement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	GroupName          string `xml:"groupName"`
	Tenancy            string `xml:"tenancy"`
}

type xmlMonitoring struct {
	State string `xml:"state"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xmlIAMProfile struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type xmlMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens,omitempty"`
	HTTPPutResponseHopLimit string `xml:"httpPutResponseHopLimit,omitempty"`
	HTTPEndpoint            string `xml:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        string `xml:"httpProtocolIpv6,omitempty"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags,omitempty"`
}

// instanceFilters are the DescribeInstances filters served; the state at now decides the
// instance-state filters.
func (s *Server) instanceFilters(now time.Time) filterFields[*instance] {
	return filterFields[*instance]{
		fields: map[string]func(*instance) []string{
			"instance-id":         func(i *instance) []string { return oneValue(i.id) },
			"instance-type":       func(i *instance) []string { return oneValue(i.instanceType.Name) },
			"instance-state-name": func(i *instance) []string { return oneValue(s.stateAt(i, now)) },
			"instance-state-code": func(i *instance) []string { return oneValue(strconv.Itoa(stateCodes[s.stateAt(i, now)])) },
			"availability-zone":   func(i *instance) []string { return oneValue(i.zone.name) },
			"subnet-id":           func(i *instance) []string { return oneValue(i.subnetID) },
			"vpc-id":              func(i *instance) []string { return oneValue(i.vpcID) },
			"image-id":            func(i *instance) []string { return oneValue(i.imageID) },
			"private-dns-name":    func(i *instance) []string { return oneValue(i.privateDNS) },
			"private-ip-address":  func(i *instance) []string { return oneValue(i.privateIP) },
			"reservation-id":      func(i *instance) []string { return oneValue(i.reservationID) },
			"architecture":        func(i *instance) []string { return oneValue(ec2Arch(i.instanceType.Arch)) },
			"instance-lifecycle": func(i *instance) []string {
				if i.capacityType == capacitySpot {
					return oneValue(capacitySpot)
				}
				return nil
			},
		},
		tags: func(i *instance) []tag { return i.tags },
	}
}

// describeInstances lists instances by id and filters, grouped by reservation.
func (s *Server) describeInstances(p queryParams) (*describeInstancesResponse, error) {
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	keep, err := s.instanceFilters(now).compile(filters)
	if err != nil {
		return nil, err
	}
	candidates := s.visibleInstances(now)
	if ids := p.strs("InstanceId"); len(ids) > 0 {
		if candidates, err = s.findInstances(ids, now); err != nil {
			return nil, err
		}
	}
	found := filterSlice(candidates, keep)
	page, next, err := paginate(found, maxResults, token, pageLimits{min: 5, max: 1000, fallback: len(found) + 1, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	resp := &describeInstancesResponse{NextToken: next}
	for _, i := range page {
		n := len(resp.Reservations)
		if n == 0 || resp.Reservations[n-1].ReservationID != i.reservationID {
			resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: i.reservationID, OwnerID: accountID})
			n++
		}
		resp.Reservations[n-1].Instances = append(resp.Reservations[n-1].Instances, s.toXMLInstance(i, now))
	}
	return resp, nil
}

// toXMLInstance describes an instance the way EC2 does.
func (s *Server) toXMLInstance(i *instance, now time.Time) xmlInstance {
	state := s.stateAt(i, now)
	out := xmlInstance{
		InstanceID:         i.id,
		ImageID:            i.imageID,
		InstanceState:      xmlInstanceState{Code: stateCodes[state], Name: state},
		PrivateDNSName:     i.privateDNS,
		InstanceType:       i.instanceType.Name,
		LaunchTime:         formatTime(i.launchedAt),
		Placement:          xmlPlacement{AvailabilityZone: i.zone.name, AvailabilityZoneID: i.zone.id, Tenancy: "default"},
		Monitoring:         xmlMonitoring{State: "disabled"},
		Architecture:       ec2Arch(i.instanceType.Arch),
		RootDeviceType:     "ebs",
		RootDeviceName:     "/dev/xvda",
		VirtualizationType: "hvm",
		TagSet:             toXMLTags(i.tags),
		Hypervisor:         "xen",
		EbsOptimized:       true,
		EnaSupport:         true,
		PlatformDetails:    productLinux,
		UsageOperation:     "RunInstances",
	}
	if img := s.imageByID(i.imageID); img != nil {
		out.Platform, out.PlatformDetails, out.UsageOperation = img.platform, imagePlatformDetails(img), imageUsageOperation(img)
		out.RootDeviceName = img.rootDevice
	}
	if state != stateTerminated {
		out.SubnetID = i.subnetID
		out.VpcID = i.vpcID
		out.PrivateIPAddress = i.privateIP
		for _, id := range i.data.securityGroupIDs {
			if g := s.securityGroupByID(id); g != nil {
				out.GroupSet = append(out.GroupSet, xmlGroup{GroupID: g.id, GroupName: g.name})
			}
		}
	}
	if state == stateShuttingDown || state == stateTerminated {
		out.Reason = fmt.Sprintf("User initiated (%s)", i.terminatedAt.UTC().Format("2006-01-02 15:04:05 GMT"))
		out.StateReason = &xmlStateReason{Code: "Client.UserInitiatedShutdown", Message: "Client.UserInitiatedShutdown: User initiated shutdown"}
	}
	if i.capacityType == capacitySpot {
		out.InstanceLifecycle = capacitySpot
		out.SpotInstanceRequestID = i.spotRequestID
	}
	out.CapacityReservationID = i.capacityReservationID
	if arn := profileARN(i.data.instanceProfile); arn != "" {
		out.IamInstanceProfile = &xmlIAMProfile{Arn: arn, ID: "AIPA" + strings.ToUpper(hexDigits(17, arn))}
	}
	if len(i.data.metadata) > 0 {
		out.MetadataOptions = &xmlMetadataOptions{
			State:                   "applied",
			HTTPTokens:              i.data.metadata["HttpTokens"],
			HTTPPutResponseHopLimit: i.data.metadata["HttpPutResponseHopLimit"],
			HTTPEndpoint:            i.data.metadata["HttpEndpoint"],
			HTTPProtocolIPv6:        i.data.metadata["HttpProtocolIpv6"],
			InstanceMetadataTags:    i.data.metadata["InstanceMetadataTags"],
		}
	}
	return out
}

// profileARN returns the ARN of an instance profile given by name or ARN.
func profileARN(p instanceProfile) string {
	if p.arn != "" {
		return p.arn
	}
	if p.name != "" {
		return "arn:aws:iam::" + accountID + ":instance-profile/" + p.name
	}
	return ""
}

type terminateInstancesResponse struct {
	XMLName xml.Name `xml:"TerminateInstancesResponse"`
	ec2Envelope
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

type xmlStateChange struct {
	InstanceID    string           `xml:"instanceId"`
	CurrentState  xmlInstanceState `xml:"currentState"`
	PreviousState xmlInstanceState `xml:"previousState"`
}

// terminate starts shutting an instance down, which gives its address back to its subnet.
// s.mu must be held.
func (s *Server) terminate(i *instance, at time.Time) {
	i.terminatedAt = at
	if sn := s.subnetByID(i.subnetID); sn != nil {
		sn.releaseAddress(i.privateIP)
	}
}

// terminateInstances starts shutting down instances. Terminating a terminated instance again
// succeeds and changes nothing; an unknown id fails the whole request.
func (s *Server) terminateInstances(p queryParams) (*terminateInstancesResponse, error) {
	ids := p.strs("InstanceId")
	if len(ids) == 0 {
		return nil, newAPIError(codeMissingParameter, "The request must contain the parameter InstanceId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	found, err := s.findInstances(ids, now)
	if err != nil {
		return nil, err
	}
	resp := &terminateInstancesResponse{}
	for _, i := range found {
		before := s.stateAt(i, now)
		if i.terminatedAt.IsZero() {
			s.terminate(i, now)
			s.logger.V(2).Info("terminating instance", "instance", i.id, "previousState", before)
		}
		after := s.stateAt(i, now)
		resp.Instances = append(resp.Instances, xmlStateChange{
			InstanceID:    i.id,
			CurrentState:  xmlInstanceState{Code: stateCodes[after], Name: after},
			PreviousState: xmlInstanceState{Code: stateCodes[before], Name: before},
		})
	}
	return resp, nil
}

type createTagsResponse struct {
	XMLName xml.Name `xml:"CreateTagsResponse"`
	ec2Envelope
	Return bool `xml:"return"`
}

// createTags tags instances and launch templates. Every resource is checked before any is
// changed, so a failing request changes nothing.
func (s *Server) createTags(p queryParams) (*createTagsResponse, error) {
	ids := p.strs("ResourceId")
	if len(ids) == 0 {
		return nil, newAPIError(codeMissingParameter, "The request must contain the parameter ResourceId")
	}
	tags, err := p.tags("Tag")
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, newAPIError(codeMissingParameter, "The request must contain the parameter Tag")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var apply []*[]tag
	for _, id := range ids {
		var target *[]tag
		switch {
		case strings.HasPrefix(id, "i-"):
			found, err := s.findInstances([]string{id}, now)
			if err != nil {
				return nil, err
			}
			target = &found[0].tags
		case strings.HasPrefix(id, "lt-"):
			lt, err := s.launchTemplateByID(id)
			if err != nil {
				return nil, err
			}
			target = &lt.tags
		default:
			return nil, newAPIError("InvalidID", "The ID '%s' is not valid: the local endpoint tags only instances and launch templates.", id)
		}
		if err := validateTags(userTags(*target), tags); err != nil {
			return nil, err
		}
		apply = append(apply, target)
	}
	for _, target := range apply {
		*target = mergeTags(*target, tags)
	}
	return &createTagsResponse{Return: true}, nil
}

// userTags drops the aws: tags EC2 adds itself, which do not count against the tag limit.
func userTags(tags []tag) []tag {
	return slices.DeleteFunc(slices.Clone(tags), func(t tag) bool { return strings.HasPrefix(t.key, "aws:") })
}

// forgetTerminated drops instances that left EC2's view and whose Node, if any, is gone.
func (s *Server) forgetTerminated() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.instances = slices.DeleteFunc(s.instances, func(i *instance) bool {
		return s.forgotten(i, now) && !i.node.registered
	})
}
