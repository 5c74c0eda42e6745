// Package nodeclass resolves the selectors of EC2NodeClasses (subnets, security groups,
// AMIs and capacity reservations) against EC2 and SSM, and caches what they resolve to.
package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/reservation"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
)

// Resolved is what an EC2NodeClass's selectors point at right now.
type Resolved struct {
	// Family is the class's AMI family.
	Family string
	// Subnets and SecurityGroups are those the class selects, sorted by id.
	Subnets        []awsv1.Subnet
	SecurityGroups []awsv1.SecurityGroup
	// AMIs by Kubernetes architecture (amd64, arm64).
	AMIs map[string]awsv1.AMI
	// Reservations are the capacity reservations the class selects.
	Reservations *reservation.Resolved
	// PublicIPv4 marks the subnets that map a public IPv4 address on launch, by id.
	PublicIPv4 map[string]bool

	mu sync.Mutex
	// free is each subnet's AvailableIpAddressCount when the selectors were resolved, less
	// the addresses launches took since: a burst between two resolutions spreads over the
	// subnets instead of piling into the one EC2 last said had the most.
	free map[string]int
}

// SubnetFor returns the subnet of the zone with the most free addresses, as Karpenter
// picks; false when every subnet of the zone is full.
func (r *Resolved) SubnetFor(zone string) (awsv1.Subnet, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best awsv1.Subnet
	most := 0
	for _, s := range r.Subnets {
		if s.Zone == zone && r.free[s.ID] > most {
			best, most = s, r.free[s.ID]
		}
	}
	return best, most > 0
}

// TookAddress records that a launch took an address of the subnet.
func (r *Resolved) TookAddress(subnetID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.free[subnetID] > 0 {
		r.free[subnetID]--
	}
}

// Full records that EC2 found no free address in the subnet.
func (r *Resolved) Full(subnetID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.free[subnetID]; ok {
		r.free[subnetID] = 0
	}
}

// FullSubnets lists the subnets, in the zones given (all when nil), that have no free
// address, as "subnet-… (zone)"; empty unless every subnet of those zones is full.
func (r *Resolved) FullSubnets(zones map[string]bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.Subnets {
		if zones != nil && !zones[s.Zone] {
			continue
		}
		if r.free[s.ID] > 0 {
			return nil
		}
		out = append(out, fmt.Sprintf("%s (%s)", s.ID, s.Zone))
	}
	return out
}

// Zones are the zones of the class's subnets, by name, with their IDs.
func (r *Resolved) Zones() map[string]string {
	out := map[string]string{}
	for _, s := range r.Subnets {
		out[s.Zone] = s.ZoneID
	}
	return out
}

// errSelectorMatchedNothing marks a selector that resolved to nothing; the node class is
// then not ready.
var errSelectorMatchedNothing = errors.New("selector matched nothing")

// Resolve resolves the selectors of an EC2NodeClass against EC2 and SSM.
func (p *Resolver) Resolve(ctx context.Context, class *awsv1.EC2NodeClass) (*Resolved, error) {
	subnets, free, public, err := p.resolveSubnets(ctx, class.Spec.SubnetSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("resolving subnetSelectorTerms: %w", err)
	}
	groups, err := p.resolveSecurityGroups(ctx, class.Spec.SecurityGroupSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("resolving securityGroupSelectorTerms: %w", err)
	}
	family, err := amifamily.Of(class)
	if err != nil {
		return nil, err
	}
	if err := amifamily.Validate(family, class); err != nil {
		return nil, err
	}
	amis, err := p.resolveAMIs(ctx, class.Spec.AMISelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("resolving amiSelectorTerms: %w", err)
	}
	if amifamily.WindowsBuild(class) != "" {
		if amis, err = amifamily.WindowsAMIs(amis); err != nil {
			return nil, fmt.Errorf("resolving amiSelectorTerms: %w", err)
		}
	}
	reservations := &reservation.Resolved{}
	if terms := class.Spec.CapacityReservationSelectorTerms; len(terms) > 0 {
		if reservations, err = reservation.Resolve(ctx, p.ec2, terms, p.clock.Now()); err != nil {
			return nil, fmt.Errorf("resolving capacityReservationSelectorTerms: %w", err)
		}
	}
	return &Resolved{Family: family, Subnets: subnets, SecurityGroups: groups, AMIs: amis, Reservations: reservations, free: free, PublicIPv4: public}, nil
}

// resolveSubnets returns the subnets the terms select, sorted by id, the free addresses of
// each, and which of them map a public IPv4 address on launch.
func (p *Resolver) resolveSubnets(ctx context.Context, terms []awsv1.SubnetSelectorTerm) ([]awsv1.Subnet, map[string]int, map[string]bool, error) {
	seen := map[string]awsv1.Subnet{}
	free := map[string]int{}
	public := map[string]bool{}
	for _, term := range terms {
		filters := tags.Filters(term.Tags)
		if term.ID != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("subnet-id"), Values: []string{term.ID}})
		}
		pages := ec2.NewDescribeSubnetsPaginator(p.ec2, &ec2.DescribeSubnetsInput{Filters: filters})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("describing subnets: %w", err)
			}
			for _, s := range page.Subnets {
				seen[aws.ToString(s.SubnetId)] = awsv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)}
				free[aws.ToString(s.SubnetId)] = int(aws.ToInt32(s.AvailableIpAddressCount))
				public[aws.ToString(s.SubnetId)] = aws.ToBool(s.MapPublicIpOnLaunch)
			}
		}
	}
	if len(seen) == 0 {
		return nil, nil, nil, errSelectorMatchedNothing
	}
	out := make([]awsv1.Subnet, 0, len(seen))
	for _, s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, free, public, nil
}

func (p *Resolver) resolveSecurityGroups(ctx context.Context, terms []awsv1.SecurityGroupSelectorTerm) ([]awsv1.SecurityGroup, error) {
	seen := map[string]awsv1.SecurityGroup{}
	for _, term := range terms {
		filters := tags.Filters(term.Tags)
		if term.ID != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("group-id"), Values: []string{term.ID}})
		}
		if term.Name != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{term.Name}})
		}
		pages := ec2.NewDescribeSecurityGroupsPaginator(p.ec2, &ec2.DescribeSecurityGroupsInput{Filters: filters})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing security groups: %w", err)
			}
			for _, g := range page.SecurityGroups {
				seen[aws.ToString(g.GroupId)] = awsv1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)}
			}
		}
	}
	if len(seen) == 0 {
		return nil, errSelectorMatchedNothing
	}
	out := make([]awsv1.SecurityGroup, 0, len(seen))
	for _, g := range seen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// aliasImageIDs reads the AMI ids of an alias from SSM. An architecture without a parameter
// is skipped (not every release is built for both); an alias with none is an error that
// names the alias and what to do.
func (p *Resolver) aliasImageIDs(ctx context.Context, alias string) ([]string, error) {
	params, err := amifamily.AliasParameters(alias, p.kubernetesVersion)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(params))
	for _, name := range params {
		names = append(names, name)
	}
	sort.Strings(names)
	var ids []string
	for _, name := range names {
		out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		var notFound *ssmtypes.ParameterNotFound
		if errors.As(err, &notFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading SSM parameter %s: %w", name, err)
		}
		id, err := ParameterValue(name, out)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		family, version, _ := strings.Cut(alias, "@")
		return nil, fmt.Errorf("alias %q: no %s release %s for Kubernetes %s (SSM parameters %s not found): pin a published release or use %s@latest",
			alias, family, version, p.kubernetesVersion, strings.Join(names, ", "), family)
	}
	sort.Strings(ids)
	return ids, nil
}

// ParameterValue is the AMI id an SSM parameter holds: one token, as SSM's public AMI
// parameters give it.
func ParameterValue(name string, out *ssm.GetParameterOutput) (string, error) {
	if out == nil || out.Parameter == nil {
		return "", fmt.Errorf("reading SSM parameter %s: the response has no Parameter", name)
	}
	value := strings.TrimSpace(aws.ToString(out.Parameter.Value))
	if value == "" || strings.ContainsFunc(value, unicode.IsSpace) {
		return "", fmt.Errorf("reading SSM parameter %s: Parameter.Value %q is not an AMI id", name, aws.ToString(out.Parameter.Value))
	}
	return value, nil
}

// resolveAMIs finds the newest AMI per architecture that the terms select.
func (p *Resolver) resolveAMIs(ctx context.Context, terms []awsv1.AMISelectorTerm) (map[string]awsv1.AMI, error) {
	var inputs []*ec2.DescribeImagesInput
	for _, term := range terms {
		switch {
		case term.Alias != "":
			ids, err := p.aliasImageIDs(ctx, term.Alias)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, &ec2.DescribeImagesInput{ImageIds: ids})
		case term.SSMParameter != "":
			out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(term.SSMParameter)})
			if err != nil {
				return nil, fmt.Errorf("reading SSM parameter %s: %w", term.SSMParameter, err)
			}
			id, err := ParameterValue(term.SSMParameter, out)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, &ec2.DescribeImagesInput{ImageIds: []string{id}})
		case term.ID != "":
			inputs = append(inputs, &ec2.DescribeImagesInput{ImageIds: []string{term.ID}})
		default:
			in := &ec2.DescribeImagesInput{Filters: tags.Filters(term.Tags)}
			if term.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{term.Name}})
			}
			switch {
			case term.Owner != "":
				in.Owners = []string{term.Owner}
			case term.Name != "":
				// As in Karpenter: a name alone matches only the account's and Amazon's
				// images, never a public image of another account that happens to match.
				in.Owners = []string{"self", "amazon"}
			}
			inputs = append(inputs, in)
		}
	}
	newest := map[string]ec2types.Image{}
	for _, in := range inputs {
		pages := ec2.NewDescribeImagesPaginator(p.ec2, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing images: %w", err)
			}
			for _, img := range page.Images {
				arch := amifamily.ArchitectureAMD64
				if img.Architecture == ec2types.ArchitectureValuesArm64 {
					arch = amifamily.ArchitectureARM64
				}
				if cur, ok := newest[arch]; !ok || aws.ToString(img.CreationDate) > aws.ToString(cur.CreationDate) {
					newest[arch] = img
				}
			}
		}
	}
	if len(newest) == 0 {
		return nil, errSelectorMatchedNothing
	}
	out := map[string]awsv1.AMI{}
	for arch, img := range newest {
		out[arch] = awsv1.AMI{
			ID:   aws.ToString(img.ImageId),
			Name: aws.ToString(img.Name),
			Requirements: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
			},
		}
	}
	return out, nil
}
