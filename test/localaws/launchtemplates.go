package localaws

import (
	"encoding/base64"
	"encoding/xml"
	"regexp"
	"strings"
	"time"
)

// launchTemplateNamePattern is EC2's rule for launch template names.
var launchTemplateNamePattern = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

// launchTemplate is a stored launch template. Only version 1 exists: the API for more
// versions is not served.
type launchTemplate struct {
	id          string
	name        string
	clientToken string
	created     time.Time
	tags        []tag
	data        launchTemplateData
}

// launchTemplateData is what a launch template asks of the instances it launches.
type launchTemplateData struct {
	imageID           string
	instanceType      string
	userData          string
	blockDevices      []blockDevice
	securityGroupIDs  []string
	instanceProfile   instanceProfile
	metadata          map[string]string
	tagSpecifications []tagSpecification
	// capacityReservationID is the reservation the template targets;
	// capacityReservationPreference is open (the default), none or capacity-reservations-only.
	capacityReservationID         string
	capacityReservationPreference string
}

// blockDevice is a block device mapping of a launch template.
type blockDevice struct {
	deviceName          string
	volumeSizeGiB       *int
	volumeType          string
	encrypted           *bool
	deleteOnTermination *bool
	iops                *int
	throughput          *int
	kmsKeyID            string
	snapshotID          string
}

// instanceProfile names an IAM instance profile by name or ARN.
type instanceProfile struct {
	name string
	arn  string
}

type launchTemplateResponse struct {
	XMLName xml.Name `xml:""`
	ec2Envelope
	LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
}

type xmlLaunchTemplate struct {
	LaunchTemplateID     string   `xml:"launchTemplateId"`
	LaunchTemplateName   string   `xml:"launchTemplateName"`
	CreateTime           string   `xml:"createTime"`
	CreatedBy            string   `xml:"createdBy"`
	DefaultVersionNumber int      `xml:"defaultVersionNumber"`
	LatestVersionNumber  int      `xml:"latestVersionNumber"`
	TagSet               []xmlTag `xml:"tagSet>item"`
}

type describeLaunchTemplatesResponse struct {
	XMLName xml.Name `xml:"DescribeLaunchTemplatesResponse"`
	ec2Envelope
	LaunchTemplates []xmlLaunchTemplate `xml:"launchTemplates>item"`
	NextToken       string              `xml:"nextToken,omitempty"`
}

// createLaunchTemplate stores a launch template. A repeated ClientToken returns the template
// it created before.
func (s *Server) createLaunchTemplate(p queryParams) (*launchTemplateResponse, error) {
	name := p.str("LaunchTemplateName")
	if name == "" {
		return nil, newAPIError(codeMissingParameter, "The request must contain the parameter LaunchTemplateName")
	}
	if !launchTemplateNamePattern.MatchString(name) {
		return nil, newAPIError("InvalidLaunchTemplateName.MalformedException", "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'")
	}
	if !hasPrefix(p, "LaunchTemplateData.") {
		return nil, newAPIError(codeMissingParameter, "The request must contain the parameter LaunchTemplateData")
	}
	data, err := parseLaunchTemplateData(p, "LaunchTemplateData")
	if err != nil {
		return nil, err
	}
	specs, err := p.tagSpecifications("TagSpecification")
	if err != nil {
		return nil, err
	}
	token := p.str("ClientToken")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lt := range s.launchTemplates {
		if token != "" && lt.clientToken == token {
			return s.launchTemplateResult("CreateLaunchTemplateResponse", lt), nil
		}
		if lt.name == name {
			return nil, newAPIError("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
		}
	}
	lt := &launchTemplate{
		id:          s.newID("lt", 17),
		name:        name,
		clientToken: token,
		created:     s.clock.Now().UTC(),
		tags:        tagsFor(specs, "launch-template"),
		data:        data,
	}
	s.launchTemplates = append(s.launchTemplates, lt)
	s.logger.V(2).Info("created launch template", "launchTemplate", lt.name, "id", lt.id)
	return s.launchTemplateResult("CreateLaunchTemplateResponse", lt), nil
}

// hasPrefix reports whether any field starts with the prefix.
func hasPrefix(p queryParams, prefix string) bool {
	for k := range p {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// parseLaunchTemplateData reads the launch template data under the prefix.
func parseLaunchTemplateData(p queryParams, prefix string) (launchTemplateData, error) {
	d := launchTemplateData{
		imageID:      p.str(prefix + ".ImageId"),
		instanceType: p.str(prefix + ".InstanceType"),
		userData:     p.str(prefix + ".UserData"),
		instanceProfile: instanceProfile{
			name: p.str(prefix + ".IamInstanceProfile.Name"),
			arn:  p.str(prefix + ".IamInstanceProfile.Arn"),
		},
		securityGroupIDs: p.strs(prefix + ".SecurityGroupId"),
		metadata:         map[string]string{},

		capacityReservationID:         p.str(prefix + ".CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"),
		capacityReservationPreference: p.str(prefix + ".CapacityReservationSpecification.CapacityReservationPreference"),
	}
	switch d.capacityReservationPreference {
	case "", "open", "none", "capacity-reservations-only":
	default:
		return d, invalidParameter("Invalid value '%s' for CapacityReservationPreference; use open, none or capacity-reservations-only.", d.capacityReservationPreference)
	}
	if d.capacityReservationID != "" && d.capacityReservationPreference != "" {
		return d, newAPIError("InvalidParameterCombination", "CapacityReservationPreference and CapacityReservationTarget cannot both be set.")
	}
	if d.userData != "" {
		if _, err := base64.StdEncoding.DecodeString(d.userData); err != nil {
			return d, newAPIError("InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
	}
	for _, ni := range p.members(prefix + ".NetworkInterface") {
		d.securityGroupIDs = append(d.securityGroupIDs, p.strs(ni+".SecurityGroupId")...)
	}
	for _, key := range []string{"HttpTokens", "HttpPutResponseHopLimit", "HttpEndpoint", "HttpProtocolIpv6", "InstanceMetadataTags"} {
		if v := p.str(prefix + ".MetadataOptions." + key); v != "" {
			d.metadata[key] = v
		}
	}
	for _, m := range p.members(prefix + ".BlockDeviceMapping") {
		bd := blockDevice{
			deviceName: p.str(m + ".DeviceName"),
			volumeType: p.str(m + ".Ebs.VolumeType"),
			kmsKeyID:   p.str(m + ".Ebs.KmsKeyId"),
			snapshotID: p.str(m + ".Ebs.SnapshotId"),
		}
		var err error
		if bd.volumeSizeGiB, err = p.optionalInt(m + ".Ebs.VolumeSize"); err != nil {
			return d, err
		}
		if bd.iops, err = p.optionalInt(m + ".Ebs.Iops"); err != nil {
			return d, err
		}
		if bd.throughput, err = p.optionalInt(m + ".Ebs.Throughput"); err != nil {
			return d, err
		}
		if bd.encrypted, err = p.optionalBool(m + ".Ebs.Encrypted"); err != nil {
			return d, err
		}
		if bd.deleteOnTermination, err = p.optionalBool(m + ".Ebs.DeleteOnTermination"); err != nil {
			return d, err
		}
		if bd.volumeSizeGiB != nil && (*bd.volumeSizeGiB < 1 || *bd.volumeSizeGiB > 65536) {
			return d, invalidParameter("Volume of %d GiB is out of range for %s; sizes are 1 to 65536 GiB.", *bd.volumeSizeGiB, bd.deviceName)
		}
		d.blockDevices = append(d.blockDevices, bd)
	}
	specs, err := p.tagSpecifications(prefix + ".TagSpecification")
	if err != nil {
		return d, err
	}
	d.tagSpecifications = specs
	return d, nil
}

// describeLaunchTemplates lists launch templates by name, id and filters.
func (s *Server) describeLaunchTemplates(p queryParams) (*describeLaunchTemplatesResponse, error) {
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := filterFields[*launchTemplate]{
		fields: map[string]func(*launchTemplate) []string{
			"launch-template-name": func(lt *launchTemplate) []string { return oneValue(lt.name) },
			"launch-template-id":   func(lt *launchTemplate) []string { return oneValue(lt.id) },
		},
		tags: func(lt *launchTemplate) []tag { return lt.tags },
	}.compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	names, ids := p.strs("LaunchTemplateName"), p.strs("LaunchTemplateId")
	s.mu.Lock()
	defer s.mu.Unlock()
	candidates := s.launchTemplates
	if len(names) > 0 || len(ids) > 0 {
		candidates = nil
		for _, id := range ids {
			lt, err := s.launchTemplateByID(id)
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, lt)
		}
		for _, name := range names {
			lt, err := s.launchTemplateByName(name)
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, lt)
		}
	}
	page, next, err := paginate(filterSlice(candidates, keep), maxResults, token, pageLimits{min: 1, max: 200, fallback: 200, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	resp := &describeLaunchTemplatesResponse{NextToken: next}
	for _, lt := range page {
		resp.LaunchTemplates = append(resp.LaunchTemplates, toXMLLaunchTemplate(lt))
	}
	return resp, nil
}

// deleteLaunchTemplate deletes a launch template by id or name.
func (s *Server) deleteLaunchTemplate(p queryParams) (*launchTemplateResponse, error) {
	id, name := p.str("LaunchTemplateId"), p.str("LaunchTemplateName")
	s.mu.Lock()
	defer s.mu.Unlock()
	var lt *launchTemplate
	var err error
	switch {
	case id != "":
		lt, err = s.launchTemplateByID(id)
	case name != "":
		lt, err = s.launchTemplateByName(name)
	default:
		err = newAPIError(codeMissingParameter, "The request must contain the parameter LaunchTemplateName or LaunchTemplateId")
	}
	if err != nil {
		return nil, err
	}
	for i, candidate := range s.launchTemplates {
		if candidate == lt {
			s.launchTemplates = append(s.launchTemplates[:i], s.launchTemplates[i+1:]...)
			break
		}
	}
	s.logger.V(2).Info("deleted launch template", "launchTemplate", lt.name, "id", lt.id)
	return s.launchTemplateResult("DeleteLaunchTemplateResponse", lt), nil
}

// launchTemplateByID finds a launch template. s.mu must be held.
func (s *Server) launchTemplateByID(id string) (*launchTemplate, error) {
	if !strings.HasPrefix(id, "lt-") {
		return nil, newAPIError("InvalidLaunchTemplateId.Malformed", "The specified ID for the launch template (%s) is not valid. Launch template IDs must begin with 'lt-'.", id)
	}
	for _, lt := range s.launchTemplates {
		if lt.id == id {
			return lt, nil
		}
	}
	return nil, newAPIError(codeLaunchTemplateIDNotFound, "The specified launch template, with template ID %s, does not exist.", id)
}

// launchTemplateByName finds a launch template. s.mu must be held.
func (s *Server) launchTemplateByName(name string) (*launchTemplate, error) {
	for _, lt := range s.launchTemplates {
		if lt.name == name {
			return lt, nil
		}
	}
	return nil, newAPIError(codeLaunchTemplateNameNotFound, "The specified launch template, with template name %s, does not exist.", name)
}

// launchTemplateResult wraps a launch template in the named response.
func (s *Server) launchTemplateResult(element string, lt *launchTemplate) *launchTemplateResponse {
	return &launchTemplateResponse{
		XMLName:        xml.Name{Local: element},
		LaunchTemplate: toXMLLaunchTemplate(lt),
	}
}

func toXMLLaunchTemplate(lt *launchTemplate) xmlLaunchTemplate {
	return xmlLaunchTemplate{
		LaunchTemplateID:     lt.id,
		LaunchTemplateName:   lt.name,
		CreateTime:           formatTime(lt.created),
		CreatedBy:            "arn:aws:iam::" + accountID + ":root",
		DefaultVersionNumber: 1,
		LatestVersionNumber:  1,
		TagSet:               toXMLTags(lt.tags),
	}
}

// knownVersion reports whether a launch template version exists: only version 1 does, which is
// also $Latest and $Default.
func knownVersion(version string) bool {
	switch version {
	case "", "$Latest", "$Default", "1":
		return true
	}
	return false
}
