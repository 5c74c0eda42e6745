package launch

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/apierror"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodeclass"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/userdata"
)

// TemplateSpec is everything a launch template holds; its hash names the template,
// so NodeClaims that need the same one share it.
type TemplateSpec struct {
	ImageID         string
	UserData        string
	SecurityGroups  []string
	InstanceProfile string
	MetadataOptions *awsv1.MetadataOptions
	BlockDevices    []*awsv1.BlockDeviceMapping
	Monitoring      bool
	PublicIP        *bool
	Tags            map[string]string
	// CapacityReservationID is the reservation the template launches into; left out of
	// the hash when empty, so templates outside reservations keep their names.
	CapacityReservationID string `json:",omitempty"`
}

// templateKey is what sets the instance types of one NodeClaim apart in launch templates:
// the architecture (the AMI) and, with prefix delegation, the kubelet's max pods (0 when the
// bootstrap computes it).
type templateKey struct {
	arch    string
	maxPods int32
}

// TemplateName is the name of the launch template that launches the NodeClaim's instances
// of the type from the offering (its capacity type and reservation).
func (p *Launcher) TemplateName(nodeClaim *karpv1.NodeClaim, lc Context, it *cloudprovider.InstanceType, offering cloudprovider.Offering) (string, error) {
	name, _, err := p.Template(nodeClaim, lc, it, offering)
	return name, err
}

// Template returns the name and content of the launch template that launches the
// NodeClaim's instances of the type from the offering.
func (p *Launcher) Template(nodeClaim *karpv1.NodeClaim, lc Context, it *cloudprovider.InstanceType, offering cloudprovider.Offering) (string, TemplateSpec, error) {
	return p.launchTemplate(nodeClaim, lc.Class, lc.Resolved, p.templateKey(it, lc.Class), offering)
}

// templateKey is the launch template key of the instance type. With prefix delegation the
// node's max pods go into the user data: the AMIs' bootstrap counts one address per pod.
// Windows nodes take no prefixes.
func (p *Launcher) templateKey(it *cloudprovider.InstanceType, class *awsv1.EC2NodeClass) templateKey {
	key := templateKey{arch: it.Labels[corev1.LabelArchStable]}
	if p.opts.PrefixDelegation && amifamily.WindowsBuild(class) == "" {
		key.maxPods = int32(ptr.To(it.Capacity[corev1.ResourcePods]).Value())
	}
	return key
}

// launchTemplate returns the name and content of the launch template that launches the
// NodeClaim's instances of this key (architecture, max pods) and the offering's capacity
// type (and capacity reservation, which it targets). The name is a digest of the content, so
// NodeClaims that need the same template share it.
func (p *Launcher) launchTemplate(nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *nodeclass.Resolved, key templateKey, offering cloudprovider.Offering) (string, TemplateSpec, error) {
	labels := map[string]string{karpv1.CapacityTypeLabelKey: offering.CapacityType}
	for k, v := range nodeClaim.Labels {
		switch k {
		case corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, karpv1.ZoneIDLabelKey, karpv1.CapacityTypeLabelKey,
			karpv1.CapacityReservationIDLabelKey, karpv1.CapacityReservationTypeLabelKey:
			continue
		}
		labels[k] = v
	}
	if offering.ReservationID != "" {
		labels[karpv1.CapacityReservationIDLabelKey] = offering.ReservationID
		labels[karpv1.CapacityReservationTypeLabelKey] = offering.ReservationType
	}
	taints := append([]corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, nodeClaim.Spec.Taints...)
	taints = append(taints, nodeClaim.Spec.StartupTaints...)
	kubelet := class.Spec.Kubelet
	if key.maxPods > 0 {
		kubelet = &awsv1.KubeletConfiguration{}
		if class.Spec.Kubelet != nil {
			kubelet = class.Spec.Kubelet.DeepCopy()
		}
		kubelet.MaxPods = &key.maxPods
	}
	userData, err := userdata.Render(resolved.Family, userdata.Bootstrap{
		Cluster: p.opts.Cluster, Labels: labels, Taints: taints,
		Kubelet: kubelet, Custom: aws.ToString(class.Spec.UserData),
		RAID0: aws.ToString((*string)(class.Spec.InstanceStorePolicy)) == string(awsv1.InstanceStorePolicyRAID0),
	})
	if err != nil {
		return "", TemplateSpec{}, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %q: %w", class.Name, err))
	}
	profile := aws.ToString(class.Spec.InstanceProfile)
	if profile == "" {
		profile = p.profiles.Name(class.Spec.Role)
	}
	spec := TemplateSpec{
		ImageID: resolved.AMIs[key.arch].ID, UserData: userData, InstanceProfile: profile,
		MetadataOptions: class.Spec.MetadataOptions, BlockDevices: class.Spec.BlockDeviceMappings,
		Monitoring: aws.ToBool(class.Spec.DetailedMonitoring), PublicIP: class.Spec.AssociatePublicIPAddress,
		Tags: class.Spec.Tags, CapacityReservationID: offering.ReservationID,
	}
	for _, g := range resolved.SecurityGroups {
		spec.SecurityGroups = append(spec.SecurityGroups, g.ID)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", TemplateSpec{}, fmt.Errorf("hashing launch template: %w", err)
	}
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("tailor/%s/%x", p.opts.Cluster.Name, sum[:10]), spec, nil
}

// knownTemplate is a launch template known to exist.
type knownTemplate struct {
	id string
	// used is when a launch last used it.
	used time.Time
}

// ensureLaunchTemplate returns the name and id of the NodeClaim's launch template for this
// key (architecture, max pods) and capacity type, creating the template when EC2 does not
// have it. One the provider knows exists is used without asking AWS; the instance profile it names is made
// sure of only when the template is created.
func (p *Launcher) ensureLaunchTemplate(ctx context.Context, nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *nodeclass.Resolved, key templateKey, offering cloudprovider.Offering) (string, string, error) {
	name, spec, err := p.launchTemplate(nodeClaim, class, resolved, key, offering)
	if err != nil {
		return "", "", err
	}
	p.mu.Lock()
	known, ok := p.templates[name]
	if ok {
		known.used = p.clock.Now()
		p.templates[name] = known
	}
	p.mu.Unlock()
	if ok {
		return name, known.id, nil
	}
	if id, err := p.describeLaunchTemplate(ctx, name); err == nil {
		p.rememberTemplate(name, id)
		return name, id, nil
	} else if !apierror.Is(err, "InvalidLaunchTemplateName.NotFoundException") {
		return "", "", err
	}
	if class.Spec.InstanceProfile == nil {
		if _, err := p.profiles.Ensure(ctx, class.Spec.Role); err != nil {
			return "", "", err
		}
	}
	out, err := p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: spec.Data(),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			// The node pool tag is what the IAM policy requires to create and delete
			// templates; its labels are in the user data, so a template serves one pool.
			Tags: tags.EC2(map[string]string{
				tags.ClusterKey(p.opts.Cluster.Name): "owned",
				tags.EKSCluster:                      p.opts.Cluster.Name,
				tags.NodeClass:                       class.Name,
				tags.NodePool:                        nodeClaim.Labels[karpv1.NodePoolLabelKey],
			}),
		}},
	})
	var id string
	switch {
	case err == nil:
		id = aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	case apierror.Is(err, "InvalidLaunchTemplateName.AlreadyExistsException"):
		// Created meanwhile by another launch or the other replica.
		if id, err = p.describeLaunchTemplate(ctx, name); err != nil {
			return "", "", err
		}
	default:
		return "", "", fmt.Errorf("creating launch template %s: %w", name, err)
	}
	p.rememberTemplate(name, id)
	return name, id, nil
}

// describeLaunchTemplate returns the id of the launch template with this name.
func (p *Launcher) describeLaunchTemplate(ctx context.Context, name string) (string, error) {
	out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil {
		return "", fmt.Errorf("describing launch template %s: %w", name, err)
	}
	if len(out.LaunchTemplates) == 0 {
		return "", fmt.Errorf("describing launch template %s: EC2 returned none", name)
	}
	return aws.ToString(out.LaunchTemplates[0].LaunchTemplateId), nil
}

// rememberTemplate records that the launch template exists and is used now.
func (p *Launcher) rememberTemplate(name, id string) {
	p.mu.Lock()
	p.templates[name] = knownTemplate{id: id, used: p.clock.Now()}
	p.mu.Unlock()
}

// forgetTemplates drops the launch templates of a request from those known to exist, so
// that the next launch that needs one looks it up and creates it again.
func (p *Launcher) forgetTemplates(configs []ec2types.FleetLaunchTemplateConfigRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range configs {
		delete(p.templates, aws.ToString(c.LaunchTemplateSpecification.LaunchTemplateName))
	}
}

// isLaunchTemplateNotFound reports whether err is EC2's answer for a launch template that
// does not exist.
func isLaunchTemplateNotFound(err error) bool {
	return err != nil && launchTemplateNotFoundCodes[apierror.Code(err)]
}

// Data is the launch template data EC2 is asked to create the template with.
func (spec TemplateSpec) Data() *ec2types.RequestLaunchTemplateData {
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
	if spec.CapacityReservationID != "" {
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(spec.CapacityReservationID)},
		}
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

// nilIfEmpty leaves out an empty string, such as the user data of a Custom node class
// without any.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// GarbageCollect deletes the launch templates owned by this cluster that no
// launch created or used within LaunchTemplateTTL and no NodeClaim references, and returns
// their names. Every launch uses the template of its (class, AMI, user data, …)
// combination, so a template left unused for that long belongs to a combination that is no
// longer current (a replaced AMI, changed user data, a deleted class); should it be needed
// again, a launch recreates it. What this replica's launches used is only part of the
// picture (the other replica may have launched with a template since, and a restart
// forgets), so the NodeClaims of the cluster say which templates are in use: the one each
// launched NodeClaim names, and every template of the NodePool and EC2NodeClass of a
// NodeClaim still launching.
func (p *Launcher) GarbageCollect(ctx context.Context) ([]string, error) {
	inUse, err := p.templatesInUse(ctx)
	if err != nil {
		return nil, err
	}
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:" + tags.ClusterKey(p.opts.Cluster.Name)), Values: []string{"owned"}}},
	})
	now := p.clock.Now()
	var unused []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			name := aws.ToString(lt.LaunchTemplateName)
			if inUse.has(name, lt.Tags) {
				continue
			}
			last := aws.ToTime(lt.CreateTime)
			p.mu.Lock()
			if known, ok := p.templates[name]; ok && known.used.After(last) {
				last = known.used
			}
			if now.Sub(last) < p.opts.LaunchTemplateTTL {
				p.mu.Unlock()
				continue
			}
			// Forgotten before deleting, so a launch from now on recreates it.
			delete(p.templates, name)
			p.mu.Unlock()
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	var deleted []string
	for _, name := range unused {
		_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && !apierror.Is(err, "InvalidLaunchTemplateName.NotFoundException") {
			return deleted, fmt.Errorf("deleting launch template %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	return deleted, nil
}

// templatesInUse are the launch templates the cluster's NodeClaims reference.
type templatesInUse struct {
	// names are the templates launched NodeClaims were launched from.
	names map[string]bool
	// launching are the NodePool and EC2NodeClass of NodeClaims not launched yet: whichever
	// replica launches them uses one of that pair's templates.
	launching map[[2]string]bool
}

// templatesInUse reads the templates in use from the cluster's NodeClaims.
func (p *Launcher) templatesInUse(ctx context.Context) (templatesInUse, error) {
	claims := &karpv1.NodeClaimList{}
	// Read only: the cache's own objects, not copies of every NodeClaim.
	if err := p.claims.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return templatesInUse{}, fmt.Errorf("listing NodeClaims: %w", err)
	}
	inUse := templatesInUse{names: map[string]bool{}, launching: map[[2]string]bool{}}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if name := nc.Annotations[awsv1.LaunchTemplateAnnotationKey]; name != "" {
			inUse.names[name] = true
		}
		if nc.Status.ProviderID == "" && nc.Spec.NodeClassRef != nil {
			inUse.launching[[2]string{nc.Labels[karpv1.NodePoolLabelKey], nc.Spec.NodeClassRef.Name}] = true
		}
	}
	return inUse, nil
}

// has reports whether a NodeClaim references the template with this name and tags.
func (u templatesInUse) has(name string, tagged []ec2types.Tag) bool {
	if u.names[name] {
		return true
	}
	var pool, class string
	for _, t := range tagged {
		switch aws.ToString(t.Key) {
		case tags.NodePool:
			pool = aws.ToString(t.Value)
		case tags.NodeClass:
			class = aws.ToString(t.Value)
		}
	}
	return u.launching[[2]string{pool, class}]
}

// DeleteClassTemplates deletes this cluster's launch templates tagged for the class and
// returns their names.
func (p *Launcher) DeleteClassTemplates(ctx context.Context, className string) ([]string, error) {
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + tags.ClusterKey(p.opts.Cluster.Name)), Values: []string{"owned"}},
			{Name: aws.String("tag:" + tags.NodeClass), Values: []string{className}},
		},
	})
	var names []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			names = append(names, aws.ToString(lt.LaunchTemplateName))
		}
	}
	sort.Strings(names)
	for _, name := range names {
		p.mu.Lock()
		delete(p.templates, name)
		p.mu.Unlock()
		_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && !apierror.Is(err, "InvalidLaunchTemplateName.NotFoundException") {
			return nil, fmt.Errorf("deleting launch template %s: %w", name, err)
		}
	}
	return names, nil
}
