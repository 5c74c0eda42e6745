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
	"k8s.io/utils/ptr"

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

// codeInsufficientFreeAddresses is CreateFleet's error for an override whose subnet has no
// free IP address.
const codeInsufficientFreeAddresses = "InsufficientFreeAddressesInSubnet"

// launchTemplateNotFoundCodes are CreateFleet's errors, of the request or of an override,
// for a launch template that does not exist (any more): deleted outside Tailor, or by the
// clean-up of a replica that did not know it was used.
var launchTemplateNotFoundCodes = map[string]bool{
	"InvalidLaunchTemplateName.NotFoundException": true,
	"InvalidLaunchTemplateId.NotFound":            true,
}

// Adopt returns the NodeClaim view of the live instance tagged for the NodeClaim (the oldest
// when several are), or nil when there is none.
func (p *Provider) Adopt(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	inst, err := p.launchedFor(ctx, nodeClaim)
	if err != nil || inst == nil {
		return nil, err
	}
	lc, err := p.launchContext(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	return p.adopted(nodeClaim, inst, lc), nil
}

// Create launches one instance for the NodeClaim: into a capacity reservation when the
// NodeClaim allows capacity type reserved and one has an instance left, else spot when the
// NodeClaim allows it and a spot offering is available, on-demand otherwise or once no
// spot offering is left. A reservation found full is marked so and the launch goes on with
// the other offerings. An
// instance already tagged for the NodeClaim (launched before a crash) is adopted instead.
// Offerings that report capacity errors are marked unavailable and the launch retried at
// once with the others. A launch template that CreateFleet does not find is forgotten and
// created again for one more attempt. The NodeClaim returned names its instance's launch
// template (awsv1.LaunchTemplateAnnotationKey), which template clean-up keeps.
func (p *Provider) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	lc, err := p.launchContext(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	if inst, err := p.launchedFor(ctx, nodeClaim); err != nil {
		return nil, err
	} else if inst != nil {
		klog.FromContext(ctx).Info("Adopting the instance already launched for the NodeClaim", "nodeClaim", klog.KObj(nodeClaim), "instance", aws.ToString(inst.InstanceId))
		return p.adopted(nodeClaim, inst, lc), nil
	}
	types, prioritized := lc.types, false
	if p.opts.LaunchPrices != nil {
		if types, err = p.opts.LaunchPrices(ctx, nodeClaim.Labels[karpv1.NodePoolLabelKey], lc.types); err != nil {
			return nil, err
		}
		prioritized = true
	}
	candidates := allowedOfferings(nodeClaim, types)
	if len(candidates) == 0 {
		return nil, noOfferingError(lc)
	}
	var failures []string
	excluded := map[offeringKey]bool{}
	recreated := false
	for attempt := 0; attempt < maxLaunchAttempts; attempt++ {
		capacityType, chosen := nextCapacityType(candidates, excluded)
		if len(chosen) == 0 {
			break
		}
		fleet, err := p.createFleet(ctx, nodeClaim, lc.class, lc.resolved, chosen, prioritized)
		if isLaunchTemplateNotFound(err) && !recreated {
			// createFleet forgot the templates: the next attempt creates them again.
			recreated = true
			continue
		}
		if err != nil {
			return nil, err
		}
		before := len(excluded)
		templateGone, subnetLeft := false, false
		for _, e := range fleet.errors {
			if e.code == codeInsufficientFreeAddresses && e.key != (offeringKey{}) {
				// Another subnet of the zone with free addresses is tried next, without
				// giving up on the offering.
				if _, ok := lc.resolved.subnetFor(e.key.zone); ok {
					subnetLeft = true
					continue
				}
			}
			// Pools that failed are avoided even when the fleet launched in another one.
			if e.key != (offeringKey{}) && capacityErrorCodes[e.code] {
				p.unavailable.mark(e.key)
			}
			templateGone = templateGone || launchTemplateNotFoundCodes[e.code]
			if fleet.instanceID != "" {
				continue
			}
			failures = append(failures, e.String())
			// A missing template is no fault of the offering.
			if e.key != (offeringKey{}) && !launchTemplateNotFoundCodes[e.code] {
				excluded[e.key] = true
			}
		}
		if fleet.instanceID == "" && lc.resolved.fullSubnets(nil) != nil {
			// The last free addresses went meanwhile: no other offering can launch either.
			return nil, noOfferingError(lc)
		}
		if fleet.instanceID != "" {
			if capacityType == karpv1.CapacityTypeReserved {
				lc.resolved.tookReservation(chosen[0].offering.ReservationID)
			}
			if p.afterCreateFleet != nil {
				if err := p.afterCreateFleet(ctx, fleet.instanceID); err != nil {
					return nil, err
				}
			}
			return p.launched(ctx, fleet, lc)
		}
		if templateGone && !recreated {
			recreated = true
			continue
		}
		if len(excluded) == before && !subnetLeft {
			// Errors that name no offering: none of these is worth trying again now.
			for _, c := range chosen {
				excluded[c.key()] = true
			}
		}
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("CreateFleet launched nothing: %s", strings.Join(failures, "; ")))
}

// noOfferingError is the error of a launch no offering is left for, naming the subnets when
// they are all full, since no capacity error will clear by itself then.
func noOfferingError(lc *launchContext) error {
	if full := lc.resolved.fullSubnets(nil); len(full) > 0 {
		return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("EC2NodeClass %q: %w: %s", lc.class.Name, cloudprovider.ErrSubnetsFull, strings.Join(full, ", ")))
	}
	return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no available offering of EC2NodeClass %q satisfies the NodeClaim's requirements", lc.class.Name))
}

// nextCapacityType returns the capacity type to launch next and its candidates not yet
// excluded: the cheapest reserved one while any is left (one reservation a request, since
// the launch template targets it), then spot while any is left, then on-demand.
func nextCapacityType(candidates []candidate, excluded map[offeringKey]bool) (string, []candidate) {
	for _, c := range candidates {
		if c.offering.CapacityType == karpv1.CapacityTypeReserved && !excluded[c.key()] {
			return karpv1.CapacityTypeReserved, []candidate{c}
		}
	}
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

func (c candidate) key() offeringKey { return keyOf(c.it.Name, c.offering) }

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
			if c := (candidate{it: it, offering: o}); requirements.MatchesFunc(nodeClaim.Spec.Requirements, func(key string) (string, bool) {
				if v, ok := c.label(key); ok {
					return v, true
				}
				v, ok := nodeClaim.Labels[key]
				return v, ok
			}) {
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		// The whole node's price: in a zone whose subnet maps public addresses a node costs more.
		if a, b := out[i].offering.NodePrice(), out[j].offering.NodePrice(); a != b {
			return a < b
		}
		if out[i].it.Name != out[j].it.Name {
			return out[i].it.Name < out[j].it.Name
		}
		return out[i].offering.Zone < out[j].offering.Zone
	})
	return out
}

// override is a candidate with the subnet it launches in.
type override struct {
	candidate
	subnet string
}

// label is the value of a label a node launched from the candidate has.
func (c candidate) label(key string) (string, bool) { return c.it.Label(c.offering, key) }

// chooseOverrides picks at most limit overrides, in their order (cheapest first), so that
// the request keeps minValues distinct values of each key where the overrides have them:
// first the cheapest override that brings a value of a key still short, for each until
// the keys have their minValues, then the cheapest of the others.
func chooseOverrides(overrides []override, minValues map[string]int, limit int) []override {
	if len(overrides) <= limit {
		return overrides
	}
	if len(minValues) == 0 {
		return overrides[:limit]
	}
	keep := make([]bool, len(overrides))
	kept := 0
	seen := make(map[string]map[string]bool, len(minValues))
	for key := range minValues {
		seen[key] = map[string]bool{}
	}
	for i, o := range overrides {
		if kept == limit {
			break
		}
		brings := false
		for key, n := range minValues {
			if v, ok := o.label(key); ok && len(seen[key]) < n && !seen[key][v] {
				brings = true
			}
		}
		if !brings {
			continue
		}
		keep[i] = true
		kept++
		for key := range minValues {
			if v, ok := o.label(key); ok {
				seen[key][v] = true
			}
		}
	}
	for i := range overrides {
		if kept == limit {
			break
		}
		if !keep[i] {
			keep[i] = true
			kept++
		}
	}
	out := make([]override, 0, limit)
	for i, o := range overrides {
		if keep[i] {
			out = append(out, o)
		}
	}
	return out
}

// fleetLaunch is what one CreateFleet call did.
type fleetLaunch struct {
	// instanceID is the instance launched, "" when none was.
	instanceID string
	// template is the launch template of the instance launched.
	template string
	// errors are those EC2 reported per override, and those of candidates whose zone has no
	// subnet with a free address, which were not sent.
	errors []fleetError
}

// createFleet asks EC2 for one instance among the candidates, all of one capacity type (a
// reserved one alone: on-demand with a launch template targeting its reservation);
// prioritized asks for on-demand capacity in the candidates' order rather than by EC2's
// lowest price. When EC2 says a launch template does not exist, for the request or for an
// override, the provider forgets the request's templates so that the next launch creates
// them again.
func (p *Provider) createFleet(ctx context.Context, nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *resolvedClass, candidates []candidate, prioritized bool) (fleetLaunch, error) {
	offering := candidates[0].offering
	capacityType, ec2CapacityType := offering.CapacityType, offering.CapacityType
	if capacityType == karpv1.CapacityTypeReserved {
		ec2CapacityType = karpv1.CapacityTypeOnDemand
	}
	var placed []override
	subnetOf := map[string]string{}
	var launch fleetLaunch
	for _, c := range candidates {
		zone := c.offering.Zone
		if _, ok := subnetOf[zone]; !ok {
			s, _ := resolved.subnetFor(zone)
			subnetOf[zone] = s.ID
		}
		if subnetOf[zone] == "" {
			launch.errors = append(launch.errors, fleetError{key: c.key(), code: codeInsufficientFreeAddresses, message: "no subnet of the zone has a free address"})
			continue
		}
		placed = append(placed, override{candidate: c, subnet: subnetOf[zone]})
	}
	if len(placed) == 0 {
		return launch, nil
	}
	byTemplate := map[templateKey][]ec2types.FleetLaunchTemplateOverridesRequest{}
	for i, o := range chooseOverrides(placed, requirements.MinValues(nodeClaim.Spec.Requirements), maxOverrides) {
		key := p.templateKey(o.it, class)
		byTemplate[key] = append(byTemplate[key], ec2types.FleetLaunchTemplateOverridesRequest{
			InstanceType: ec2types.InstanceType(o.it.Name),
			SubnetId:     aws.String(o.subnet),
			// Cheapest first: used by the prioritized strategies, ignored by the others.
			Priority: aws.Float64(float64(i)),
		})
	}
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	keys := make([]templateKey, 0, len(byTemplate))
	for key := range byTemplate {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].arch != keys[j].arch {
			return keys[i].arch < keys[j].arch
		}
		return keys[i].maxPods < keys[j].maxPods
	})
	templateOf := map[ec2types.InstanceType]string{}
	var templateIDs []string
	for _, key := range keys {
		name, id, err := p.ensureLaunchTemplate(ctx, nodeClaim, class, resolved, key, offering)
		if err != nil {
			return fleetLaunch{}, err
		}
		templateIDs = append(templateIDs, id)
		for _, o := range byTemplate[key] {
			templateOf[o.InstanceType] = name
		}
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
			Overrides:                   byTemplate[key],
		})
	}
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		Context:               class.Spec.Context,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(ec2CapacityType),
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: p.instanceTags(nodeClaim, class)},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: p.instanceTags(nodeClaim, class)},
		},
	}
	// A retried launch of the same NodeClaim with the same offerings returns the same
	// instance; a launch with other offerings (after capacity errors) is a new request.
	in.ClientToken = aws.String(clientToken(nodeClaim.UID, capacityType, configs, templateIDs))
	if capacityType == karpv1.CapacityTypeSpot {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
		if prioritized {
			in.OnDemandOptions.AllocationStrategy = ec2types.FleetOnDemandAllocationStrategyPrioritized
		}
	}
	out, err := p.ec2.CreateFleet(ctx, in)
	if err != nil {
		if isLaunchTemplateNotFound(err) {
			p.forgetTemplates(configs)
		}
		return fleetLaunch{}, fmt.Errorf("creating fleet: %w", err)
	}
	zoneOf := map[string]string{}
	for _, s := range resolved.subnets {
		zoneOf[s.ID] = s.Zone
	}
	for _, e := range out.Errors {
		fe := fleetError{code: aws.ToString(e.ErrorCode), message: aws.ToString(e.ErrorMessage)}
		apiErrorsMetric.WithLabelValues("EC2", "CreateFleet", fe.code).Inc()
		if o := e.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil && o.Overrides.InstanceType != "" {
			zone := aws.ToString(o.Overrides.AvailabilityZone)
			if zone == "" {
				zone = zoneOf[aws.ToString(o.Overrides.SubnetId)]
			}
			lifecycle := capacityType
			if e.Lifecycle != "" && capacityType != karpv1.CapacityTypeReserved {
				lifecycle = string(e.Lifecycle)
			}
			fe.key = keyOf(string(o.Overrides.InstanceType), cloudprovider.Offering{Zone: zone, CapacityType: lifecycle, ReservationID: offering.ReservationID})
		}
		launch.errors = append(launch.errors, fe)
		if fe.code == codeInsufficientFreeAddresses && e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil {
			resolved.full(aws.ToString(e.LaunchTemplateAndOverrides.Overrides.SubnetId))
		}
		if launchTemplateNotFoundCodes[fe.code] {
			p.forgetTemplates(configs)
		}
	}
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) > 0 {
			if o := inst.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
				resolved.tookAddress(aws.ToString(o.Overrides.SubnetId))
			}
			launch.instanceID, launch.template = inst.InstanceIds[0], templateOf[inst.InstanceType]
			return launch, nil
		}
	}
	klog.FromContext(ctx).V(1).Info("CreateFleet launched nothing", "nodeClaim", klog.KObj(nodeClaim), "capacityType", capacityType, "errors", len(launch.errors))
	return launch, nil
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

// templateKey is the launch template key of the instance type. With prefix delegation the
// node's max pods go into the user data: the AMIs' bootstrap counts one address per pod.
// Windows nodes take no prefixes.
func (p *Provider) templateKey(it *cloudprovider.InstanceType, class *awsv1.EC2NodeClass) templateKey {
	key := templateKey{arch: it.Labels[corev1.LabelArchStable]}
	if p.opts.PrefixDelegation && windowsBuild(class) == "" {
		key.maxPods = int32(ptr.To(it.Capacity[corev1.ResourcePods]).Value())
	}
	return key
}

// launchTemplate returns the name and content of the launch template that launches the
// NodeClaim's instances of this key (architecture, max pods) and the offering's capacity
// type (and capacity reservation, which it targets). The name is a digest of the content, so
// NodeClaims that need the same template share it.
func (p *Provider) launchTemplate(nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *resolvedClass, key templateKey, offering cloudprovider.Offering) (string, launchTemplateSpec, error) {
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
	userData, err := userData(resolved.family, bootstrap{
		cluster: p.opts.Cluster, labels: labels, taints: taints,
		kubelet: kubelet, custom: aws.ToString(class.Spec.UserData),
		raid0: aws.ToString((*string)(class.Spec.InstanceStorePolicy)) == string(awsv1.InstanceStorePolicyRAID0),
	})
	if err != nil {
		return "", launchTemplateSpec{}, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %q: %w", class.Name, err))
	}
	profile := aws.ToString(class.Spec.InstanceProfile)
	if profile == "" {
		profile = p.instanceProfileName(class.Spec.Role)
	}
	spec := launchTemplateSpec{
		ImageID: resolved.amis[key.arch].ID, UserData: userData, InstanceProfile: profile,
		MetadataOptions: class.Spec.MetadataOptions, BlockDevices: class.Spec.BlockDeviceMappings,
		Monitoring: aws.ToBool(class.Spec.DetailedMonitoring), PublicIP: class.Spec.AssociatePublicIPAddress,
		Tags: class.Spec.Tags, CapacityReservationID: offering.ReservationID,
	}
	for _, g := range resolved.securityGroups {
		spec.SecurityGroups = append(spec.SecurityGroups, g.ID)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", launchTemplateSpec{}, fmt.Errorf("hashing launch template: %w", err)
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
func (p *Provider) ensureLaunchTemplate(ctx context.Context, nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass, resolved *resolvedClass, key templateKey, offering cloudprovider.Offering) (string, string, error) {
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
	} else if !isAPIError(err, "InvalidLaunchTemplateName.NotFoundException") {
		return "", "", err
	}
	if class.Spec.InstanceProfile == nil {
		if _, err := p.ensureInstanceProfile(ctx, class.Spec.Role); err != nil {
			return "", "", err
		}
	}
	out, err := p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
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
	var id string
	switch {
	case err == nil:
		id = aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	case isAPIError(err, "InvalidLaunchTemplateName.AlreadyExistsException"):
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
func (p *Provider) describeLaunchTemplate(ctx context.Context, name string) (string, error) {
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
func (p *Provider) rememberTemplate(name, id string) {
	p.mu.Lock()
	p.templates[name] = knownTemplate{id: id, used: p.clock.Now()}
	p.mu.Unlock()
}

// forgetTemplates drops the launch templates of a request from those known to exist, so
// that the next launch that needs one looks it up and creates it again.
func (p *Provider) forgetTemplates(configs []ec2types.FleetLaunchTemplateConfigRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range configs {
		delete(p.templates, aws.ToString(c.LaunchTemplateSpecification.LaunchTemplateName))
	}
}

// isLaunchTemplateNotFound reports whether err is EC2's answer for a launch template that
// does not exist.
func isLaunchTemplateNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && launchTemplateNotFoundCodes[apiErr.ErrorCode()]
}

// clientToken is CreateFleet's idempotency token for a launch of the NodeClaim: its UID and
// a digest of what is asked for, within EC2's 64 characters. The templates' ids are part of
// it: a template created again after it was deleted is a new request, which EC2 must not
// answer with the failure of the first.
func clientToken(uid types.UID, capacityType string, configs []ec2types.FleetLaunchTemplateConfigRequest, templateIDs []string) string {
	h := sha256.New()
	h.Write([]byte(capacityType))
	for i, c := range configs {
		fmt.Fprintf(h, "|%s/%s", aws.ToString(c.LaunchTemplateSpecification.LaunchTemplateName), templateIDs[i])
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

func isAPIError(err error, code string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}

// launched describes the new instance and returns the NodeClaim as launched. EC2 is
// eventually consistent: a just-created instance may briefly be unknown to Describe.
func (p *Provider) launched(ctx context.Context, fleet fleetLaunch, lc *launchContext) (*karpv1.NodeClaim, error) {
	instanceID := fleet.instanceID
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
	nc := p.toNodeClaim(inst, lc.entries, lc.class)
	nc.Status.Price = lc.price(nc)
	if fleet.template != "" {
		nc.Annotations[awsv1.LaunchTemplateAnnotationKey] = fleet.template
	}
	return nc, nil
}

// adopted returns the NodeClaim as launched with an instance a previous launch left. Its
// launch template is the one this launch would use for the instance's architecture and
// capacity type.
func (p *Provider) adopted(nodeClaim *karpv1.NodeClaim, inst *ec2types.Instance, lc *launchContext) *karpv1.NodeClaim {
	nc := p.toNodeClaim(inst, lc.entries, lc.class)
	nc.Status.Price = lc.price(nc)
	for _, it := range lc.types {
		if it.Name != string(inst.InstanceType) {
			continue
		}
		offering := cloudprovider.Offering{
			CapacityType:  nc.Labels[karpv1.CapacityTypeLabelKey],
			ReservationID: nc.Labels[karpv1.CapacityReservationIDLabelKey], ReservationType: nc.Labels[karpv1.CapacityReservationTypeLabelKey],
		}
		if name, _, err := p.launchTemplate(nodeClaim, lc.class, lc.resolved, p.templateKey(it, lc.class), offering); err == nil {
			nc.Annotations[awsv1.LaunchTemplateAnnotationKey] = name
		}
	}
	return nc
}

// nilIfEmpty leaves out an empty string, such as the user data of a Custom node class
// without any.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
