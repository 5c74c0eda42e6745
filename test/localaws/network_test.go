package localaws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestDescribeAvailabilityZones(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name     string
		input    ec2.DescribeAvailabilityZonesInput
		want     []string
		wantCode string
	}{
		{name: "all", want: []string{"us-east-1a/use1-az1", "us-east-1b/use1-az2", "us-east-1c/use1-az3", "us-east-1d/use1-az4"}},
		{name: "by name and id", input: ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1b"}, ZoneIds: []string{"use1-az4"}}, want: []string{"us-east-1b/use1-az2", "us-east-1d/use1-az4"}},
		{name: "by filter", input: ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{{Name: aws.String("zone-id"), Values: []string{"use1-az3"}}}}, want: []string{"us-east-1c/use1-az3"}},
		{name: "unknown zone", input: ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1z"}}, wantCode: "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.DescribeAvailabilityZones(h.ctx, &tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if err != nil {
				return
			}
			var got []string
			for _, z := range out.AvailabilityZones {
				require.Equal(t, ec2types.AvailabilityZoneStateAvailable, z.State)
				require.Equal(t, "us-east-1", aws.ToString(z.RegionName))
				got = append(got, aws.ToString(z.ZoneName)+"/"+aws.ToString(z.ZoneId))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("zones (-want +got):\n%s", diff)
			}
		})
	}
}

// subnetSummary is the part of a Subnet the tests check.
type subnetSummary struct {
	Zone, ZoneID, CIDR, VPC string
	Available               int32
	Tags                    map[string]string
}

func TestDescribeSubnetsFindsTheClusterSubnets(t *testing.T) {
	h := newHarness(t, Options{ClusterName: "demo"})
	out, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"demo"}}},
	})
	require.NoError(t, err)
	vpc := aws.ToString(out.Subnets[0].VpcId)
	var got []subnetSummary
	ids := map[string]bool{}
	for _, sn := range out.Subnets {
		require.Regexp(t, `^subnet-[0-9a-f]{17}$`, aws.ToString(sn.SubnetId))
		ids[aws.ToString(sn.SubnetId)] = true
		tags := map[string]string{}
		for _, tg := range sn.Tags {
			tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		got = append(got, subnetSummary{
			Zone: aws.ToString(sn.AvailabilityZone), ZoneID: aws.ToString(sn.AvailabilityZoneId),
			CIDR: aws.ToString(sn.CidrBlock), VPC: aws.ToString(sn.VpcId),
			Available: aws.ToInt32(sn.AvailableIpAddressCount), Tags: tags,
		})
	}
	want := []subnetSummary{
		{Zone: "us-east-1a", ZoneID: "use1-az1", CIDR: "10.0.0.0/18", VPC: vpc, Available: 16379, Tags: map[string]string{"karpenter.sh/discovery": "demo", "Name": "demo-private-us-east-1a"}},
		{Zone: "us-east-1b", ZoneID: "use1-az2", CIDR: "10.0.64.0/18", VPC: vpc, Available: 16379, Tags: map[string]string{"karpenter.sh/discovery": "demo", "Name": "demo-private-us-east-1b"}},
		{Zone: "us-east-1c", ZoneID: "use1-az3", CIDR: "10.0.128.0/18", VPC: vpc, Available: 16379, Tags: map[string]string{"karpenter.sh/discovery": "demo", "Name": "demo-private-us-east-1c"}},
		{Zone: "us-east-1d", ZoneID: "use1-az4", CIDR: "10.0.192.0/18", VPC: vpc, Available: 16379, Tags: map[string]string{"karpenter.sh/discovery": "demo", "Name": "demo-private-us-east-1d"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("subnets (-want +got):\n%s", diff)
	}
	require.Len(t, ids, 4)

	again, err := New(Options{ClusterName: "demo"})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(out.Subnets[0].SubnetId), again.subnets[0].id, "subnet ids are deterministic")
}

func TestDescribeSubnetsFilters(t *testing.T) {
	h := newHarness(t, Options{})
	subnets := h.subnets(t)
	tests := []struct {
		name     string
		input    ec2.DescribeSubnetsInput
		want     []string
		wantCode string
	}{
		{name: "by id", input: ec2.DescribeSubnetsInput{SubnetIds: []string{subnets["us-east-1c"]}}, want: []string{"us-east-1c"}},
		{name: "by zone", input: ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1a", "us-east-1d"}}}}, want: []string{"us-east-1a", "us-east-1d"}},
		{name: "by name tag wildcard", input: ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:Name"), Values: []string{"*-private-us-east-1b"}}}}, want: []string{"us-east-1b"}},
		{name: "by tag key", input: ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/discovery"}}}}, want: []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"}},
		{name: "other cluster", input: ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"someone-else"}}}}},
		{name: "unknown id", input: ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-00000000000000000"}}, wantCode: "InvalidSubnetID.NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.DescribeSubnets(h.ctx, &tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if err != nil {
				return
			}
			var got []string
			for _, sn := range out.Subnets {
				got = append(got, aws.ToString(sn.AvailabilityZone))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("subnet zones (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeSecurityGroups(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name     string
		input    ec2.DescribeSecurityGroupsInput
		want     []string
		wantCode string
	}{
		{name: "all", want: []string{"default", "tailor-local-node"}},
		{name: "by discovery tag", input: ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"tailor-local"}}}}, want: []string{"tailor-local-node"}},
		{name: "by name", input: ec2.DescribeSecurityGroupsInput{GroupNames: []string{"default"}}, want: []string{"default"}},
		{name: "by name filter", input: ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"*-node"}}}}, want: []string{"tailor-local-node"}},
		{name: "unknown id", input: ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-00000000000000000"}}, wantCode: "InvalidGroup.NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.DescribeSecurityGroups(h.ctx, &tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if err != nil {
				return
			}
			var got []string
			for _, g := range out.SecurityGroups {
				require.Regexp(t, `^sg-[0-9a-f]{17}$`, aws.ToString(g.GroupId))
				got = append(got, aws.ToString(g.GroupName))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("security groups (-want +got):\n%s", diff)
			}
		})
	}
}
