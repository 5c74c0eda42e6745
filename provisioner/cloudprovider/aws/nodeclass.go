package aws

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
)

// AMI families.
const (
	familyAL2023       = awsv1.AMIFamilyAL2023
	familyAL2          = awsv1.AMIFamilyAL2
	familyBottlerocket = awsv1.AMIFamilyBottlerocket
	familyWindows2019  = awsv1.AMIFamilyWindows2019
	familyWindows2022  = awsv1.AMIFamilyWindows2022
	familyCustom       = awsv1.AMIFamilyCustom
)

// resolvedClass is what an EC2NodeClass's selectors point at right now.
type resolvedClass struct {
	family         string
	subnets        []awsv1.Subnet
	securityGroups []awsv1.SecurityGroup
	// amis by Kubernetes architecture (amd64, arm64).
	amis map[string]awsv1.AMI
	// reservations are the capacity reservations the class selects.
	reservations resolvedReservations

	// publicIPv4 marks the subnets that map a public IPv4 address on launch, by id.
	publicIPv4 map[string]bool

	mu sync.Mutex
	// free is each subnet's AvailableIpAddressCount when the selectors were resolved, less
	// the addresses launches took since: a burst between two resolutions spreads over the
	// subnets instead of piling into the one EC2 last said had the most.
	free map[string]int
}

// subnetFor returns the subnet of the zone with the most free addresses, as Karpenter
// picks; false when every subnet of the zone is full.
func (r *resolvedClass) subnetFor(zone string) (awsv1.Subnet, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best awsv1.Subnet
	most := 0
	for _, s := range r.subnets {
		if s.Zone == zone && r.free[s.ID] > most {
			best, most = s, r.free[s.ID]
		}
	}
	return best, most > 0
}

// tookAddress records that a launch took an address of the subnet.
func (r *resolvedClass) tookAddress(subnetID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.free[subnetID] > 0 {
		r.free[subnetID]--
	}
}

// full records that EC2 found no free address in the subnet.
func (r *resolvedClass) full(subnetID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.free[subnetID]; ok {
		r.free[subnetID] = 0
	}
}

// fullSubnets lists the subnets, in the zones given (all when nil), that have no free
// address, as "subnet-… (zone)"; empty unless every subnet of those zones is full.
func (r *resolvedClass) fullSubnets(zones map[string]bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.subnets {
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

// zones are the zones of the class's subnets, by name, with their IDs.
func (r *resolvedClass) zones() map[string]string {
	out := map[string]string{}
	for _, s := range r.subnets {
		out[s.Zone] = s.ZoneID
	}
	return out
}

// errSelectorMatchedNothing marks a selector that resolved to nothing; the node class is
// then not ready.
var errSelectorMatchedNothing = errors.New("selector matched nothing")

// resolveClass resolves the selectors of an EC2NodeClass against EC2 and SSM.
func (p *Provider) resolveClass(ctx context.Context, class *awsv1.EC2NodeClass) (*resolvedClass, error) {
	subnets, free, public, err := p.resolveSubnets(ctx, class.Spec.SubnetSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("resolving subnetSelectorTerms: %w", err)
	}
	groups, err := p.resolveSecurityGroups(ctx, class.Spec.SecurityGroupSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("resolving securityGroupSelectorTerms: %w", err)
	}
	family, err := amiFamily(class)
	if err != nil {
		return nil, err
	}
	if err := validateFamily(family, class); err != nil {
		return nil, err
	}
	amis, err := p.resolveAMIs(ctx, class.Spec.AMISelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("resolving amiSelectorTerms: %w", err)
	}
	if windowsBuild(class) != "" {
		if amis, err = windowsAMIs(amis); err != nil {
			return nil, fmt.Errorf("resolving amiSelectorTerms: %w", err)
		}
	}
	var reservations resolvedReservations
	if terms := class.Spec.CapacityReservationSelectorTerms; len(terms) > 0 {
		if reservations, err = p.resolveCapacityReservations(ctx, terms, p.clock.Now()); err != nil {
			return nil, fmt.Errorf("resolving capacityReservationSelectorTerms: %w", err)
		}
	}
	return &resolvedClass{family: family, subnets: subnets, securityGroups: groups, amis: amis, reservations: reservations, free: free, publicIPv4: public}, nil
}

// amiFamily is the node class's amiFamily, or the family of its alias. An amiFamily that
// contradicts the alias is refused (Custom may go with any alias).
func amiFamily(class *awsv1.EC2NodeClass) (string, error) {
	aliasFamily := class.AliasFamily()
	if class.Spec.AMIFamily == nil {
		return class.ResolvedAMIFamily(), nil
	}
	if set := *class.Spec.AMIFamily; aliasFamily != "" && set != familyCustom && set != aliasFamily {
		return "", fmt.Errorf("spec.amiFamily %s contradicts the alias of amiSelectorTerms (%s): remove amiFamily or set it to %s or Custom", set, aliasFamily, aliasFamily)
	}
	return *class.Spec.AMIFamily, nil
}

// validateFamily refuses node class settings the AMI family's bootstrap cannot carry out.
func validateFamily(family string, class *awsv1.EC2NodeClass) error {
	var errs []error
	if windowsBuild(class) != "" {
		errs = append(errs, validateWindows(class)...)
	}
	if k := class.Spec.Kubelet; family == familyBottlerocket && k != nil {
		if k.PodsPerCore != nil {
			errs = append(errs, errors.New("spec.kubelet.podsPerCore has no Bottlerocket setting: remove it, or set maxPods, or use AL2023"))
		}
		if len(k.EvictionSoft) > 0 || len(k.EvictionSoftGracePeriod) > 0 {
			errs = append(errs, errors.New("spec.kubelet.evictionSoft has no Bottlerocket setting: remove it, or use evictionHard, or use AL2023"))
		}
	}
	return errors.Join(errs...)
}

func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ec2types.Filter
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}

// resolveSubnets returns the subnets the terms select, sorted by id, the free addresses of
// each, and which of them map a public IPv4 address on launch.
func (p *Provider) resolveSubnets(ctx context.Context, terms []awsv1.SubnetSelectorTerm) ([]awsv1.Subnet, map[string]int, map[string]bool, error) {
	seen := map[string]awsv1.Subnet{}
	free := map[string]int{}
	public := map[string]bool{}
	for _, term := range terms {
		filters := tagFilters(term.Tags)
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

func (p *Provider) resolveSecurityGroups(ctx context.Context, terms []awsv1.SecurityGroupSelectorTerm) ([]awsv1.SecurityGroup, error) {
	seen := map[string]awsv1.SecurityGroup{}
	for _, term := range terms {
		filters := tagFilters(term.Tags)
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

// aliasVersionLatest is the version of an alias that follows the newest release.
const aliasVersionLatest = "latest"

// aliasParameters names the SSM public parameters that hold an alias's AMI per architecture,
// in the layout AWS publishes: al2023@v20240807, al2@v20240807 and bottlerocket@1.20.3 (or
// v1.20.3) pin a release, @latest follows the recommended one. Windows aliases have only
// @latest and only amd64 (windowsAliasParameters).
func aliasParameters(alias, kubernetesVersion string) (map[string]string, error) {
	family, version, _ := strings.Cut(alias, "@")
	if version == "" {
		return nil, fmt.Errorf("alias %q has no version: write %s@latest or %s@<version>", alias, family, family)
	}
	latest := version == aliasVersionLatest
	switch family {
	case "al2023":
		base := "/aws/service/eks/optimized-ami/" + kubernetesVersion + "/amazon-linux-2023/"
		out := map[string]string{}
		for arch, machine := range map[string]string{architectureAMD64: "x86_64", architectureARM64: "arm64"} {
			name := "recommended"
			if !latest {
				name = "amazon-eks-node-al2023-" + machine + "-standard-" + kubernetesVersion + "-" + version
			}
			out[arch] = base + machine + "/standard/" + name + "/image_id"
		}
		return out, nil
	case "al2":
		base := "/aws/service/eks/optimized-ami/" + kubernetesVersion
		amd, arm := "recommended", "recommended"
		if !latest {
			amd = "amazon-eks-node-" + kubernetesVersion + "-" + version
			arm = "amazon-eks-arm64-node-" + kubernetesVersion + "-" + version
		}
		return map[string]string{
			architectureAMD64: base + "/amazon-linux-2/" + amd + "/image_id",
			architectureARM64: base + "/amazon-linux-2-arm64/" + arm + "/image_id",
		}, nil
	case "windows2019", "windows2022":
		return windowsAliasParameters(alias, family, version, kubernetesVersion)
	case "bottlerocket":
		base := "/aws/service/bottlerocket/aws-k8s-" + kubernetesVersion
		// Bottlerocket publishes its releases without the v that its tags carry.
		version = strings.TrimPrefix(version, "v")
		return map[string]string{
			architectureAMD64: base + "/x86_64/" + version + "/image_id",
			architectureARM64: base + "/arm64/" + version + "/image_id",
		}, nil
	}
	return nil, fmt.Errorf("alias %q: unknown family %q, use al2023, al2, bottlerocket, windows2019 or windows2022", alias, family)
}

// aliasImageIDs reads the AMI ids of an alias from SSM. An architecture without a parameter
// is skipped (not every release is built for both); an alias with none is an error that
// names the alias and what to do.
func (p *Provider) aliasImageIDs(ctx context.Context, alias string) ([]string, error) {
	params, err := aliasParameters(alias, p.opts.KubernetesVersion)
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
		id, err := parameterValue(name, out)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		family, version, _ := strings.Cut(alias, "@")
		return nil, fmt.Errorf("alias %q: no %s release %s for Kubernetes %s (SSM parameters %s not found): pin a published release or use %s@latest",
			alias, family, version, p.opts.KubernetesVersion, strings.Join(names, ", "), family)
	}
	sort.Strings(ids)
	return ids, nil
}

// parameterValue is the AMI id an SSM parameter holds: one token, as SSM's public AMI
// parameters give it.
func parameterValue(name string, out *ssm.GetParameterOutput) (string, error) {
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
func (p *Provider) resolveAMIs(ctx context.Context, terms []awsv1.AMISelectorTerm) (map[string]awsv1.AMI, error) {
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
			id, err := parameterValue(term.SSMParameter, out)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, &ec2.DescribeImagesInput{ImageIds: []string{id}})
		case term.ID != "":
			inputs = append(inputs, &ec2.DescribeImagesInput{ImageIds: []string{term.ID}})
		default:
			in := &ec2.DescribeImagesInput{Filters: tagFilters(term.Tags)}
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
				arch := architectureAMD64
				if img.Architecture == ec2types.ArchitectureValuesArm64 {
					arch = architectureARM64
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
