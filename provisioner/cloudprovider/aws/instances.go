package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// liveStates are instance states of instances that still exist for Tailor's purposes.
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// ProviderID is the Kubernetes provider ID of an EC2 instance.
func ProviderID(zone, instanceID string) string {
	return fmt.Sprintf("aws:///%s/%s", zone, instanceID)
}

// InstanceIDOf extracts the instance id from a provider ID (aws:///zone/i-...), the inverse
// of ProviderID.
func InstanceIDOf(providerID string) (string, error) {
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	if !strings.HasPrefix(providerID, "aws://") || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider ID %q is not an EC2 instance (want aws:///<zone>/i-...)", providerID)
	}
	return id, nil
}

// describeInstance returns the instance, or a NodeClaimNotFoundError when it is unknown or
// terminated.
func (p *Provider) describeInstance(ctx context.Context, id string) (*ec2types.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if isAPIError(err, "InvalidInstanceID.NotFound") {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s: %w", id, err))
	}
	if err != nil {
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for i := range r.Instances {
			inst := &r.Instances[i]
			if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
				return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))
			}
			return inst, nil
		}
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
}

// Get returns the NodeClaim view of the instance with this provider ID.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	id, err := InstanceIDOf(providerID)
	if err != nil {
		return nil, err
	}
	// Batched with the Gets and Deletes of other NodeClaims into one DescribeInstances.
	inst, err := p.describe.do(ctx, id)
	if err != nil {
		return nil, err
	}
	entries, _, err := p.catalogAndPrices(ctx)
	if err != nil {
		return nil, err
	}
	return p.toNodeClaim(inst, entries, nil), nil
}

// List returns every live instance tagged as launched by this cluster for a NodeClaim.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	entries, _, err := p.catalogAndPrices(ctx)
	if err != nil {
		return nil, err
	}
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + clusterTagKey(p.opts.Cluster.Name)), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{tagNodeClaim}},
		{Name: aws.String("instance-state-name"), Values: liveStates},
	}})
	var out []*karpv1.NodeClaim
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				out = append(out, p.toNodeClaim(&r.Instances[i], entries, nil))
			}
		}
	}
	return out, nil
}

// Delete terminates the NodeClaim's instance. It returns a NodeClaimNotFoundError once the
// instance is terminated or unknown.
func (p *Provider) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	if nodeClaim.Status.ProviderID == "" {
		return cloudprovider.NewNodeClaimNotFoundError(errors.New("the NodeClaim has no instance"))
	}
	id, err := InstanceIDOf(nodeClaim.Status.ProviderID)
	if err != nil {
		return err
	}
	inst, err := p.describe.do(ctx, id)
	if err != nil {
		return err
	}
	if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameShuttingDown {
		return nil
	}
	// Batched with the Deletes of other NodeClaims into one TerminateInstances.
	_, err = p.terminate.do(ctx, id)
	return err
}

// toNodeClaim describes an instance as a NodeClaim: its offering labels, its subnet and
// security groups, the hash of the node class it is launched with (when class is given),
// and, when the instance type is known, its capacity and allocatable for the node class.
func (p *Provider) toNodeClaim(inst *ec2types.Instance, entries map[string]*catalogEntry, class *awsv1.EC2NodeClass) *karpv1.NodeClaim {
	tags := map[string]string{}
	for _, t := range inst.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	zone := aws.ToString(inst.Placement.AvailabilityZone)
	capacityType := karpv1.CapacityTypeOnDemand
	reservation := ""
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = karpv1.CapacityTypeSpot
	} else if id := aws.ToString(inst.CapacityReservationId); id != "" && p.opts.ReservedCapacity {
		capacityType, reservation = karpv1.CapacityTypeReserved, id
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: tags[tagNodeClaim],
			Labels: map[string]string{
				corev1.LabelInstanceTypeStable: string(inst.InstanceType),
				corev1.LabelTopologyZone:       zone,
				karpv1.CapacityTypeLabelKey:    capacityType,
			},
		},
		Status: karpv1.NodeClaimStatus{
			ProviderID: ProviderID(zone, aws.ToString(inst.InstanceId)),
			NodeName:   aws.ToString(inst.PrivateDnsName),
			ImageID:    aws.ToString(inst.ImageId),
		},
	}
	if np := tags[tagNodePool]; np != "" {
		nc.Labels[karpv1.NodePoolLabelKey] = np
	}
	if reservation != "" {
		nc.Labels[karpv1.CapacityReservationIDLabelKey] = reservation
		nc.Labels[karpv1.CapacityReservationTypeLabelKey] = reservationType(class, reservation)
	}
	if id := zoneID(inst, class); id != "" {
		nc.Labels[karpv1.ZoneIDLabelKey] = id
	}
	var groups []string
	for _, g := range inst.SecurityGroups {
		groups = append(groups, aws.ToString(g.GroupId))
	}
	sort.Strings(groups)
	nc.Annotations = map[string]string{
		awsv1.SubnetAnnotationKey:         aws.ToString(inst.SubnetId),
		awsv1.SecurityGroupsAnnotationKey: strings.Join(groups, ","),
	}
	if class != nil {
		// The class the instance is launched with, for static drift.
		nc.Annotations[awsv1.EC2NodeClassHashAnnotationKey] = class.Hash()
		nc.Annotations[awsv1.EC2NodeClassHashVersionAnnotationKey] = awsv1.EC2NodeClassHashVersion
	}
	if inst.LaunchTime != nil {
		nc.CreationTimestamp = metav1.NewTime(*inst.LaunchTime)
	}
	if e, ok := entries[string(inst.InstanceType)]; ok {
		if class == nil {
			class = &awsv1.EC2NodeClass{}
		}
		it := newInstanceType(e, class, nil, &priceBook{}, p.overheadSettings())
		for k, v := range it.Labels {
			nc.Labels[k] = v
		}
		nc.Status.Capacity = it.Capacity
		nc.Status.Allocatable = it.Allocatable()
	}
	return nc
}

// zoneID is the ID of the instance's zone: its placement's, or, where EC2 did not give it,
// that of the zone's subnets in the node class's status.
func zoneID(inst *ec2types.Instance, class *awsv1.EC2NodeClass) string {
	if id := aws.ToString(inst.Placement.AvailabilityZoneId); id != "" || class == nil {
		return id
	}
	zone := aws.ToString(inst.Placement.AvailabilityZone)
	for _, s := range class.Status.Subnets {
		if s.Zone == zone && s.ZoneID != "" {
			return s.ZoneID
		}
	}
	return ""
}
