// Package instance finds, describes and terminates the EC2 instances Tailor launched, and
// describes them as NodeClaims.
package instance

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/apierror"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instancetype"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/reservation"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
)

// liveStates are instance states of instances that still exist for Tailor's purposes.
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// ProviderID is the Kubernetes provider ID of an EC2 instance.
func ProviderID(zone, instanceID string) string {
	return fmt.Sprintf("aws:///%s/%s", zone, instanceID)
}

// IDOf extracts the instance id from a provider ID (aws:///zone/i-...), the inverse
// of ProviderID.
func IDOf(providerID string) (string, error) {
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	if !strings.HasPrefix(providerID, "aws://") || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider ID %q is not an EC2 instance (want aws:///<zone>/i-...)", providerID)
	}
	return id, nil
}

// Provider finds, describes and terminates the instances of one cluster. Describes and
// terminations of single instances are batched.
type Provider struct {
	ec2     *ec2.Client
	cluster string
	// reservedCapacity labels the instances in a capacity reservation as capacity type
	// reserved.
	reservedCapacity bool
	settings         instancetype.Settings

	describe  *idBatcher[*ec2types.Instance]
	terminate *idBatcher[struct{}]
}

// New returns the provider of the cluster's instances; settings shape the capacity of the
// NodeClaims it describes.
func New(client *ec2.Client, cluster string, reservedCapacity bool, settings instancetype.Settings, clk clock.Clock) *Provider {
	p := &Provider{ec2: client, cluster: cluster, reservedCapacity: reservedCapacity, settings: settings}
	p.describe = newIDBatcher(clk, p.DescribeIDs)
	p.terminate = newIDBatcher(clk, p.TerminateIDs)
	return p
}

// Describe returns the instance, or a NodeClaimNotFoundError when it is unknown or
// terminated.
func (p *Provider) Describe(ctx context.Context, id string) (*ec2types.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if apierror.Is(err, "InvalidInstanceID.NotFound") {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s: %w", id, err))
	}
	if err != nil {
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		if len(r.Instances) == 0 {
			continue
		}
		inst := &r.Instances[0]
		if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
			return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))
		}
		return inst, nil
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
}

// DescribeBatched returns the instance as Describe does, batched with the calls of other
// NodeClaims into one DescribeInstances.
func (p *Provider) DescribeBatched(ctx context.Context, id string) (*ec2types.Instance, error) {
	return p.describe.do(ctx, id)
}

// TerminateBatched terminates the instance, batched with the calls of other NodeClaims
// into one TerminateInstances. It returns a NodeClaimNotFoundError when EC2 does not know it.
func (p *Provider) TerminateBatched(ctx context.Context, id string) error {
	_, err := p.terminate.do(ctx, id)
	return err
}

// List returns every live instance tagged as launched by this cluster for a NodeClaim.
func (p *Provider) List(ctx context.Context) ([]*ec2types.Instance, error) {
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + tags.ClusterKey(p.cluster)), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{tags.NodeClaim}},
		{Name: aws.String("instance-state-name"), Values: liveStates},
	}})
	var out []*ec2types.Instance
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				out = append(out, &r.Instances[i])
			}
		}
	}
	return out, nil
}

// LaunchedFor returns the live instance tagged for the NodeClaim, nil when there is none.
// A launch interrupted between CreateFleet and recording the instance leaves one.
func (p *Provider) LaunchedFor(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*ec2types.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + tags.ClusterKey(p.cluster)), Values: []string{"owned"}},
		{Name: aws.String("tag:" + tags.NodeClaim), Values: []string{nodeClaim.Name}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("looking up instances tagged for NodeClaim %s: %w", nodeClaim.Name, err)
	}
	var found *ec2types.Instance
	for _, r := range out.Reservations {
		for i := range r.Instances {
			inst := &r.Instances[i]
			if found == nil || aws.ToTime(inst.LaunchTime).Before(aws.ToTime(found.LaunchTime)) {
				found = inst
			}
		}
	}
	return found, nil
}

// NodeClaim describes an instance as a NodeClaim: its offering labels, its subnet and
// security groups, the hash of the node class it is launched with (when class is given),
// and, when the instance type is known, its capacity and allocatable for the node class.
func (p *Provider) NodeClaim(inst *ec2types.Instance, entries map[string]*instancetype.Entry, class *awsv1.EC2NodeClass) *karpv1.NodeClaim {
	tagged := map[string]string{}
	for _, t := range inst.Tags {
		tagged[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	zone := aws.ToString(inst.Placement.AvailabilityZone)
	capacityType := karpv1.CapacityTypeOnDemand
	reservationID := ""
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = karpv1.CapacityTypeSpot
	} else if id := aws.ToString(inst.CapacityReservationId); id != "" && p.reservedCapacity {
		capacityType, reservationID = karpv1.CapacityTypeReserved, id
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: tagged[tags.NodeClaim],
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
	if np := tagged[tags.NodePool]; np != "" {
		nc.Labels[karpv1.NodePoolLabelKey] = np
	}
	if reservationID != "" {
		nc.Labels[karpv1.CapacityReservationIDLabelKey] = reservationID
		nc.Labels[karpv1.CapacityReservationTypeLabelKey] = reservation.Type(class, reservationID)
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
		it := instancetype.New(e, class, nil, &pricing.Book{}, p.settings)
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
