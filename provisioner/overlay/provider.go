package overlay

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// Lister lists the NodeOverlays to apply.
type Lister interface {
	// ListNodeOverlays returns every NodeOverlay; an empty list when there is none.
	ListNodeOverlays(ctx context.Context) ([]v1alpha1.NodeOverlay, error)
}

// ClientLister lists NodeOverlays from a controller-runtime reader (the manager's cache).
type ClientLister struct {
	Reader client.Reader
}

// ListNodeOverlays lists the NodeOverlays the reader holds.
func (l ClientLister) ListNodeOverlays(ctx context.Context) ([]v1alpha1.NodeOverlay, error) {
	list := &v1alpha1.NodeOverlayList{}
	if err := l.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing NodeOverlays: %w", err)
	}
	return list.Items, nil
}

// Provider is a cloud provider whose instance types carry the NodeOverlays' prices and
// capacities; its other methods are the wrapped provider's.
type Provider struct {
	cloudprovider.CloudProvider
	overlays Lister
}

var _ cloudprovider.CloudProvider = &Provider{}

// New wraps inner so that InstanceTypes applies the overlays listed by overlays.
func New(inner cloudprovider.CloudProvider, overlays Lister) *Provider {
	return &Provider{CloudProvider: inner, overlays: overlays}
}

// InstanceTypes returns the wrapped provider's instance types for the NodePool with the
// overlays applied. Overlays are read at every call, so a change applies to the next batch
// and no price is cached here.
func (p *Provider) InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	types, err := p.CloudProvider.InstanceTypes(ctx, nodePool)
	if err != nil {
		return nil, err
	}
	overlays, err := p.overlays.ListNodeOverlays(ctx)
	if err != nil {
		return nil, err
	}
	return Apply(overlays, nodePool.Name, types).InstanceTypes, nil
}

// LaunchPrices returns a function that applies the listed overlays to the instance types a
// launch for a NodePool chooses among (aws.Options.LaunchPrices), so the launch orders them
// as planning did.
func LaunchPrices(overlays Lister) func(ctx context.Context, nodePool string, types []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error) {
	return func(ctx context.Context, nodePool string, types []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error) {
		list, err := overlays.ListNodeOverlays(ctx)
		if err != nil {
			return nil, err
		}
		return Apply(list, nodePool, types).InstanceTypes, nil
	}
}
