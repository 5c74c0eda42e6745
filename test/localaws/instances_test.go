package localaws

import (
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// describedIDs returns the ids of every instance DescribeInstances lists, through the paginator.
func describedIDs(t *testing.T, h *harness, input *ec2.DescribeInstancesInput) ([]string, error) {
	t.Helper()
	var ids []string
	paginator := ec2.NewDescribeInstancesPaginator(h.ec2, input)
	for paginator.HasMorePages() {
		page, err := paginator.NextPage(h.ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, aws.ToString(i.InstanceId))
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func sorted(ids ...[]string) []string {
	var out []string
	for _, list := range ids {
		out = append(out, list...)
	}
	sort.Strings(out)
	return out
}

func TestDescribeInstancesFilters(t *testing.T) {
	h := newHarness(t, Options{ShutdownDelay: time.Second})
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	subnets := h.subnets(t)
	spot := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeSpot, 4, override("m5.large", subnets["us-east-1a"])))
	onDemand := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 3, override("c5.large", subnets["us-east-1b"])))
	_, err := h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{
		Resources: onDemand[:1],
		Tags:      []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("general-x1")}},
	})
	require.NoError(t, err)
	_, err = h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: spot[3:]})
	require.NoError(t, err)

	tests := []struct {
		name     string
		input    ec2.DescribeInstancesInput
		want     []string
		wantCode string
	}{
		{name: "all, five a page", input: ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)}, want: sorted(spot, onDemand)},
		{name: "by id", input: ec2.DescribeInstancesInput{InstanceIds: []string{onDemand[1], spot[0]}}, want: sorted([]string{onDemand[1], spot[0]})},
		{name: "by tag", input: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodeclaim"), Values: []string{"general-*"}}}}, want: onDemand[:1]},
		{name: "by tag key", input: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodepool"}}}}, want: sorted(spot, onDemand)},
		{
			name: "by state",
			input: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
				{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
			}},
			want: sorted(spot[:3], onDemand),
		},
		{
			name:  "shutting down",
			input: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"shutting-down"}}}},
			want:  spot[3:],
		},
		{
			name: "by instance id filter and lifecycle",
			input: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
				{Name: aws.String("instance-id"), Values: []string{spot[1], onDemand[2]}},
				{Name: aws.String("instance-lifecycle"), Values: []string{"spot"}},
			}},
			want: spot[1:2],
		},
		{name: "by type and zone", input: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("instance-type"), Values: []string{"c5.*"}},
			{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}},
		}}, want: sorted(onDemand)},
		{name: "unknown id", input: ec2.DescribeInstancesInput{InstanceIds: []string{spot[0], "i-00000000000000000"}}, wantCode: "InvalidInstanceID.NotFound"},
		{name: "malformed id", input: ec2.DescribeInstancesInput{InstanceIds: []string{"instance-1"}}, wantCode: "InvalidInstanceID.Malformed"},
		{name: "unknown filter", input: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"red"}}}}, wantCode: "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := describedIDs(t, h, &tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if diff := cmp.Diff(sorted(tt.want), got); err == nil && diff != "" {
				t.Errorf("instances (-want +got):\n%s", diff)
			}
		})
	}
}

// instanceState returns the state DescribeInstances reports, or the error code.
func instanceState(t *testing.T, h *harness, id string) string {
	t.Helper()
	out, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return errorCode(t, err)
	}
	return string(out.Reservations[0].Instances[0].State.Name)
}

func TestInstanceLifecycle(t *testing.T) {
	h := newHarness(t, Options{LaunchDelay: 5 * time.Second, ShutdownDelay: 10 * time.Second})
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	id := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", h.subnets(t)["us-east-1a"])))[0]

	steps := []struct {
		name      string
		advance   time.Duration
		terminate bool
		want      string
		wantState *ec2types.InstanceStateChange
	}{
		{name: "launched", want: "pending"},
		{name: "before the launch delay", advance: 4 * time.Second, want: "pending"},
		{name: "after the launch delay", advance: time.Second, want: "running"},
		{
			name: "terminated", terminate: true, want: "shutting-down",
			wantState: &ec2types.InstanceStateChange{
				InstanceId:    aws.String(id),
				PreviousState: &ec2types.InstanceState{Code: aws.Int32(16), Name: ec2types.InstanceStateNameRunning},
				CurrentState:  &ec2types.InstanceState{Code: aws.Int32(32), Name: ec2types.InstanceStateNameShuttingDown},
			},
		},
		{name: "after the shutdown delay", advance: 10 * time.Second, want: "terminated"},
		{
			name: "terminated again", terminate: true, want: "terminated",
			wantState: &ec2types.InstanceStateChange{
				InstanceId:    aws.String(id),
				PreviousState: &ec2types.InstanceState{Code: aws.Int32(48), Name: ec2types.InstanceStateNameTerminated},
				CurrentState:  &ec2types.InstanceState{Code: aws.Int32(48), Name: ec2types.InstanceStateNameTerminated},
			},
		},
		{name: "still visible before an hour", advance: 59 * time.Minute, want: "terminated"},
		{name: "forgotten after an hour", advance: time.Minute, want: "InvalidInstanceID.NotFound"},
	}
	for _, step := range steps {
		h.clock.Step(step.advance)
		if step.terminate {
			out, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
			require.NoError(t, err, step.name)
			require.Len(t, out.TerminatingInstances, 1, step.name)
			change := out.TerminatingInstances[0]
			if diff := cmp.Diff(summarizeChange(*step.wantState), summarizeChange(change)); diff != "" {
				t.Errorf("%s: state change (-want +got):\n%s", step.name, diff)
			}
		}
		require.Equal(t, step.want, instanceState(t, h, id), step.name)
	}
	h.server.sync(h.ctx)
	require.Empty(t, h.server.Instances(), "forgotten instances are dropped")
}

func summarizeChange(c ec2types.InstanceStateChange) []string {
	return []string{aws.ToString(c.InstanceId), string(c.PreviousState.Name), string(c.CurrentState.Name), itoa32(aws.ToInt32(c.CurrentState.Code))}
}

func TestTerminateInstancesErrors(t *testing.T) {
	h := newHarness(t, Options{})
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	id := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", h.subnets(t)["us-east-1a"])))[0]

	_, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id, "i-0123456789abcdef0"}})
	require.Equal(t, "InvalidInstanceID.NotFound", errorCode(t, err))
	require.Equal(t, "running", instanceState(t, h, id), "a failed request terminates nothing")
}

func TestCreateTags(t *testing.T) {
	h := newHarness(t, Options{})
	ltID := h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	id := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", h.subnets(t)["us-east-1a"])))[0]
	tag := func(k, v string) ec2types.Tag { return ec2types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	tests := []struct {
		name      string
		resources []string
		tags      []ec2types.Tag
		wantCode  string
	}{
		{name: "instance and launch template", resources: []string{id, ltID}, tags: []ec2types.Tag{tag("Name", "general-x1"), tag("team", "a")}},
		{name: "replace a value", resources: []string{id}, tags: []ec2types.Tag{tag("team", "b")}},
		{name: "unknown instance", resources: []string{"i-00000000000000000"}, tags: []ec2types.Tag{tag("a", "b")}, wantCode: "InvalidInstanceID.NotFound"},
		{name: "reserved prefix", resources: []string{id}, tags: []ec2types.Tag{tag("aws:cloudformation:stack", "x")}, wantCode: "InvalidParameterValue"},
		{name: "not taggable here", resources: []string{"vpc-0123"}, tags: []ec2types.Tag{tag("a", "b")}, wantCode: "InvalidID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{Resources: tt.resources, Tags: tt.tags})
			require.Equal(t, tt.wantCode, errorCode(t, err))
		})
	}

	described, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	got := summarizeInstance(described.Reservations[0].Instances[0]).Tags
	require.Equal(t, "general-x1", got["Name"])
	require.Equal(t, "b", got["team"])
	templates, err := h.ec2.DescribeLaunchTemplates(h.ctx, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:team"), Values: []string{"a"}}},
	})
	require.NoError(t, err)
	require.Len(t, templates.LaunchTemplates, 1)
}
