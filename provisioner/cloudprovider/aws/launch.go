package aws

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// maxOverrides caps the (instance type, subnet) pairs of one CreateFleet request.
const maxOverrides = 150

// Create launches one instance for the NodeClaim: spot when the NodeClaim allows it and a
// spot offering exists, on-demand otherwise or when no spot capacity is left.
func (p *Provider) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	lc, err := p.launchContext(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	candidates := allowedOfferings(nodeClaim, lc.types)
	if len(candidates) == 0 {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no offering of EC2NodeClass %q satisfies the NodeClaim's requirements", lc.class.Name))
	}
	var failures []string
	for _, capacityType := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		var chosen []candidate
		for _, c := range candidates {
			if c.offering.CapacityType == capacityType {
				chosen = append(chosen, c)
			}
		}
		if len(chosen) == 0 {
			continue
		}
		instanceID, errs, err := p.createFleet(ctx, nodeClaim, lc.class, lc.resolved, capacityType, chosen)
		if err != nil {
			return nil, err
		}
		if instanceID != "" {
			return p.launched(ctx, instanceID, lc)
		}
		failures = append(failures, errs...)
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("CreateFleet launched nothing: %s", strings.Join(failures, "; ")))
}

// candidate is an offering the NodeClaim allows.
type candidate struct {
	it       *cloudprovider.InstanceType
	offering cloudprovider.Offering
}

// allowedOfferings returns the offerings the NodeClaim's requirements allow, cheapest first.
func allowedOfferings(nodeClaim *karpv1.NodeClaim, types []*cloudprovider.InstanceType) []candidate {
	var out []candidate
	for _, it := range types {
		for _, o := range it.Offerings {
			labels := make(map[string]string, len(nodeClaim.Labels)+len(it.Labels)+2)
			for k, v := range nodeClaim.Labels {
				labels[k] = v
			}
			for k, v := range it.Labels {
				labels[k] = v
			}
			labels[corev1.LabelTopologyZone] = o.Zone
			labels[karpv1.CapacityTypeLabelKey] = o.CapacityType
			if requirements.Matches(nodeClaim.Spec.Requirements, labels) {
				out = append(out, candidate{it: it, offering: o})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].offering.Price != out[j].offering.Price {
			return out[i].offering.Price < out[j].offering.Price
		}
		if out[i].it.Name != out[j].it.Name {
			return out[i].it.Name < out[j].it.Name
		}
		return out[i].offering.Zone < out[j].offering.Zone
	})
	return out
}

// createFleet asks EC2 for one instance among the candidates. It returns the instance id, or
// the errors EC2 reported per override when it launched nothing.
func (p *Provider) createFleet(ctx context.Context, nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *resolvedClass, capacityType string, candidates []candidate) (string, []string, error) {
	byArch := map[string][]ec2types.FleetLaunchTemplateOverridesRequest{}
	count := 0
	for _, c := range candidates {
		arch := c.it.Labels[corev1.LabelArchStable]
		for _, s := range resolved.subnets {
			if s.Zone != c.offering.Zone || count >= maxOverrides {
				continue
			}
			byArch[arch] = append(byArch[arch], ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(c.it.Name),
				SubnetId:     aws.String(s.ID),
				// Cheapest first: used by the prioritized strategies, ignored by the others.
				Priority: aws.Float64(float64(count)),
			})
			count++
			break
		}
	}
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	archs := make([]string, 0, len(byArch))
	for arch := range byArch {
		archs = append(archs, arch)
	}
	sort.Strings(archs)
	for _, arch := range archs {
		name, err := p.ensureLaunchTemplate(ctx, nodeClaim, class, resolved, arch, capacityType)
		if err != nil {
			return "", nil, err
		}
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
			Overrides:                   byArch[arch],
		})
	}
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		Context:               class.Spec.Context,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType),
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: p.instanceTags(nodeClaim, class)},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: p.instanceTags(nodeClaim, class)},
		},
		// A retried launch of the same NodeClaim and capacity type returns the same instance.
		ClientToken: aws.String(fmt.Sprintf("%s-%s", nodeClaim.UID, capacityType)),
	}
	if capacityType == karpv1.CapacityTypeSpot {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	out, err := p.ec2.CreateFleet(ctx, in)
	if err != nil {
		return "", nil, fmt.Errorf("creating fleet: %w", err)
	}
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) > 0 {
			return inst.InstanceIds[0], nil, nil
		}
	}
	var errs []string
	for _, e := range out.Errors {
		errs = append(errs, fmt.Sprintf("%s: %s", aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage)))
	}
	klog.FromContext(ctx).V(1).Info("CreateFleet launched nothing", "nodeClaim", nodeClaim.Name, "capacityType", capacityType, "errors", errs)
	return "", errs, nil
}

func (p *Provider) instanceTags(nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass) []ec2types.Tag {
	tags := map[string]string{}
	for k, v := range class.Spec.Tags {
		tags[k] = v
	}
	tags[clusterTagKey(p.opts.Cluster.Name)] = "owned"
	tags[tagEKSCluster] = p.opts.Cluster.Name
	tags[tagNodePool] = nodeClaim.Labels[karpv1.NodePoolLabelKey]
	tags[tagNodeClaim] = nodeClaim.Name
	tags[tagNodeClass] = class.Name
	if _, ok := class.Spec.Tags[tagName]; !ok {
		tags[tagName] = nodeClaim.Labels[karpv1.NodePoolLabelKey] + "/" + nodeClaim.Name
	}
	return toEC2Tags(tags)
}

func toEC2Tags(tags map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, len(keys))
	for i, k := range keys {
		out[i] = ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])}
	}
	return out
}

// launchTemplateSpec is everything a launch template holds; its hash names the template,
// so NodeClaims that need the same one share it.
type launchTemplateSpec struct {
	ImageID         string
	UserData        string
	SecurityGroups  []string
	InstanceProfile string
	MetadataOptions *awsv1.MetadataOptions
	BlockDevices    []*awsv1.BlockDeviceMapping
	Monitoring      bool
	PublicIP        *bool
	Tags            map[string]string
}

func (p *Provider) ensureLaunchTemplate(ctx context.Context, nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *resolvedClass, arch, capacityType string) (string, error) {
	if resolved.family != familyAL2023 {
		return "", cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %q: AMI family %s is not supported yet, use alias al2023@latest", class.Name, resolved.family))
	}
	labels := map[string]string{karpv1.CapacityTypeLabelKey: capacityType}
	for k, v := range nodeClaim.Labels {
		if k != corev1.LabelInstanceTypeStable && k != corev1.LabelTopologyZone && k != karpv1.CapacityTypeLabelKey {
			labels[k] = v
		}
	}
	taints := append([]corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, nodeClaim.Spec.Taints...)
	taints = append(taints, nodeClaim.Spec.StartupTaints...)
	userData, err := al2023UserData(bootstrap{
		cluster: p.opts.Cluster, labels: labels, taints: taints,
		kubelet: class.Spec.Kubelet, custom: aws.ToString(class.Spec.UserData),
	})
	if err != nil {
		return "", err
	}
	profile := aws.ToString(class.Spec.InstanceProfile)
	if profile == "" {
		if profile, err = p.ensureInstanceProfile(ctx, class.Spec.Role); err != nil {
			return "", err
		}
	}
	spec := launchTemplateSpec{
		ImageID: resolved.amis[arch].ID, UserData: userData, InstanceProfile: profile,
		MetadataOptions: class.Spec.MetadataOptions, BlockDevices: class.Spec.BlockDeviceMappings,
		Monitoring: aws.ToBool(class.Spec.DetailedMonitoring), PublicIP: class.Spec.AssociatePublicIPAddress,
		Tags: class.Spec.Tags,
	}
	for _, g := range resolved.securityGroups {
		spec.SecurityGroups = append(spec.SecurityGroups, g.ID)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hashing launch template: %w", err)
	}
	sum := sha256.Sum256(raw)
	name := fmt.Sprintf("tailor/%s/%x", p.opts.Cluster.Name, sum[:10])
	p.mu.Lock()
	known := p.templates[name]
	p.mu.Unlock()
	if known {
		return name, nil
	}
	if _, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}}); err == nil {
		p.rememberTemplate(name)
		return name, nil
	} else if !isAPIError(err, "InvalidLaunchTemplateName.NotFoundException") {
		return "", fmt.Errorf("describing launch template %s: %w", name, err)
	}
	_, err = p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: launchTemplateData(spec),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: toEC2Tags(map[string]string{
				clusterTagKey(p.opts.Cluster.Name): "owned",
				tagEKSCluster:                      p.opts.Cluster.Name,
				tagNodeClass:                       class.Name,
			}),
		}},
	})
	if err != nil && !isAPIError(err, "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", fmt.Errorf("creating launch template %s: %w", name, err)
	}
	p.rememberTemplate(name)
	return name, nil
}

func (p *Provider) rememberTemplate(name string) {
	p.mu.Lock()
	p.templates[name] = true
	p.mu.Unlock()
}

func launchTemplateData(spec launchTemplateSpec) *ec2types.RequestLaunchTemplateData {
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(spec.ImageID),
		UserData:           aws.String(spec.UserData),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(spec.InstanceProfile)},
		Monitoring:         &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(spec.Monitoring)},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			HttpTokens:   ec2types.LaunchTemplateHttpTokensStateRequired,
			// One hop keeps pods from reaching the node's credentials.
			HttpPutResponseHopLimit: aws.Int32(1),
		},
	}
	if m := spec.MetadataOptions; m != nil {
		if m.HTTPEndpoint != nil {
			data.MetadataOptions.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
		}
		if m.HTTPTokens != nil {
			data.MetadataOptions.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
		}
		if m.HTTPPutResponseHopLimit != nil {
			data.MetadataOptions.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
		}
		if m.HTTPProtocolIPv6 != nil {
			data.MetadataOptions.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
		}
	}
	if spec.PublicIP != nil {
		data.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: spec.PublicIP, Groups: spec.SecurityGroups,
		}}
	} else {
		data.SecurityGroupIds = spec.SecurityGroups
	}
	for _, m := range spec.BlockDevices {
		if m == nil || m.EBS == nil {
			continue
		}
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
			DeleteOnTermination: m.EBS.DeleteOnTermination, Encrypted: m.EBS.Encrypted,
			KmsKeyId: m.EBS.KMSKeyID, SnapshotId: m.EBS.SnapshotID,
			VolumeType: ec2types.VolumeType(aws.ToString(m.EBS.VolumeType)),
		}
		if m.EBS.IOPS != nil {
			ebs.Iops = aws.Int32(int32(*m.EBS.IOPS))
		}
		if m.EBS.Throughput != nil {
			ebs.Throughput = aws.Int32(int32(*m.EBS.Throughput))
		}
		if m.EBS.VolumeSize != nil {
			ebs.VolumeSize = aws.Int32(int32(m.EBS.VolumeSize.ScaledValue(9)))
		}
		data.BlockDeviceMappings = append(data.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName, Ebs: ebs})
	}
	return data
}

func isAPIError(err error, code string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}

// launched describes the new instance and returns the NodeClaim as launched. EC2 is
// eventually consistent: a just-created instance may briefly be unknown to Describe.
func (p *Provider) launched(ctx context.Context, instanceID string, lc *launchContext) (*karpv1.NodeClaim, error) {
	var inst *ec2types.Instance
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		inst, err = p.describeInstance(ctx, instanceID)
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
	return p.toNodeClaim(inst, lc.entries, lc.class), nil
}
