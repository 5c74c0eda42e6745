package aws

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instance"
)

// ProviderID is the Kubernetes provider ID of an EC2 instance.
func ProviderID(zone, instanceID string) string { return instance.ProviderID(zone, instanceID) }

// InstanceIDOf extracts the instance id from a provider ID (aws:///zone/i-...), the inverse
// of ProviderID.
func InstanceIDOf(providerID string) (string, error) { return instance.IDOf(providerID) }

// Get returns the NodeClaim view of the instance with this provider ID.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	id, err := InstanceIDOf(providerID)
	if err != nil {
		return nil, err
	}
	// Batched with the Gets and Deletes of other NodeClaims into one DescribeInstances.
	inst, err := p.instances.DescribeBatched(ctx, id)
	if err != nil {
		return nil, err
	}
	entries, _, err := p.catalog.Get(ctx)
	if err != nil {
		return nil, err
	}
	return p.instances.NodeClaim(inst, entries, nil), nil
}

// List returns every live instance tagged as launched by this cluster for a NodeClaim.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	entries, _, err := p.catalog.Get(ctx)
	if err != nil {
		return nil, err
	}
	instances, err := p.instances.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*karpv1.NodeClaim
	for _, inst := range instances {
		out = append(out, p.instances.NodeClaim(inst, entries, nil))
	}
	return out, nil
}

// Delete terminates the NodeClaim's instance: the one its provider ID names, or the one
// tagged for it when it has none recorded (deleted while its launch was in flight). It
// returns a NodeClaimNotFoundError once the instance is terminated or unknown.
func (p *Provider) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	if nodeClaim.Status.ProviderID == "" {
		inst, err := p.instances.LaunchedFor(ctx, nodeClaim)
		if err != nil {
			return err
		}
		if inst == nil {
			return cloudprovider.NewNodeClaimNotFoundError(errors.New("the NodeClaim has no instance"))
		}
		return p.instances.TerminateBatched(ctx, aws.ToString(inst.InstanceId))
	}
	id, err := InstanceIDOf(nodeClaim.Status.ProviderID)
	if err != nil {
		return err
	}
	inst, err := p.instances.DescribeBatched(ctx, id)
	if err != nil {
		return err
	}
	if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameShuttingDown {
		return nil
	}
	// Batched with the Deletes of other NodeClaims into one TerminateInstances.
	return p.instances.TerminateBatched(ctx, id)
}
