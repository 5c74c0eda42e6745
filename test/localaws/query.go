package localaws

import (
	"bytes"
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ec2Namespace is the XML namespace of EC2 API version 2016-11-15, the one the SDK speaks.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// ec2TimeFormat is how EC2 writes timestamps.
const ec2TimeFormat = "2006-01-02T15:04:05.000Z"

// ec2Envelope holds what every EC2 response carries besides its result.
type ec2Envelope struct {
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
}

func (e *ec2Envelope) setRequestID(id string) {
	e.Xmlns = ec2Namespace
	e.RequestID = id
}

// ec2Response is the result of an EC2 action, encoded as the response document.
type ec2Response interface {
	setRequestID(id string)
}

// ec2ErrorResponse is the EC2 error document.
type ec2ErrorResponse struct {
	XMLName   xml.Name         `xml:"Response"`
	Errors    []ec2ErrorDetail `xml:"Errors>Error"`
	RequestID string           `xml:"RequestID"`
}

type ec2ErrorDetail struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// serveQuery handles a form request, with Action and its parameters: IAM's when it names IAM's
// API version, else EC2's.
func (s *Server) serveQuery(w http.ResponseWriter, r *http.Request) {
	requestID := s.newRequestID()
	if err := r.ParseForm(); err != nil {
		s.writeEC2Error(w, requestID, newAPIError("MalformedQueryString", "The request could not be parsed: %v", err))
		return
	}
	p := queryParams(r.Form)
	if p.str("Version") == iamVersion {
		if err := s.admit(p.str("Action"), codeIAMThrottled); err != nil {
			s.writeIAMError(w, requestID, err)
			return
		}
		s.serveIAM(w, requestID, p)
		return
	}
	if err := s.admit(p.str("Action"), codeEC2Throttled); err != nil {
		s.writeEC2Error(w, requestID, err)
		return
	}
	s.serveEC2(w, requestID, p)
}

// serveEC2 handles one EC2 Query request.
func (s *Server) serveEC2(w http.ResponseWriter, requestID string, p queryParams) {
	action := p.str("Action")
	s.logger.V(4).Info("EC2 request", "action", action, "requestID", requestID)
	resp, err := s.ec2Action(action, p)
	if err != nil {
		s.writeEC2Error(w, requestID, err)
		return
	}
	resp.setRequestID(requestID)
	var body bytes.Buffer
	body.WriteString(xml.Header)
	if err := xml.NewEncoder(&body).Encode(resp); err != nil {
		s.writeEC2Error(w, requestID, err)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write(body.Bytes())
}

// ec2Action runs one EC2 action.
func (s *Server) ec2Action(action string, p queryParams) (ec2Response, error) {
	switch action {
	case "DescribeInstanceTypes":
		return s.describeInstanceTypes(p)
	case "DescribeInstanceTypeOfferings":
		return s.describeInstanceTypeOfferings(p)
	case "DescribeSpotPriceHistory":
		return s.describeSpotPriceHistory(p)
	case "DescribeAvailabilityZones":
		return s.describeAvailabilityZones(p)
	case "DescribeSubnets":
		return s.describeSubnets(p)
	case "DescribeSecurityGroups":
		return s.describeSecurityGroups(p)
	case "DescribeImages":
		return s.describeImages(p)
	case "CreateLaunchTemplate":
		return s.createLaunchTemplate(p)
	case "DescribeLaunchTemplates":
		return s.describeLaunchTemplates(p)
	case "DeleteLaunchTemplate":
		return s.deleteLaunchTemplate(p)
	case "CreateFleet":
		return s.createFleet(p)
	case "DescribeInstances":
		return s.describeInstances(p)
	case "TerminateInstances":
		return s.terminateInstances(p)
	case "DescribeCapacityReservations":
		return s.describeCapacityReservations(p)
	case "CreateTags":
		return s.createTags(p)
	case "":
		return nil, newAPIError("MissingAction", "The request must contain the parameter Action.")
	default:
		return nil, newAPIError("InvalidAction", "The action %s is not valid for this web service.", action)
	}
}

// writeEC2Error writes err as an EC2 error document: status 400 for errors of the request,
// 500 for failures of the server.
func (s *Server) writeEC2Error(w http.ResponseWriter, requestID string, err error) {
	status := http.StatusBadRequest
	var apiErr *apiError
	if !errors.As(err, &apiErr) {
		s.logger.Error(err, "failed to serve EC2 request", "requestID", requestID)
		status = http.StatusInternalServerError
		apiErr = newAPIError("InternalError", "An internal error has occurred: %v", err)
	} else if apiErr.status != 0 {
		status = apiErr.status
	}
	body, encErr := xml.Marshal(ec2ErrorResponse{
		Errors:    []ec2ErrorDetail{{Code: apiErr.code, Message: apiErr.message}},
		RequestID: requestID,
	})
	if encErr != nil {
		http.Error(w, encErr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), body...))
}

// queryParams are the decoded form fields of an EC2 request. Lists are flattened the EC2
// way: Filter.1.Name, Filter.1.Value.1, InstanceId.2, ...
type queryParams url.Values

// str returns the value of a field, "" when absent.
func (p queryParams) str(key string) string { return url.Values(p).Get(key) }

// has reports whether the field is present.
func (p queryParams) has(key string) bool {
	_, ok := p[key]
	return ok
}

// members returns the keys "key.N" of the list key, ordered by N.
func (p queryParams) members(key string) []string {
	prefix := key + "."
	seen := map[int]bool{}
	for k := range p {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		digits, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(digits); err == nil && n > 0 {
			seen[n] = true
		}
	}
	indexes := make([]int, 0, len(seen))
	for n := range seen {
		indexes = append(indexes, n)
	}
	sort.Ints(indexes)
	out := make([]string, len(indexes))
	for i, n := range indexes {
		out[i] = prefix + strconv.Itoa(n)
	}
	return out
}

// strs returns the values of the list key.
func (p queryParams) strs(key string) []string {
	var out []string
	for _, m := range p.members(key) {
		out = append(out, p.str(m))
	}
	return out
}

// integer returns the value of an integer field, 0 when absent.
func (p queryParams) integer(key string) (int, error) {
	if !p.has(key) {
		return 0, nil
	}
	n, err := strconv.Atoi(p.str(key))
	if err != nil {
		return 0, invalidParameter("Invalid value '%s' for %s: not an integer.", p.str(key), key)
	}
	return n, nil
}

// boolean returns the value of a boolean field, false when absent.
func (p queryParams) boolean(key string) (bool, error) {
	if !p.has(key) {
		return false, nil
	}
	b, err := strconv.ParseBool(p.str(key))
	if err != nil {
		return false, invalidParameter("Invalid value '%s' for %s: not a boolean.", p.str(key), key)
	}
	return b, nil
}

// optionalBool returns the value of a boolean field, nil when absent.
func (p queryParams) optionalBool(key string) (*bool, error) {
	if !p.has(key) {
		return nil, nil
	}
	b, err := p.boolean(key)
	return &b, err
}

// optionalInt returns the value of an integer field, nil when absent.
func (p queryParams) optionalInt(key string) (*int, error) {
	if !p.has(key) {
		return nil, nil
	}
	n, err := p.integer(key)
	return &n, err
}

// optionalFloat returns the value of a number field, nil when absent.
func (p queryParams) optionalFloat(key string) (*float64, error) {
	if !p.has(key) {
		return nil, nil
	}
	f, err := strconv.ParseFloat(p.str(key), 64)
	if err != nil {
		return nil, invalidParameter("Invalid value '%s' for %s: not a number.", p.str(key), key)
	}
	return &f, nil
}

// timestamp returns the value of a timestamp field, the zero time when absent.
func (p queryParams) timestamp(key string) (time.Time, error) {
	if !p.has(key) {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, p.str(key))
	if err != nil {
		return time.Time{}, invalidParameter("Invalid value '%s' for %s: not a timestamp.", p.str(key), key)
	}
	return t, nil
}

// filters returns the Filter.N list.
func (p queryParams) filters() ([]filter, error) {
	var out []filter
	for _, m := range p.members("Filter") {
		name := p.str(m + ".Name")
		if name == "" {
			return nil, newAPIError(codeMissingParameter, "The request must contain the parameter %s.Name", m)
		}
		out = append(out, filter{name: name, values: p.strs(m + ".Value")})
	}
	return out, nil
}

// tags returns the list key of Key/Value tags, e.g. Tag.N.Key and Tag.N.Value.
func (p queryParams) tags(key string) ([]tag, error) {
	var out []tag
	for _, m := range p.members(key) {
		if !p.has(m + ".Key") {
			return nil, newAPIError(codeMissingParameter, "The request must contain the parameter %s.Key", m)
		}
		out = append(out, tag{key: p.str(m + ".Key"), value: p.str(m + ".Value")})
	}
	return out, nil
}

// tagSpecification asks for tags on the resources of one type that an action creates.
type tagSpecification struct {
	resourceType string
	tags         []tag
}

// tagSpecifications returns the list key of TagSpecifications, e.g. TagSpecification.N.
func (p queryParams) tagSpecifications(key string) ([]tagSpecification, error) {
	var out []tagSpecification
	for _, m := range p.members(key) {
		tags, err := p.tags(m + ".Tag")
		if err != nil {
			return nil, err
		}
		if err := validateTags(nil, tags); err != nil {
			return nil, err
		}
		out = append(out, tagSpecification{resourceType: p.str(m + ".ResourceType"), tags: tags})
	}
	return out, nil
}

// tagsFor returns the tags the specifications ask for on resources of the type.
func tagsFor(specs []tagSpecification, resourceType string) []tag {
	var out []tag
	for _, spec := range specs {
		if spec.resourceType == resourceType {
			out = mergeTags(out, spec.tags)
		}
	}
	return out
}

// pageParams returns MaxResults and NextToken.
func (p queryParams) pageParams() (int, string, error) {
	maxResults, err := p.integer("MaxResults")
	return maxResults, p.str("NextToken"), err
}

// formatTime writes a timestamp the way EC2 does.
func formatTime(t time.Time) string { return t.UTC().Format(ec2TimeFormat) }
