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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// maxOverrides caps the (instance type, subnet) pairs of one CreateFleet request.
const maxOverrides = 150

// maxLaunchAttempts bounds the CreateFleet calls of one Create: each retries with what the
// errors of the previous ones left.
const maxLaunchAttempts = 4

// Create launches one instance for the NodeClaim: spot when the NodeClaim allows it and a
// spot offering is available, on-demand otherwise or once no spot offering is left. An
// instance already tagged for the NodeClaim (launched before a crash) is adopted instead.
// Offerings that report capacity errors are marked unavailable and the launch retried at
// once with the others.
func (p *Provider) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	lc, err := p.launchContext(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	if inst, err := p.launchedFor(ctx, nodeClaim); err != nil {
		return nil, err
	} else if inst != nil {
		klog.FromContext(ctx).Info("Adopting the instance already launched for the NodeClaim", "nodeClaim", klog.KObj(nodeClaim), "instance", aws.ToString(inst.InstanceId))
		return p.toNodeClaim(inst, lc.entries, lc.class), nil
	}
	candidates := allowedOfferings(nodeClaim, lc.types)
	if len(candidates) == 0 {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no available offering of EC2NodeClass %q satisfies the NodeClaim's requirements", lc.class.Name))
	}
	var failures []string
	excluded := map[offeringKey]bool{}
	for attempt := 0; attempt < maxLaunchAttempts; attempt++ {
		capacityType, chosen := nextCapacityType(candidates, excluded)
		if len(chosen) == 0 {
			break
		}
		instanceID, fleetErrs, err := p.createFleet(ctx, nodeClaim, lc.class, lc.resolved, capacityType, chosen)
		if err != nil {
			return nil, err
		}
		before := len(excluded)
		for _, e := range fleetErrs {
			// Pools that failed are avoided even when the fleet launched in another one.
			if e.key != (offeringKey{}) && capacityErrorCodes[e.code] {
				p.unavailable.mark(e.key)
			}
			if instanceID != "" {
				continue
			}
			failures = append(failures, e.String())
			if e.key != (offeringKey{}) {
				excluded[e.key] = true
			}
		}
		if instanceID != "" {
			if p.afterCreateFleet != nil {
				if err := p.afterCreateFleet(ctx, instanceID); err != nil {
					return nil, err
				}
			}
			return p.launched(ctx, instanceID, lc)
		}
		if len(excluded) == before {
			// Errors that name no offering: none of these is worth trying again now.
			for _, c := range chosen {
				excluded[c.key()] = true
			}
		}
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("CreateFleet launched nothing: %s", strings.Join(failures, "; ")))
}

// nextCapacityType returns the capacity type to launch next and its candidates not yet
// excluded: spot while any is left, then on-demand.
func nextCapacityType(candidates []candidate, excluded map[offeringKey]bool) (string, []candidate) {
	for _, capacityType := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		var chosen []candidate
		for _, c := range candidates {
			if c.offering.CapacityType == capacityType && !excluded[c.key()] {
				chosen = append(chosen, c)
			}
		}
		if len(chosen) > 0 {
			return capacityType, chosen
		}
	}
	return "", nil
}

// launchedFor returns the live instance tagged for the NodeClaim, nil when there is none.
// A launch interrupted between CreateFleet and recording the instance leaves one.
func (p *Provider) launchedFor(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*ec2types.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + clusterTagKey(p.opts.Cluster.Name)), Values: []string{"owned"}},
		{Name: aws.String("tag:" + tagNodeClaim), Values: []string{nodeClaim.Name}},
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

// candidate is an offering the NodeClaim allows.
type candidate struct {
	it       *cloudprovider.InstanceType
	offering cloudprovider.Offering
}

func (c candidate) key() offeringKey {
	return offeringKey{instanceType: c.it.Name, zone: c.offering.Zone, capacityType: c.offering.CapacityType}
}

// fleetError is an error CreateFleet reported, and the offering it is about (zero when the
// error names none).
type fleetError struct {
	key           offeringKey
	code, message string
}

func (e fleetError) String() string {
	if e.key == (offeringKey{}) {
		return e.code + ": " + e.message
	}
	return fmt.Sprintf("%s in %s as %s: %s: %s", e.key.instanceType, e.key.zone, e.key.capacityType, e.code, e.message)
}

// allowedOfferings returns the available offerings the NodeClaim's requirements allow,
// cheapest first.
func allowedOfferings(nodeClaim *karpv1.NodeClaim, types []*cloudprovider.InstanceType) []candidate {
	var out []candidate
	for _, it := range types {
		for _, o := range it.Offerings {
			if !o.Available {
				continue
			}
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

// createFleet asks EC2 for one instance among the candidates. It returns the instance id
// ("" when it launched nothing) and the errors EC2 reported per override.
func (p *Provider) createFleet(ctx context.Context, nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *resolvedClass, capacityType string, candidates []candidate) (string, []fleetError, error) {
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
	}
	// A retried launch of the same NodeClaim with the same offerings returns the same
	// instance; a launch with other offerings (after capacity errors) is a new request.
	in.ClientToken = aws.String(clientToken(nodeClaim.UID, capacityType, configs))
	if capacityType == karpv1.CapacityTypeSpot {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	out, err := p.ec2.CreateFleet(ctx, in)
	if err != nil {
		return "", nil, fmt.Errorf("creating fleet: %w", err)
	}
	zoneOf := map[string]string{}
	for _, s := range resolved.subnets {
		zoneOf[s.ID] = s.Zone
	}
	var errs []fleetError
	for _, e := range out.Errors {
		fe := fleetError{code: aws.ToString(e.ErrorCode), message: aws.ToString(e.ErrorMessage)}
		apiErrorsMetric.WithLabelValues("EC2", "CreateFleet", fe.code).Inc()
		if o := e.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil && o.Overrides.InstanceType != "" {
			zone := aws.ToString(o.Overrides.AvailabilityZone)
			if zone == "" {
				zone = zoneOf[aws.ToString(o.Overrides.SubnetId)]
			}
			lifecycle := capacityType
			if e.Lifecycle != "" {
				lifecycle = string(e.Lifecycle)
			}
			fe.key = offeringKey{instanceType: string(o.Overrides.InstanceType), zone: zone, capacityType: lifecycle}
		}
		errs = append(errs, fe)
	}
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) > 0 {
			return inst.InstanceIds[0], errs, nil
		}
	}
	klog.FromContext(ctx).V(1).Info("CreateFleet launched nothing", "nodeClaim", klog.KObj(nodeClaim), "capacityType", capacityType, "errors", len(errs))
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
	labels := map[string]string{karpv1.CapacityTypeLabelKey: capacityType}
	for k, v := range nodeClaim.Labels {
		if k != corev1.LabelInstanceTypeStable && k != corev1.LabelTopologyZone && k != karpv1.CapacityTypeLabelKey {
			labels[k] = v
		}
	}
	taints := append([]corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, nodeClaim.Spec.Taints...)
	taints = append(taints, nodeClaim.Spec.StartupTaints...)
	userData, err := userData(resolved.family, bootstrap{
		cluster: p.opts.Cluster, labels: labels, taints: taints,
		kubelet: class.Spec.Kubelet, custom: aws.ToString(class.Spec.UserData),
		raid0: aws.ToString((*string)(class.Spec.InstanceStorePolicy)) == string(awsv1.InstanceStorePolicyRAID0),
	})
	if err != nil {
		return "", cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %q: %w", class.Name, err))
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
	_, known := p.templates[name]
	if known {
		p.templates[name] = p.clock.Now()
	}
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
			// The node pool tag is what the IAM policy requires to create and delete
			// templates; its labels are in the user data, so a template serves one pool.
			Tags: toEC2Tags(map[string]string{
				clusterTagKey(p.opts.Cluster.Name): "owned",
				tagEKSCluster:                      p.opts.Cluster.Name,
				tagNodeClass:                       class.Name,
				tagNodePool:                        nodeClaim.Labels[karpv1.NodePoolLabelKey],
			}),
		}},
	})
	if err != nil && !isAPIError(err, "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", fmt.Errorf("creating launch template %s: %w", name, err)
	}
	p.rememberTemplate(name)
	return name, nil
}

// rememberTemplate records that the launch template exists and is used now.
func (p *Provider) rememberTemplate(name string) {
	p.mu.Lock()
	p.templates[name] = p.clock.Now()
	p.mu.Unlock()
}

// clientToken is CreateFleet's idempotency token for a launch of the NodeClaim: its UID and
// a digest of what is asked for, within EC2's 64 characters.
func clientToken(uid types.UID, capacityType string, configs []ec2types.FleetLaunchTemplateConfigRequest) string {
	h := sha256.New()
	h.Write([]byte(capacityType))
	for _, c := range configs {
		fmt.Fprintf(h, "|%s", aws.ToString(c.LaunchTemplateSpecification.LaunchTemplateName))
		for _, o := range c.Overrides {
			fmt.Fprintf(h, "|%s/%s", o.InstanceType, aws.ToString(o.SubnetId))
		}
	}
	return fmt.Sprintf("%s-%x", uid, h.Sum(nil)[:8])
}

func launchTemplateData(spec launchTemplateSpec) *ec2types.RequestLaunchTemplateData {
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(spec.ImageID),
		UserData:           nilIfEmpty(spec.UserData),
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

// nilIfEmpty leaves out an empty string, such as the user data of a Custom node class
// without any.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
