package localaws

import (
	"fmt"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// fleetSummary is a CreateFleet response as "type@zone lifecycle xN" launches and
// "code type@zone lifecycle" errors.
type fleetSummary struct {
	Launched []string
	Errors   []string
}

func summarizeFleet(out *ec2.CreateFleetOutput) fleetSummary {
	var s fleetSummary
	for _, i := range out.Instances {
		o := i.LaunchTemplateAndOverrides.Overrides
		s.Launched = append(s.Launched, fmt.Sprintf("%s@%s %s x%d", i.InstanceType, aws.ToString(o.AvailabilityZone), i.Lifecycle, len(i.InstanceIds)))
	}
	for _, e := range out.Errors {
		o := e.LaunchTemplateAndOverrides.Overrides
		s.Errors = append(s.Errors, fmt.Sprintf("%s %s@%s %s", aws.ToString(e.ErrorCode), o.InstanceType, aws.ToString(o.AvailabilityZone), e.Lifecycle))
	}
	sort.Strings(s.Errors)
	return s
}

// fleetInput asks for total instances of the capacity type from the named launch template.
func fleetInput(ltName string, capacityType ec2types.DefaultTargetCapacityType, total int32, overrides ...ec2types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetInput {
	return &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(ltName), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(total),
			DefaultTargetCapacityType: capacityType,
		},
		SpotOptions: &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
	}
}

func TestCreateFleet(t *testing.T) {
	h := newHarness(t, Options{})
	h.launchTemplate(t, "x86", h.imageID(t, al2023X86Parameter), "")
	armImage := h.imageID(t, al2023ARMParameter)
	subnets := h.subnets(t)
	inEveryZone := func(types ...string) []ec2types.FleetLaunchTemplateOverridesRequest {
		var out []ec2types.FleetLaunchTemplateOverridesRequest
		for _, typ := range types {
			for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"} {
				out = append(out, override(typ, subnets[z]))
			}
		}
		return out
	}
	prioritized := func(typ, zone string, priority float64) ec2types.FleetLaunchTemplateOverridesRequest {
		o := override(typ, subnets[zone])
		o.Priority = aws.Float64(priority)
		return o
	}
	tests := []struct {
		name     string
		input    *ec2.CreateFleetInput
		want     fleetSummary
		wantCode string
	}{
		{
			name:  "spot takes the cheapest pool and reports zones that do not sell a type",
			input: fleetInput("x86", ec2types.DefaultTargetCapacityTypeSpot, 2, inEveryZone("m5.large", "c5.large")...),
			want: fleetSummary{
				Launched: []string{"c5.large@us-east-1b spot x2"},
				Errors:   []string{"Unsupported c5.large@us-east-1c spot"},
			},
		},
		{
			name:  "on-demand lowest price takes the cheaper type",
			input: fleetInput("x86", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", subnets["us-east-1a"]), override("c5.large", subnets["us-east-1a"])),
			want:  fleetSummary{Launched: []string{"c5.large@us-east-1a on-demand x1"}},
		},
		{
			name: "on-demand prioritized takes the lowest priority number",
			input: func() *ec2.CreateFleetInput {
				in := fleetInput("x86", ec2types.DefaultTargetCapacityTypeOnDemand, 1, prioritized("c5.large", "us-east-1a", 2), prioritized("m5.large", "us-east-1a", 1))
				in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyPrioritized}
				return in
			}(),
			want: fleetSummary{Launched: []string{"m5.large@us-east-1a on-demand x1"}},
		},
		{
			name:  "spot not sold in the zone is insufficient capacity",
			input: fleetInput("x86", ec2types.DefaultTargetCapacityTypeSpot, 1, override("m5.metal", subnets["us-east-1b"]), override("m5.metal", subnets["us-east-1d"])),
			want: fleetSummary{Errors: []string{
				"InsufficientInstanceCapacity m5.metal@us-east-1b spot",
				"InsufficientInstanceCapacity m5.metal@us-east-1d spot",
			}},
		},
		{
			name: "on-demand and spot capacity together",
			input: func() *ec2.CreateFleetInput {
				in := fleetInput("x86", ec2types.DefaultTargetCapacityTypeSpot, 3, inEveryZone("m5.large")...)
				in.TargetCapacitySpecification.OnDemandTargetCapacity = aws.Int32(1)
				return in
			}(),
			want: fleetSummary{Launched: []string{"m5.large@us-east-1a on-demand x1", "m5.large@us-east-1d spot x2"}},
		},
		{
			name: "zone without a subnet takes the zone's subnet",
			input: fleetInput("x86", ec2types.DefaultTargetCapacityTypeSpot, 1, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: "m5.large", AvailabilityZone: aws.String("us-east-1c"),
			}),
			want: fleetSummary{Launched: []string{"m5.large@us-east-1c spot x1"}},
		},
		{
			name:  "an AMI of another architecture cannot launch",
			input: fleetInput("x86", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m6g.large", subnets["us-east-1a"])),
			want:  fleetSummary{Errors: []string{"InvalidParameterValue m6g.large@us-east-1a on-demand"}},
		},
		{
			name: "an image override fixes the architecture",
			input: func() *ec2.CreateFleetInput {
				o := override("m6g.large", subnets["us-east-1a"])
				o.ImageId = aws.String(armImage)
				return fleetInput("x86", ec2types.DefaultTargetCapacityTypeOnDemand, 1, o)
			}(),
			want: fleetSummary{Launched: []string{"m6g.large@us-east-1a on-demand x1"}},
		},
		{
			name:  "unknown launch template",
			input: fleetInput("missing", ec2types.DefaultTargetCapacityTypeSpot, 1, override("m5.large", subnets["us-east-1a"])),
			want:  fleetSummary{Errors: []string{"InvalidLaunchTemplateName.NotFoundException m5.large@ spot"}},
		},
		{
			name: "only instant fleets",
			input: func() *ec2.CreateFleetInput {
				in := fleetInput("x86", ec2types.DefaultTargetCapacityTypeSpot, 1, override("m5.large", subnets["us-east-1a"]))
				in.Type = ec2types.FleetTypeMaintain
				return in
			}(),
			wantCode: "UnsupportedOperation",
		},
		{
			name:     "capacity out of range",
			input:    fleetInput("x86", ec2types.DefaultTargetCapacityTypeSpot, 0, override("m5.large", subnets["us-east-1a"])),
			wantCode: "InvalidParameterValue",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.CreateFleet(h.ctx, tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if err != nil {
				return
			}
			require.Regexp(t, `^fleet-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, aws.ToString(out.FleetId))
			if diff := cmp.Diff(tt.want, summarizeFleet(out)); diff != "" {
				t.Errorf("fleet (-want +got):\n%s", diff)
			}
		})
	}
}

// instanceSummary is the part of an Instance the tests check.
type instanceSummary struct {
	Type, Zone, Subnet, VPC, Image, Arch, State string
	PrivateIP, PrivateDNS, Lifecycle            string
	SpotRequest                                 bool
	Tags                                        map[string]string
}

func summarizeInstance(i ec2types.Instance) instanceSummary {
	tags := map[string]string{}
	for _, tg := range i.Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return instanceSummary{
		Type: string(i.InstanceType), Zone: aws.ToString(i.Placement.AvailabilityZone),
		Subnet: aws.ToString(i.SubnetId), VPC: aws.ToString(i.VpcId), Image: aws.ToString(i.ImageId),
		Arch: string(i.Architecture), State: string(i.State.Name),
		PrivateIP: aws.ToString(i.PrivateIpAddress), PrivateDNS: aws.ToString(i.PrivateDnsName),
		Lifecycle: string(i.InstanceLifecycle), SpotRequest: aws.ToString(i.SpotInstanceRequestId) != "",
		Tags: tags,
	}
}

func TestCreateFleetLaunchesInstancesAsDescribed(t *testing.T) {
	h := newHarness(t, Options{})
	image := h.imageID(t, al2023X86Parameter)
	ltID := h.launchTemplate(t, "nodes", image, "")
	subnets := h.subnets(t)
	out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeSpot, 2, override("m5.large", subnets["us-east-1b"]))
	ids := launchedIDs(out)
	require.Len(t, ids, 2)
	for _, id := range ids {
		require.Regexp(t, `^i-[0-9a-f]{17}$`, id)
	}

	described, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	require.NoError(t, err)
	require.Len(t, described.Reservations, 1, "one fleet pool is one reservation")
	var got []instanceSummary
	vpc := ""
	for _, i := range described.Reservations[0].Instances {
		require.Equal(t, testStart, aws.ToTime(i.LaunchTime))
		vpc = aws.ToString(i.VpcId)
		got = append(got, summarizeInstance(i))
	}
	tags := map[string]string{
		"from-template":                 "yes",
		"karpenter.sh/nodepool":         "general",
		"aws:ec2:fleet-id":              aws.ToString(out.FleetId),
		"aws:ec2launchtemplate:id":      ltID,
		"aws:ec2launchtemplate:version": "1",
	}
	want := []instanceSummary{
		{
			Type: "m5.large", Zone: "us-east-1b", Subnet: subnets["us-east-1b"], VPC: vpc, Image: image, Arch: "x86_64", State: "running",
			PrivateIP: "10.0.64.4", PrivateDNS: "ip-10-0-64-4.ec2.internal", Lifecycle: "spot", SpotRequest: true, Tags: tags,
		},
		{
			Type: "m5.large", Zone: "us-east-1b", Subnet: subnets["us-east-1b"], VPC: vpc, Image: image, Arch: "x86_64", State: "running",
			PrivateIP: "10.0.64.5", PrivateDNS: "ip-10-0-64-5.ec2.internal", Lifecycle: "spot", SpotRequest: true, Tags: tags,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}

	sn, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnets["us-east-1b"]}})
	require.NoError(t, err)
	require.Equal(t, int32(16377), aws.ToInt32(sn.Subnets[0].AvailableIpAddressCount))
}

func TestCreateFleetClientTokenLaunchesOnce(t *testing.T) {
	h := newHarness(t, Options{})
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	subnets := h.subnets(t)
	input := fleetInput("nodes", ec2types.DefaultTargetCapacityTypeSpot, 2, override("m5.large", subnets["us-east-1a"]))
	input.ClientToken = aws.String("claim-abc")

	first, err := h.ec2.CreateFleet(h.ctx, input)
	require.NoError(t, err)
	second, err := h.ec2.CreateFleet(h.ctx, input)
	require.NoError(t, err)
	require.Equal(t, aws.ToString(first.FleetId), aws.ToString(second.FleetId))
	if diff := cmp.Diff(launchedIDs(first), launchedIDs(second)); diff != "" {
		t.Errorf("instances of the repeated request (-first +second):\n%s", diff)
	}

	described, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err)
	require.Len(t, described.Reservations, 1)
	require.Len(t, described.Reservations[0].Instances, 2)

	input.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(3)
	_, err = h.ec2.CreateFleet(h.ctx, input)
	require.Equal(t, "IdempotentParameterMismatch", errorCode(t, err))
}
