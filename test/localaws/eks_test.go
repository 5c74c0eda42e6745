package localaws

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// eksClient is a real EKS client pointed at the harness's server.
func (h *harness) eksClient() *eks.Client {
	return eks.New(eks.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(h.url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
	})
}

// clusterSummary is the part of a DescribeCluster answer the tests check.
type clusterSummary struct {
	Name, Arn, Status, Version, Endpoint, CA   string
	IPFamily, ServiceIPv4CIDR, ServiceIPv6CIDR string
}

func summarizeCluster(c *ekstypes.Cluster) clusterSummary {
	s := clusterSummary{
		Name: aws.ToString(c.Name), Arn: aws.ToString(c.Arn), Status: string(c.Status),
		Version: aws.ToString(c.Version), Endpoint: aws.ToString(c.Endpoint),
	}
	if c.CertificateAuthority != nil {
		s.CA = aws.ToString(c.CertificateAuthority.Data)
	}
	if n := c.KubernetesNetworkConfig; n != nil {
		s.IPFamily, s.ServiceIPv4CIDR, s.ServiceIPv6CIDR = string(n.IpFamily), aws.ToString(n.ServiceIpv4Cidr), aws.ToString(n.ServiceIpv6Cidr)
	}
	return s
}

func TestDescribeClusterAnswersWhatItIsConfiguredWith(t *testing.T) {
	arn := "arn:aws:eks:us-east-1:123456789012:cluster/tailor-local"
	tests := []struct {
		name string
		eks  EKSCluster
		want clusterSummary
	}{
		{
			name: "configured",
			eks:  EKSCluster{Endpoint: "https://127.0.0.1:6443", CertificateAuthority: "Y2E=", ServiceIPv4CIDR: "10.0.0.0/24"},
			want: clusterSummary{
				Name: "tailor-local", Arn: arn, Status: "ACTIVE", Version: DefaultKubernetesVersion, Endpoint: "https://127.0.0.1:6443", CA: "Y2E=",
				IPFamily: "ipv4", ServiceIPv4CIDR: "10.0.0.0/24",
			},
		},
		{
			name: "defaults: EKS's service range, no endpoint or CA",
			want: clusterSummary{Name: "tailor-local", Arn: arn, Status: "ACTIVE", Version: DefaultKubernetesVersion, IPFamily: "ipv4", ServiceIPv4CIDR: DefaultServiceCIDR},
		},
		{
			name: "IPv6",
			eks:  EKSCluster{Endpoint: "https://example.eks", ServiceIPv6CIDR: "fd00:10::/108"},
			want: clusterSummary{
				Name: "tailor-local", Arn: arn, Status: "ACTIVE", Version: DefaultKubernetesVersion, Endpoint: "https://example.eks",
				IPFamily: "ipv6", ServiceIPv4CIDR: DefaultServiceCIDR, ServiceIPv6CIDR: "fd00:10::/108",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{EKS: tt.eks})
			out, err := h.eksClient().DescribeCluster(h.ctx, &eks.DescribeClusterInput{Name: aws.String("tailor-local")})
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, summarizeCluster(out.Cluster)); diff != "" {
				t.Errorf("cluster (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]int{"DescribeCluster": 1}, h.server.RequestCounts()); diff != "" {
				t.Errorf("request counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeClusterOfAnotherClusterIsResourceNotFound(t *testing.T) {
	h := newHarness(t, Options{})
	_, err := h.eksClient().DescribeCluster(h.ctx, &eks.DescribeClusterInput{Name: aws.String("someone-else")})
	var notFound *ekstypes.ResourceNotFoundException
	require.True(t, errors.As(err, &notFound), "got %v", err)
	require.Equal(t, "someone-else", aws.ToString(notFound.ClusterName))
}

func TestNewRejectsInvalidEKSSettings(t *testing.T) {
	for name, c := range map[string]EKSCluster{
		"IPv4 CIDR": {ServiceIPv4CIDR: "10.0.0.0"},
		"IPv6 CIDR": {ServiceIPv6CIDR: "fd00::/999"},
		"CA":        {CertificateAuthority: "not base64!"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(Options{EKS: c}); err == nil {
				t.Error("New() succeeded, want an error")
			}
		})
	}
}
