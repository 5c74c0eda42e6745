package localaws

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// EKS speaks REST-JSON: the operation is named by method and path, and DescribeCluster is
// GET /clusters/{name}.
const (
	eksClustersPrefix = "/clusters/"
	eksContentType    = "application/json"
	// DefaultServiceCIDR is the service range EKS gives a cluster created without one.
	DefaultServiceCIDR = "10.100.0.0/16"
	// eksPlatformVersion is the platform version DescribeCluster reports.
	eksPlatformVersion = "eks.1"
)

// EKSCluster is what DescribeCluster tells about the one cluster the server stands for, the
// one named by Options.ClusterName.
type EKSCluster struct {
	// Endpoint is the API server's URL; empty leaves it out, as for a cluster still
	// being created.
	Endpoint string
	// CertificateAuthority is the base64 PEM of the cluster CA; empty leaves it out.
	CertificateAuthority string
	// ServiceIPv4CIDR is the service range; empty means DefaultServiceCIDR.
	ServiceIPv4CIDR string
	// ServiceIPv6CIDR, when set, makes the cluster an IPv6 one with this service range.
	ServiceIPv6CIDR string
}

func (c EKSCluster) validate() error {
	for _, cidr := range []struct{ name, value string }{{"EKS service IPv4 CIDR", c.ServiceIPv4CIDR}, {"EKS service IPv6 CIDR", c.ServiceIPv6CIDR}} {
		if cidr.value == "" {
			continue
		}
		if _, err := netip.ParsePrefix(cidr.value); err != nil {
			return fmt.Errorf("%s: %w", cidr.name, err)
		}
	}
	if c.CertificateAuthority != "" {
		if _, err := base64.StdEncoding.DecodeString(c.CertificateAuthority); err != nil {
			return fmt.Errorf("EKS certificate authority must be base64: %w", err)
		}
	}
	return nil
}

// eksCluster is the cluster object of a DescribeCluster response, in EKS's field names.
type eksCluster struct {
	Name                    string                `json:"name"`
	Arn                     string                `json:"arn"`
	CreatedAt               float64               `json:"createdAt"`
	Version                 string                `json:"version"`
	Endpoint                string                `json:"endpoint,omitempty"`
	CertificateAuthority    *eksCertificate       `json:"certificateAuthority,omitempty"`
	KubernetesNetworkConfig eksKubernetesNetwork  `json:"kubernetesNetworkConfig"`
	Status                  string                `json:"status"`
	PlatformVersion         string                `json:"platformVersion"`
	Tags                    map[string]string     `json:"tags"`
	ResourcesVpcConfig      eksResourcesVPCConfig `json:"resourcesVpcConfig"`
}

type eksCertificate struct {
	Data string `json:"data"`
}

type eksKubernetesNetwork struct {
	IPFamily        string `json:"ipFamily"`
	ServiceIPv4CIDR string `json:"serviceIpv4Cidr,omitempty"`
	ServiceIPv6CIDR string `json:"serviceIpv6Cidr,omitempty"`
}

type eksResourcesVPCConfig struct {
	VpcID     string   `json:"vpcId"`
	SubnetIDs []string `json:"subnetIds"`
}

// eksError is the REST-JSON error document; the SDK reads the code from __type or from the
// X-Amzn-ErrorType header.
type eksError struct {
	Type        string `json:"__type"`
	Message     string `json:"message"`
	ClusterName string `json:"clusterName,omitempty"`
}

// isEKSRequest reports whether r is an EKS REST-JSON request.
func isEKSRequest(r *http.Request) bool {
	return r.URL.Path == strings.TrimSuffix(eksClustersPrefix, "/") || strings.HasPrefix(r.URL.Path, eksClustersPrefix)
}

// serveEKS handles an EKS request. Only DescribeCluster is implemented.
func (s *Server) serveEKS(w http.ResponseWriter, r *http.Request) {
	requestID := s.newRequestID()
	name, ok := strings.CutPrefix(r.URL.Path, eksClustersPrefix)
	if !ok || name == "" || strings.Contains(name, "/") || r.Method != http.MethodGet {
		s.writeEKSError(w, requestID, "", &apiError{code: "UnknownOperationException", message: "Only DescribeCluster (GET /clusters/{name}) is implemented.", status: http.StatusNotFound})
		return
	}
	s.logger.V(4).Info("EKS request", "action", "DescribeCluster", "cluster", name, "requestID", requestID)
	if err := s.admit("DescribeCluster", codeJSONThrottled); err != nil {
		s.writeEKSError(w, requestID, name, err)
		return
	}
	if name != s.clusterName {
		s.writeEKSError(w, requestID, name, &apiError{code: "ResourceNotFoundException", message: "No cluster found for name: " + name + ".", status: http.StatusNotFound})
		return
	}
	out, err := json.Marshal(map[string]eksCluster{"cluster": s.describeCluster()})
	if err != nil {
		s.writeEKSError(w, requestID, name, err)
		return
	}
	w.Header().Set("Content-Type", eksContentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	_, _ = w.Write(out)
}

// describeCluster is the server's cluster as DescribeCluster shows it.
func (s *Server) describeCluster() eksCluster {
	c := s.eks
	network := eksKubernetesNetwork{IPFamily: "ipv4", ServiceIPv4CIDR: c.ServiceIPv4CIDR, ServiceIPv6CIDR: c.ServiceIPv6CIDR}
	if network.ServiceIPv4CIDR == "" {
		network.ServiceIPv4CIDR = DefaultServiceCIDR
	}
	if c.ServiceIPv6CIDR != "" {
		network.IPFamily = "ipv6"
	}
	out := eksCluster{
		Name:                    s.clusterName,
		Arn:                     "arn:aws:eks:" + s.region + ":" + accountID + ":cluster/" + s.clusterName,
		CreatedAt:               float64(s.startedAt.UnixMilli()) / 1000,
		Version:                 s.kubernetes,
		Endpoint:                c.Endpoint,
		KubernetesNetworkConfig: network,
		Status:                  "ACTIVE",
		PlatformVersion:         eksPlatformVersion,
		Tags:                    map[string]string{},
		ResourcesVpcConfig:      eksResourcesVPCConfig{VpcID: s.vpc.id, SubnetIDs: []string{}},
	}
	for _, sn := range s.subnets {
		out.ResourcesVpcConfig.SubnetIDs = append(out.ResourcesVpcConfig.SubnetIDs, sn.id)
	}
	if c.CertificateAuthority != "" {
		out.CertificateAuthority = &eksCertificate{Data: c.CertificateAuthority}
	}
	return out
}

// writeEKSError writes err as a REST-JSON error: its status (400 by default) for errors of the
// request, 500 for failures of the server.
func (s *Server) writeEKSError(w http.ResponseWriter, requestID, clusterName string, err error) {
	status := http.StatusBadRequest
	var apiErr *apiError
	if !errors.As(err, &apiErr) {
		s.logger.Error(err, "failed to serve EKS request", "requestID", requestID)
		status = http.StatusInternalServerError
		apiErr = newAPIError("ServerException", "An internal error has occurred: %v", err)
	} else if apiErr.status != 0 {
		status = apiErr.status
	}
	doc := eksError{Type: apiErr.code, Message: apiErr.message}
	if apiErr.code == "ResourceNotFoundException" {
		doc.ClusterName = clusterName
	}
	out, encErr := json.Marshal(doc)
	if encErr != nil {
		http.Error(w, encErr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", eksContentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	w.Header().Set("X-Amzn-ErrorType", apiErr.code)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}
