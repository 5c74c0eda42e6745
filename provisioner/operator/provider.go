package operator

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
)

// newProvider builds the AWS provider (see aws.NewFromEnvironment) from the flags, and the
// SQS client of its SDK configuration. It reads EC2NodeClasses and NodeClaims from the
// cache: every provisioning batch and disruption pass asks it for the instance types of
// every NodePool.
func newProvider(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, opts Options, clk clock.Clock, overlays overlay.Lister) (*aws.Provider, *sqs.Client, error) {
	var launchPrices func(context.Context, string, []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error)
	if opts.FeatureGates.Enabled(GateNodeOverlay) {
		launchPrices = overlay.LaunchPrices(overlays)
	}
	return aws.NewFromEnvironment(ctx, aws.EnvironmentOptions{
		Kube:        cfg,
		EndpointURL: opts.AWSEndpointURL,
		Provider: aws.Options{
			LaunchPrices:            launchPrices,
			Cluster:                 aws.ClusterInfo{Name: opts.ClusterName, Endpoint: opts.ClusterEndpoint, CABundle: opts.ClusterCABundle, ServiceCIDR: opts.ServiceCIDR},
			VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent,
			ReservedENIs:            opts.ReservedENIs,
			PrefixDelegation:        opts.PrefixDelegation,
			UnavailableOfferingsTTL: opts.UnavailableOfferingsTTL,
			IsolatedVPC:             opts.IsolatedVPC,
			ReservedCapacity:        opts.FeatureGates.Enabled(GateReservedCapacity),
		},
	}, mgr.GetClient(), mgr.GetClient(), clk)
}

// plannedProvider is the provider planning and consolidation read instance types through:
// through the NodeOverlays with the NodeOverlay gate on, whose informer it then starts.
func plannedProvider(ctx context.Context, mgr ctrl.Manager, provider *aws.Provider, overlays overlay.Lister, opts Options) (cloudprovider.CloudProvider, error) {
	if !opts.FeatureGates.Enabled(GateNodeOverlay) {
		return provider, nil
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &karpv1alpha1.NodeOverlay{}); err != nil {
		return nil, fmt.Errorf("starting informer for NodeOverlays: %w", err)
	}
	return overlay.New(provider, overlays), nil
}
