package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// EKSCluster is what EKS DescribeCluster says about a cluster that nodes need to join it.
type EKSCluster struct {
	// Endpoint is the API server's URL.
	Endpoint string
	// CABundle is certificateAuthority.data: the base64 PEM of the cluster CA.
	CABundle string
	// IPFamily is the family of pod and service addresses: ipv4 or ipv6.
	IPFamily string
	// ServiceIPv4CIDR and ServiceIPv6CIDR are the service address ranges; an IPv4 cluster
	// has no IPv6 range.
	ServiceIPv4CIDR, ServiceIPv6CIDR string
}

// ServiceCIDR is the range nodes take the cluster DNS address from: the IPv6 range in an
// IPv6 cluster, else the IPv4 one.
func (c EKSCluster) ServiceCIDR() string {
	if c.IPFamily == string(ekstypes.IpFamilyIpv6) && c.ServiceIPv6CIDR != "" {
		return c.ServiceIPv6CIDR
	}
	return c.ServiceIPv4CIDR
}

// DescribeCluster reads the cluster's endpoint, CA bundle and service ranges from EKS. A
// cluster that does not exist is an error naming --cluster-name, the setting to fix.
func DescribeCluster(ctx context.Context, client eks.DescribeClusterAPIClient, name string) (EKSCluster, error) {
	out, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if IsClusterNotFound(err) {
		return EKSCluster{}, fmt.Errorf("describing EKS cluster %q: no such cluster in this account and region; check --cluster-name: %w", name, err)
	}
	if err != nil {
		return EKSCluster{}, fmt.Errorf("describing EKS cluster %q: %w", name, err)
	}
	if out.Cluster == nil {
		return EKSCluster{}, fmt.Errorf("describing EKS cluster %q: the response has no cluster", name)
	}
	c := out.Cluster
	got := EKSCluster{Endpoint: aws.ToString(c.Endpoint)}
	if c.CertificateAuthority != nil {
		got.CABundle = aws.ToString(c.CertificateAuthority.Data)
	}
	if n := c.KubernetesNetworkConfig; n != nil {
		got.IPFamily = string(n.IpFamily)
		got.ServiceIPv4CIDR = aws.ToString(n.ServiceIpv4Cidr)
		got.ServiceIPv6CIDR = aws.ToString(n.ServiceIpv6Cidr)
	}
	return got, nil
}

// IsClusterNotFound reports whether err says the EKS cluster does not exist.
func IsClusterNotFound(err error) bool {
	var notFound *ekstypes.ResourceNotFoundException
	return errors.As(err, &notFound)
}

// DiscoverCluster fills what info leaves empty (endpoint, CA bundle, service CIDR) from EKS
// DescribeCluster of info.Name; what info sets wins. EKS is not called when info is complete.
func DiscoverCluster(ctx context.Context, client eks.DescribeClusterAPIClient, info ClusterInfo) (ClusterInfo, error) {
	if info.Complete() {
		return info, nil
	}
	c, err := DescribeCluster(ctx, client, info.Name)
	if err != nil {
		return info, err
	}
	if info.Endpoint == "" {
		info.Endpoint = c.Endpoint
	}
	if info.CABundle == "" {
		info.CABundle = c.CABundle
	}
	if info.ServiceCIDR == "" {
		info.ServiceCIDR = c.ServiceCIDR()
	}
	return info, nil
}
