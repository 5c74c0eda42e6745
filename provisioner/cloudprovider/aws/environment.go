package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EnvironmentOptions configure NewFromEnvironment.
type EnvironmentOptions struct {
	// Provider are the provider's options. NewFromEnvironment sets Region from the SDK's
	// configuration and KubernetesVersion from the API server, and fills what Cluster leaves
	// empty (see settleCluster).
	Provider Options
	// Kube is the API server's configuration: its version picks the AMIs of aliases, and
	// outside a cluster its host and CA are what nodes join as a last resort.
	Kube *rest.Config
	// EndpointURL, when set, overrides the endpoint of every AWS service (a local endpoint).
	EndpointURL string
}

// NewFromEnvironment builds the provider the sidecar runs: it loads the SDK's default
// configuration (credential chain, region) once, reads the Kubernetes version from the API
// server, settles what nodes need to join the cluster, and returns the provider with an SQS
// client of the same configuration, for the interruption queue (building it calls no API).
// kube, claims and clk are New's.
func NewFromEnvironment(ctx context.Context, opts EnvironmentOptions, kube, claims client.Reader, clk clock.Clock) (*Provider, *sqs.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if opts.EndpointURL != "" {
		cfg.BaseEndpoint = aws.String(opts.EndpointURL)
	}
	version, err := kubernetesVersion(opts.Kube)
	if err != nil {
		return nil, nil, err
	}
	clients := NewClients(cfg)
	po := opts.Provider
	cluster, err := settleCluster(ctx, opts.Kube, po.Cluster, po.IsolatedVPC, clients.EKS, inCluster())
	if err != nil {
		return nil, nil, err
	}
	po.Cluster, po.Region, po.KubernetesVersion = cluster, cfg.Region, version
	provider, err := New(po, clients, kube, claims, clk)
	if err != nil {
		return nil, nil, err
	}
	return provider, sqs.NewFromConfig(cfg), nil
}

// kubernetesVersion is the API server's major.minor version.
func kubernetesVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("creating discovery client: %w", err)
	}
	version, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("reading the Kubernetes version: %w", err)
	}
	return version.Major + "." + trimPlus(version.Minor), nil
}

// settleCluster settles what nodes need to join the cluster: the flags first (given), then
// EKS DescribeCluster for what they leave out (never in an isolated VPC). Only outside a
// cluster do endpoint and CA come from the kubeconfig as a last resort: inside one, its host
// is the kubernetes Service's address, which nodes cannot use before they run kube-proxy.
func settleCluster(ctx context.Context, cfg *rest.Config, given ClusterInfo, isolatedVPC bool, client eks.DescribeClusterAPIClient, inCluster bool) (ClusterInfo, error) {
	logger := klog.FromContext(ctx)
	info := given
	if isolatedVPC {
		return info, nil
	}
	discovered, err := DiscoverCluster(ctx, client, info)
	switch {
	case err == nil:
		info = discovered
	case IsClusterNotFound(err):
		return info, err
	case inCluster:
		return info, fmt.Errorf("discovering the cluster (or set --cluster-endpoint, --cluster-ca-bundle and --service-cidr): %w", err)
	default:
		logger.Info("could not discover the cluster from EKS; set --cluster-endpoint, --cluster-ca-bundle and --service-cidr or allow eks:DescribeCluster", "cluster", info.Name, "err", err)
	}
	if !inCluster && (info.Endpoint == "" || info.CABundle == "") {
		logger.Info("nodes will join through the kubeconfig's API server and CA; set --cluster-endpoint and --cluster-ca-bundle for a real cluster", "host", cfg.Host)
		if info.Endpoint == "" {
			info.Endpoint = cfg.Host
		}
		if info.CABundle == "" {
			ca, err := kubeconfigCA(cfg)
			if err != nil {
				return info, err
			}
			info.CABundle = ca
		}
	}
	var errs []error
	if info.Endpoint == "" {
		errs = append(errs, fmt.Errorf("--cluster-endpoint is not set and EKS DescribeCluster of %q gave none", info.Name))
	}
	if info.CABundle == "" {
		errs = append(errs, fmt.Errorf("--cluster-ca-bundle is not set and EKS DescribeCluster of %q gave none", info.Name))
	}
	if info.ServiceCIDR == "" {
		errs = append(errs, fmt.Errorf("--service-cidr is not set and could not be discovered from EKS DescribeCluster of %q", info.Name))
	}
	return info, errors.Join(errs...)
}

// kubeconfigCA is the base64 PEM of the kubeconfig's CA, "" when it names none.
func kubeconfigCA(cfg *rest.Config) (string, error) {
	data := cfg.CAData
	if len(data) == 0 && cfg.CAFile != "" {
		var err error
		if data, err = os.ReadFile(cfg.CAFile); err != nil {
			return "", fmt.Errorf("reading the kubeconfig's CA: %w", err)
		}
	}
	if len(data) == 0 {
		return "", nil
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// inCluster reports whether the sidecar runs in a pod, where its kubeconfig is the
// kubernetes Service's address.
func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != ""
}

// trimPlus drops the "+" some distributions append to the minor version ("34+").
func trimPlus(minor string) string {
	for i, r := range minor {
		if r < '0' || r > '9' {
			return minor[:i]
		}
	}
	return minor
}
