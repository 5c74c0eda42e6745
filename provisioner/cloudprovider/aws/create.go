package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/launch"
)

// Adopt returns the NodeClaim view of the live instance tagged for the NodeClaim (the oldest
// when several are), or nil when there is none.
func (p *Provider) Adopt(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	inst, err := p.instances.LaunchedFor(ctx, nodeClaim)
	if err != nil || inst == nil {
		return nil, err
	}
	lc, err := p.launchContext(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	return p.adopted(nodeClaim, inst, lc), nil
}

// Create launches one instance for the NodeClaim (see launch.Launcher.Launch): into a
// capacity reservation when the NodeClaim allows capacity type reserved and one has an
// instance left, else spot when the NodeClaim allows it and a spot offering is available,
// on-demand otherwise or once no spot offering is left. An instance already tagged for the
// NodeClaim (launched before a crash) is adopted instead. With LaunchPrices, on-demand
// launches ask for the instance types in the order of their planned prices. The NodeClaim
// returned names its instance's launch template (awsv1.LaunchTemplateAnnotationKey), which
// template clean-up keeps.
func (p *Provider) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	lc, err := p.launchContext(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	if inst, err := p.instances.LaunchedFor(ctx, nodeClaim); err != nil {
		return nil, err
	} else if inst != nil {
		klog.FromContext(ctx).Info("adopting the instance already launched for the NodeClaim", "nodeClaim", klog.KObj(nodeClaim), "instance", aws.ToString(inst.InstanceId))
		return p.adopted(nodeClaim, inst, lc), nil
	}
	types, prioritized := lc.types, false
	if p.opts.LaunchPrices != nil {
		if types, err = p.opts.LaunchPrices(ctx, nodeClaim.Labels[karpv1.NodePoolLabelKey], lc.types); err != nil {
			return nil, err
		}
		prioritized = true
	}
	launched, err := p.launcher.Launch(ctx, nodeClaim, lc.Context, types, prioritized)
	if err != nil {
		return nil, err
	}
	if p.afterCreateFleet != nil {
		if err := p.afterCreateFleet(ctx, launched.InstanceID); err != nil {
			return nil, err
		}
	}
	return p.launched(ctx, launched, lc)
}

// launched describes the new instance and returns the NodeClaim as launched. EC2 is
// eventually consistent: a just-created instance may briefly be unknown to Describe.
func (p *Provider) launched(ctx context.Context, fleet launch.Fleet, lc *launchContext) (*karpv1.NodeClaim, error) {
	instanceID := fleet.InstanceID
	var inst *ec2types.Instance
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		inst, err = p.instances.Describe(ctx, instanceID)
		if err == nil || !cloudprovider.IsNodeClaimNotFoundError(err) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.clock.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("describing launched instance %s: %w", instanceID, err)
	}
	nc := p.instances.NodeClaim(inst, lc.entries, lc.Class)
	nc.Status.Price = lc.price(nc)
	if fleet.Template != "" {
		nc.Annotations[awsv1.LaunchTemplateAnnotationKey] = fleet.Template
	}
	return nc, nil
}

// adopted returns the NodeClaim as launched with an instance a previous launch left. Its
// launch template is the one this launch would use for the instance's architecture and
// capacity type.
func (p *Provider) adopted(nodeClaim *karpv1.NodeClaim, inst *ec2types.Instance, lc *launchContext) *karpv1.NodeClaim {
	nc := p.instances.NodeClaim(inst, lc.entries, lc.Class)
	nc.Status.Price = lc.price(nc)
	for _, it := range lc.types {
		if it.Name != string(inst.InstanceType) {
			continue
		}
		offering := cloudprovider.Offering{
			CapacityType:  nc.Labels[karpv1.CapacityTypeLabelKey],
			ReservationID: nc.Labels[karpv1.CapacityReservationIDLabelKey], ReservationType: nc.Labels[karpv1.CapacityReservationTypeLabelKey],
		}
		if name, err := p.launcher.TemplateName(nodeClaim, lc.Context, it, offering); err == nil {
			nc.Annotations[awsv1.LaunchTemplateAnnotationKey] = name
		}
	}
	return nc
}

// price is what the NodeClaim's launched node costs per hour: its offering's instance price
// and node costs; nil when the launch context has no such offering.
func (lc *launchContext) price(nc *karpv1.NodeClaim) *karpv1.Price {
	o, ok := cloudprovider.OfferingOf(lc.types, nc.Labels)
	if !ok {
		return nil
	}
	return cloudprovider.NewPriceParts(o.Price, o.NodeCosts, 0).APIPrice()
}
