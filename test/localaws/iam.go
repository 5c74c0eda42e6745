package localaws

import (
	"bytes"
	"encoding/xml"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// IAM speaks the AWS Query protocol: form requests like EC2's, told apart by their API version.
const (
	iamVersion   = "2010-05-08"
	iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"
	// maxRolesPerInstanceProfile is IAM's quota of roles in an instance profile.
	maxRolesPerInstanceProfile = 1
)

// iamNamePattern is IAM's rule for instance profile and role names.
var iamNamePattern = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)

// iamInstanceProfile is an IAM instance profile. Roles are not modelled beyond their names: any
// role name may be added.
type iamInstanceProfile struct {
	name    string
	id      string
	path    string
	created time.Time
	roles   []string
	tags    []tag
}

type iamResponse struct {
	XMLName  xml.Name `xml:""`
	Xmlns    string   `xml:"xmlns,attr"`
	Result   any      `xml:",omitempty"`
	Metadata struct {
		RequestID string `xml:"RequestId"`
	} `xml:"ResponseMetadata"`
}

type iamInstanceProfileResult struct {
	XMLName         xml.Name              `xml:""`
	InstanceProfile xmlIAMInstanceProfile `xml:"InstanceProfile"`
}

type xmlIAMInstanceProfile struct {
	InstanceProfileID   string       `xml:"InstanceProfileId"`
	InstanceProfileName string       `xml:"InstanceProfileName"`
	Path                string       `xml:"Path"`
	Arn                 string       `xml:"Arn"`
	CreateDate          string       `xml:"CreateDate"`
	Roles               []xmlIAMRole `xml:"Roles>member"`
	Tags                []xmlIAMTag  `xml:"Tags>member"`
}

type xmlIAMRole struct {
	Path       string `xml:"Path"`
	RoleName   string `xml:"RoleName"`
	RoleID     string `xml:"RoleId"`
	Arn        string `xml:"Arn"`
	CreateDate string `xml:"CreateDate"`
}

type xmlIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type iamErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Error     iamError `xml:"Error"`
	RequestID string   `xml:"RequestId"`
}

type iamError struct {
	Type    string `xml:"Type"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// iamStatus is the HTTP status IAM answers an error code with.
func iamStatus(code string) int {
	switch code {
	case "NoSuchEntity":
		return http.StatusNotFound
	case "EntityAlreadyExists", "LimitExceeded", "DeleteConflict":
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// serveIAM handles one IAM request.
func (s *Server) serveIAM(w http.ResponseWriter, requestID string, p queryParams) {
	action := p.str("Action")
	s.logger.V(4).Info("IAM request", "action", action, "requestID", requestID)
	result, err := s.iamAction(action, p)
	if err != nil {
		s.writeIAMError(w, requestID, err)
		return
	}
	resp := iamResponse{XMLName: xml.Name{Local: action + "Response"}, Xmlns: iamNamespace, Result: result}
	resp.Metadata.RequestID = requestID
	var body bytes.Buffer
	body.WriteString(xml.Header)
	if err := xml.NewEncoder(&body).Encode(resp); err != nil {
		s.writeIAMError(w, requestID, err)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(body.Bytes())
}

// iamAction runs one IAM action and returns its result element, nil for actions without one.
func (s *Server) iamAction(action string, p queryParams) (any, error) {
	name := p.str("InstanceProfileName")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch action {
	case "GetInstanceProfile":
		ip, err := s.instanceProfileByName(name)
		if err != nil {
			return nil, err
		}
		return s.instanceProfileResult(action, ip), nil
	case "CreateInstanceProfile":
		return s.createInstanceProfile(p, name)
	case "AddRoleToInstanceProfile":
		return nil, s.addRoleToInstanceProfile(name, p.str("RoleName"))
	case "RemoveRoleFromInstanceProfile":
		return nil, s.removeRoleFromInstanceProfile(name, p.str("RoleName"))
	case "DeleteInstanceProfile":
		return nil, s.deleteInstanceProfile(name)
	default:
		return nil, newAPIError("InvalidAction", "The action %s is not valid for this web service.", action)
	}
}

// addRoleToInstanceProfile adds a role, up to IAM's quota. s.mu must be held.
func (s *Server) addRoleToInstanceProfile(name, role string) error {
	if !iamNamePattern.MatchString(role) {
		return newAPIError("ValidationError", "The role name %q must be 1 to 128 letters, digits or +=,.@_- characters.", role)
	}
	ip, err := s.instanceProfileByName(name)
	if err != nil {
		return err
	}
	if len(ip.roles) >= maxRolesPerInstanceProfile {
		return newAPIError("LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: %d", maxRolesPerInstanceProfile)
	}
	ip.roles = append(ip.roles, role)
	return nil
}

// removeRoleFromInstanceProfile removes a role. s.mu must be held.
func (s *Server) removeRoleFromInstanceProfile(name, role string) error {
	ip, err := s.instanceProfileByName(name)
	if err != nil {
		return err
	}
	i := slices.Index(ip.roles, role)
	if i < 0 {
		return newAPIError("NoSuchEntity", "The role with name %s cannot be found in instance profile %s.", role, name)
	}
	ip.roles = slices.Delete(ip.roles, i, i+1)
	return nil
}

// deleteInstanceProfile deletes an instance profile that holds no role. s.mu must be held.
func (s *Server) deleteInstanceProfile(name string) error {
	ip, err := s.instanceProfileByName(name)
	if err != nil {
		return err
	}
	if len(ip.roles) > 0 {
		return newAPIError("DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
	}
	delete(s.instanceProfiles, strings.ToLower(name))
	return nil
}

// createInstanceProfile creates an instance profile. s.mu must be held.
func (s *Server) createInstanceProfile(p queryParams, name string) (any, error) {
	if !iamNamePattern.MatchString(name) {
		return nil, newAPIError("ValidationError", "The instance profile name %q must be 1 to 128 letters, digits or +=,.@_- characters.", name)
	}
	if _, ok := s.instanceProfiles[strings.ToLower(name)]; ok {
		return nil, newAPIError("EntityAlreadyExists", "Instance Profile %s already exists.", name)
	}
	tags, err := p.tags("Tags.member")
	if err != nil {
		return nil, err
	}
	if err := validateTags(nil, tags); err != nil {
		return nil, newAPIError("ValidationError", "%s", asAPIError(err).message)
	}
	path := p.str("Path")
	if path == "" {
		path = "/"
	}
	ip := &iamInstanceProfile{
		name:    name,
		id:      "AIPA" + strings.ToUpper(hexDigits(17, s.clusterName, "instance-profile", strconv.FormatUint(s.nextSequence(), 10))),
		path:    path,
		created: s.clock.Now().UTC(),
		tags:    sortedTags(tags...),
	}
	// IAM names are unique without regard to case.
	s.instanceProfiles[strings.ToLower(name)] = ip
	s.logger.V(2).Info("created instance profile", "instanceProfile", name)
	return s.instanceProfileResult("CreateInstanceProfile", ip), nil
}

// instanceProfileByName finds an instance profile. s.mu must be held.
func (s *Server) instanceProfileByName(name string) (*iamInstanceProfile, error) {
	ip, ok := s.instanceProfiles[strings.ToLower(name)]
	if !ok {
		return nil, newAPIError("NoSuchEntity", "Instance Profile %s cannot be found.", name)
	}
	return ip, nil
}

// instanceProfileResult describes an instance profile in the named action's result element.
func (s *Server) instanceProfileResult(action string, ip *iamInstanceProfile) *iamInstanceProfileResult {
	out := &iamInstanceProfileResult{
		XMLName: xml.Name{Local: action + "Result"},
		InstanceProfile: xmlIAMInstanceProfile{
			InstanceProfileID:   ip.id,
			InstanceProfileName: ip.name,
			Path:                ip.path,
			Arn:                 "arn:aws:iam::" + accountID + ":instance-profile" + ip.path + ip.name,
			CreateDate:          ip.created.Format(time.RFC3339),
		},
	}
	for _, role := range ip.roles {
		out.InstanceProfile.Roles = append(out.InstanceProfile.Roles, xmlIAMRole{
			Path:       "/",
			RoleName:   role,
			RoleID:     "AROA" + strings.ToUpper(hexDigits(17, "role", role)),
			Arn:        "arn:aws:iam::" + accountID + ":role/" + role,
			CreateDate: s.startedAt.Format(time.RFC3339),
		})
	}
	for _, t := range ip.tags {
		out.InstanceProfile.Tags = append(out.InstanceProfile.Tags, xmlIAMTag{Key: t.key, Value: t.value})
	}
	return out
}

// writeIAMError writes err as an IAM error document.
func (s *Server) writeIAMError(w http.ResponseWriter, requestID string, err error) {
	var apiErr *apiError
	status := 0
	if !errors.As(err, &apiErr) {
		s.logger.Error(err, "failed to serve IAM request", "requestID", requestID)
		apiErr = newAPIError("ServiceFailure", "An internal error has occurred: %v", err)
		status = http.StatusInternalServerError
	}
	if status == 0 {
		status = apiErr.status
	}
	if status == 0 {
		status = iamStatus(apiErr.code)
	}
	errType := "Sender"
	if status >= http.StatusInternalServerError {
		errType = "Receiver"
	}
	body, encErr := xml.Marshal(iamErrorResponse{
		Xmlns:     iamNamespace,
		Error:     iamError{Type: errType, Code: apiErr.code, Message: apiErr.message},
		RequestID: requestID,
	})
	if encErr != nil {
		http.Error(w, encErr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), body...))
}
