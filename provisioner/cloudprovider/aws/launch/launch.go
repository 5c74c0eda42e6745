// Package launch launches EC2 instances for NodeClaims with CreateFleet: it chooses the
// offerings of each request, falls back across capacity types and subnets on capacity
// errors, and creates, reuses and garbage-collects the launch templates the requests name.
package launch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/apierror"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instanceprofile"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodeclass"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/unavailable"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/userdata"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// MaxOverrides caps the (instance type, subnet) pairs of one CreateFleet request.
const MaxOverrides = 150

// MaxAttempts bounds the CreateFleet calls of one Create: each retries with what the
// errors of the previous ones left.
const MaxAttempts = 4

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

// Options configure launches.
type Options struct {
	// Cluster is what nodes need to join the cluster.
	Cluster userdata.ClusterInfo
	// PrefixDelegation puts the max pods of each instance type into the user data.
	PrefixDelegation bool
	// LaunchTemplateTTL is how long a launch template neither created nor used by a launch
	// is kept before GarbageCollect deletes it.
	LaunchTemplateTTL time.Duration
}

// Launcher launches instances and keeps their launch templates.
type Launcher struct {
	opts        Options
	ec2         *ec2.Client
	profiles    *instanceprofile.Provider
	unavailable *unavailable.Offerings
	// claims lists the cluster's NodeClaims, whose launch templates are kept.
	claims client.Reader
	clock  clock.Clock

	mu sync.Mutex
	// templates holds the launch templates known to exist, by name.
	templates map[string]knownTemplate
}

// New returns a launcher that marks offerings with capacity errors in unavailable.
func New(opts Options, client *ec2.Client, profiles *instanceprofile.Provider, offerings *unavailable.Offerings, claims client.Reader, clk clock.Clock) *Launcher {
	return &Launcher{opts: opts, ec2: client, profiles: profiles, unavailable: offerings, claims: claims, clock: clk, templates: map[string]knownTemplate{}}
}

// Context is what a launch from a node class needs: the class and what its selectors
// resolve to.
type Context struct {
	Class    *awsv1.EC2NodeClass
	Resolved *nodeclass.Resolved
}

// Launch launches one instance for the NodeClaim among the offerings of types, the
// instance types of the node class; prioritized asks for on-demand capacity in the order of
// types rather than by EC2's lowest price. It launches into a capacity reservation when the
// NodeClaim allows capacity type reserved and one has an instance left, else spot when the
// NodeClaim allows it and a spot offering is available, on-demand otherwise or once no
// spot offering is left. A reservation found full is marked so and the launch goes on with
// the other offerings.
// Offerings that report capacity errors are marked unavailable and the launch retried at
// once with the others. A launch template that CreateFleet does not find is forgotten and
// created again for one more attempt.
func (p *Launcher) Launch(ctx context.Context, nodeClaim *karpv1.NodeClaim, lc Context, types []*cloudprovider.InstanceType, prioritized bool) (Fleet, error) {
	candidates := AllowedOfferings(nodeClaim, types)
	if len(candidates) == 0 {
		return Fleet{}, noOfferingError(lc)
	}
	var failures []string
	excluded := map[unavailable.Key]bool{}
	recreated := false
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		capacityType, chosen := nextCapacityType(candidates, excluded)
		if len(chosen) == 0 {
			break
		}
		fleet, err := p.CreateFleet(ctx, nodeClaim, lc, chosen, prioritized)
		if isLaunchTemplateNotFound(err) && !recreated {
			// createFleet forgot the templates: the next attempt creates them again.
			recreated = true
			continue
		}
		if err != nil {
			return Fleet{}, err
		}
		before := len(excluded)
		templateGone, subnetLeft := false, false
		for _, e := range fleet.errors {
			if e.code == codeInsufficientFreeAddresses && e.key != (unavailable.Key{}) {
				// Another subnet of the zone with free addresses is tried next, without
				// giving up on the offering.
				if _, ok := lc.Resolved.SubnetFor(e.key.Zone); ok {
					subnetLeft = true
					continue
				}
			}
			// Pools that failed are avoided even when the fleet launched in another one.
			if e.key != (unavailable.Key{}) && unavailable.IsCapacityError(e.code) {
				p.unavailable.Mark(e.key)
			}
			templateGone = templateGone || launchTemplateNotFoundCodes[e.code]
			if fleet.InstanceID != "" {
				continue
			}
			failures = append(failures, e.String())
			// A missing template is no fault of the offering.
			if e.key != (unavailable.Key{}) && !launchTemplateNotFoundCodes[e.code] {
				excluded[e.key] = true
			}
		}
		if fleet.InstanceID == "" && lc.Resolved.FullSubnets(nil) != nil {
			// The last free addresses went meanwhile: no other offering can launch either.
			return Fleet{}, noOfferingError(lc)
		}
		if fleet.InstanceID != "" {
			if capacityType == karpv1.CapacityTypeReserved {
				lc.Resolved.Reservations.Took(chosen[0].Offering.ReservationID)
			}
			return Fleet{InstanceID: fleet.InstanceID, Template: fleet.Template}, nil
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
	return Fleet{}, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("CreateFleet launched nothing: %s", strings.Join(failures, "; ")))
}

// noOfferingError is the error of a launch no offering is left for, naming the subnets when
// they are all full, since no capacity error will clear by itself then.
func noOfferingError(lc Context) error {
	if full := lc.Resolved.FullSubnets(nil); len(full) > 0 {
		return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("EC2NodeClass %q: %w: %s", lc.Class.Name, cloudprovider.ErrSubnetsFull, strings.Join(full, ", ")))
	}
	return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no available offering of EC2NodeClass %q satisfies the NodeClaim's requirements", lc.Class.Name))
}

// nextCapacityType returns the capacity type to launch next and its candidates not yet
// excluded: the cheapest reserved one while any is left (one reservation a request, since
// the launch template targets it), then spot while any is left, then on-demand.
func nextCapacityType(candidates []Candidate, excluded map[unavailable.Key]bool) (string, []Candidate) {
	for _, c := range candidates {
		if c.Offering.CapacityType == karpv1.CapacityTypeReserved && !excluded[c.key()] {
			return karpv1.CapacityTypeReserved, []Candidate{c}
		}
	}
	for _, capacityType := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		var chosen []Candidate
		for _, c := range candidates {
			if c.Offering.CapacityType == capacityType && !excluded[c.key()] {
				chosen = append(chosen, c)
			}
		}
		if len(chosen) > 0 {
			return capacityType, chosen
		}
	}
	return "", nil
}

// Candidate is an offering the NodeClaim allows.
type Candidate struct {
	InstanceType *cloudprovider.InstanceType
	Offering     cloudprovider.Offering
}

func (c Candidate) key() unavailable.Key { return unavailable.KeyOf(c.InstanceType.Name, c.Offering) }

// fleetError is an error CreateFleet reported, and the offering it is about (zero when the
// error names none).
type fleetError struct {
	key           unavailable.Key
	code, message string
}

func (e fleetError) String() string {
	if e.key == (unavailable.Key{}) {
		return e.code + ": " + e.message
	}
	return fmt.Sprintf("%s in %s as %s: %s: %s", e.key.InstanceType, e.key.Zone, e.key.CapacityType, e.code, e.message)
}

// AllowedOfferings returns the available offerings the NodeClaim's requirements allow,
// cheapest first.
func AllowedOfferings(nodeClaim *karpv1.NodeClaim, types []*cloudprovider.InstanceType) []Candidate {
	var out []Candidate
	for _, it := range types {
		for _, o := range it.Offerings {
			if !o.Available {
				continue
			}
			if c := (Candidate{InstanceType: it, Offering: o}); requirements.MatchesFunc(nodeClaim.Spec.Requirements, func(key string) (string, bool) {
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
		if a, b := out[i].Offering.NodePrice(), out[j].Offering.NodePrice(); a != b {
			return a < b
		}
		if out[i].InstanceType.Name != out[j].InstanceType.Name {
			return out[i].InstanceType.Name < out[j].InstanceType.Name
		}
		return out[i].Offering.Zone < out[j].Offering.Zone
	})
	return out
}

// override is a Candidate with the subnet it launches in.
type override struct {
	Candidate
	subnet string
}

// label is the value of a label a node launched from the Candidate has.
func (c Candidate) label(key string) (string, bool) { return c.InstanceType.Label(c.Offering, key) }

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

// Fleet is what one CreateFleet call did.
type Fleet struct {
	// InstanceID is the instance launched, "" when none was.
	InstanceID string
	// Template is the launch template of the instance launched.
	Template string
	// errors are those EC2 reported per override, and those of candidates whose zone has no
	// subnet with a free address, which were not sent.
	errors []fleetError
}

// CreateFleet asks EC2 for one instance among the candidates, all of one capacity type (a
// reserved one alone: on-demand with a launch template targeting its reservation);
// prioritized asks for on-demand capacity in the candidates' order rather than by EC2's
// lowest price. When EC2 says a launch template does not exist, for the request or for an
// override, the provider forgets the request's templates so that the next launch creates
// them again.
func (p *Launcher) CreateFleet(ctx context.Context, nodeClaim *karpv1.NodeClaim, lc Context, candidates []Candidate, prioritized bool) (Fleet, error) {
	class, resolved := lc.Class, lc.Resolved
	offering := candidates[0].Offering
	capacityType, ec2CapacityType := offering.CapacityType, offering.CapacityType
	if capacityType == karpv1.CapacityTypeReserved {
		ec2CapacityType = karpv1.CapacityTypeOnDemand
	}
	var placed []override
	subnetOf := map[string]string{}
	var launch Fleet
	for _, c := range candidates {
		zone := c.Offering.Zone
		if _, ok := subnetOf[zone]; !ok {
			s, _ := resolved.SubnetFor(zone)
			subnetOf[zone] = s.ID
		}
		if subnetOf[zone] == "" {
			launch.errors = append(launch.errors, fleetError{key: c.key(), code: codeInsufficientFreeAddresses, message: "no subnet of the zone has a free address"})
			continue
		}
		placed = append(placed, override{Candidate: c, subnet: subnetOf[zone]})
	}
	if len(placed) == 0 {
		return launch, nil
	}
	byTemplate := map[templateKey][]ec2types.FleetLaunchTemplateOverridesRequest{}
	for i, o := range chooseOverrides(placed, requirements.MinValues(nodeClaim.Spec.Requirements), MaxOverrides) {
		key := p.templateKey(o.InstanceType, class)
		byTemplate[key] = append(byTemplate[key], ec2types.FleetLaunchTemplateOverridesRequest{
			InstanceType: ec2types.InstanceType(o.InstanceType.Name),
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
			return Fleet{}, err
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
		return Fleet{}, fmt.Errorf("creating fleet: %w", err)
	}
	zoneOf := map[string]string{}
	for _, s := range resolved.Subnets {
		zoneOf[s.ID] = s.Zone
	}
	for _, e := range out.Errors {
		fe := fleetError{code: aws.ToString(e.ErrorCode), message: aws.ToString(e.ErrorMessage)}
		apierror.Count("EC2", "CreateFleet", fe.code)
		if o := e.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil && o.Overrides.InstanceType != "" {
			zone := aws.ToString(o.Overrides.AvailabilityZone)
			if zone == "" {
				zone = zoneOf[aws.ToString(o.Overrides.SubnetId)]
			}
			lifecycle := capacityType
			if e.Lifecycle != "" && capacityType != karpv1.CapacityTypeReserved {
				lifecycle = string(e.Lifecycle)
			}
			fe.key = unavailable.KeyOf(string(o.Overrides.InstanceType), cloudprovider.Offering{Zone: zone, CapacityType: lifecycle, ReservationID: offering.ReservationID})
		}
		launch.errors = append(launch.errors, fe)
		if fe.code == codeInsufficientFreeAddresses && e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil {
			resolved.Full(aws.ToString(e.LaunchTemplateAndOverrides.Overrides.SubnetId))
		}
		if launchTemplateNotFoundCodes[fe.code] {
			p.forgetTemplates(configs)
		}
	}
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) > 0 {
			if o := inst.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
				resolved.TookAddress(aws.ToString(o.Overrides.SubnetId))
			}
			launch.InstanceID, launch.Template = inst.InstanceIds[0], templateOf[inst.InstanceType]
			return launch, nil
		}
	}
	klog.FromContext(ctx).V(1).Info("CreateFleet launched nothing", "nodeClaim", klog.KObj(nodeClaim), "capacityType", capacityType, "errors", len(launch.errors))
	return launch, nil
}

func (p *Launcher) instanceTags(nodeClaim *karpv1.NodeClaim, class *awsv1.EC2NodeClass) []ec2types.Tag {
	out := map[string]string{}
	for k, v := range class.Spec.Tags {
		out[k] = v
	}
	out[tags.ClusterKey(p.opts.Cluster.Name)] = "owned"
	out[tags.EKSCluster] = p.opts.Cluster.Name
	out[tags.NodePool] = nodeClaim.Labels[karpv1.NodePoolLabelKey]
	out[tags.NodeClaim] = nodeClaim.Name
	out[tags.NodeClass] = class.Name
	if _, ok := class.Spec.Tags[tags.Name]; !ok {
		out[tags.Name] = nodeClaim.Labels[karpv1.NodePoolLabelKey] + "/" + nodeClaim.Name
	}
	return tags.EC2(out)
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
