package localaws

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/transport"
)

// testStart is when every test's fake clock starts.
var testStart = time.Date(2026, time.November, 20, 10, 0, 0, 0, time.UTC)

// AMI SSM parameters the tests launch with.
var (
	al2023X86Parameter = "/aws/service/eks/optimized-ami/" + DefaultKubernetesVersion + "/amazon-linux-2023/x86_64/standard/recommended/image_id"
	al2023ARMParameter = "/aws/service/eks/optimized-ami/" + DefaultKubernetesVersion + "/amazon-linux-2023/arm64/standard/recommended/image_id"
)

// harness is a Server behind an httptest.Server, with real SDK clients pointed at it.
type harness struct {
	server  *Server
	clock   *testingclock.FakeClock
	ctx     context.Context
	ec2     *ec2.Client
	ssm     *ssm.Client
	pricing *pricing.Client
	iam     *iam.Client
	url     string
}

// newHarness starts a server with the options, a fake clock at testStart and a test logger.
func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	fakeClock := testingclock.NewFakeClock(testStart)
	opts.Clock = fakeClock
	opts.Logger = logger
	server, err := New(opts)
	require.NoError(t, err)
	httpServer := httptest.NewServer(server)
	t.Cleanup(httpServer.Close)

	creds := credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", "")
	// The clients retry as real ones do: a local server answers so fast that net/http
	// sometimes closes a connection under a response, which the SDK retries by design.
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		o.RateLimiter = ratelimit.None
	})
	return &harness{
		server: server,
		clock:  fakeClock,
		ctx:    ctx,
		url:    httpServer.URL,
		ec2: ec2.New(ec2.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(httpServer.URL), Credentials: creds,
			Retryer: retryer, HTTPClient: transport.NewClient(httpServer.Client()),
		}),
		ssm: ssm.New(ssm.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(httpServer.URL), Credentials: creds,
			Retryer: retryer, HTTPClient: transport.NewClient(httpServer.Client()),
		}),
		pricing: pricing.New(pricing.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(httpServer.URL), Credentials: creds,
			Retryer: retryer, HTTPClient: transport.NewClient(httpServer.Client()),
		}),
		iam: iam.New(iam.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(httpServer.URL), Credentials: creds,
			Retryer: retryer, HTTPClient: transport.NewClient(httpServer.Client()),
		}),
	}
}

// errorCode returns the AWS error code of err, "" when err is nil.
func errorCode(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var apiErr smithy.APIError
	require.True(t, errors.As(err, &apiErr), "not an API error: %v", err)
	return apiErr.ErrorCode()
}

// imageID resolves an SSM parameter to its AMI id.
func (h *harness) imageID(t *testing.T, parameter string) string {
	t.Helper()
	out, err := h.ssm.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String(parameter)})
	require.NoError(t, err)
	return aws.ToString(out.Parameter.Value)
}

// subnets returns the discovered subnet ids by zone.
func (h *harness) subnets(t *testing.T) map[string]string {
	t.Helper()
	out, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"tailor-local"}}},
	})
	require.NoError(t, err)
	byZone := map[string]string{}
	for _, sn := range out.Subnets {
		byZone[aws.ToString(sn.AvailabilityZone)] = aws.ToString(sn.SubnetId)
	}
	return byZone
}

// launchTemplate creates a launch template and returns its id.
func (h *harness) launchTemplate(t *testing.T, name, imageID, userData string) string {
	t.Helper()
	data := &ec2types.RequestLaunchTemplateData{
		ImageId: aws.String(imageID),
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
			DeviceName: aws.String("/dev/xvda"),
			Ebs:        &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(80), VolumeType: ec2types.VolumeTypeGp3},
		}},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{
			ResourceType: ec2types.ResourceTypeInstance,
			Tags:         []ec2types.Tag{{Key: aws.String("from-template"), Value: aws.String("yes")}},
		}},
	}
	if userData != "" {
		data.UserData = aws.String(userData)
	}
	out, err := h.ec2.CreateLaunchTemplate(h.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
	})
	require.NoError(t, err)
	return aws.ToString(out.LaunchTemplate.LaunchTemplateId)
}

// fleet launches count instances of the capacity type from the launch template, one override
// per type and subnet given, and returns the response.
func (h *harness) fleet(t *testing.T, ltName string, capacityType ec2types.DefaultTargetCapacityType, count int32, overrides ...ec2types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetOutput {
	t.Helper()
	out, err := h.ec2.CreateFleet(h.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(ltName), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(count),
			DefaultTargetCapacityType: capacityType,
		},
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeInstance,
			Tags:         []ec2types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("general")}},
		}},
	})
	require.NoError(t, err)
	return out
}

// override is an override of one type in one subnet.
func override(instanceType, subnetID string) ec2types.FleetLaunchTemplateOverridesRequest {
	return ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(instanceType), SubnetId: aws.String(subnetID)}
}

// launchedIDs returns the instance ids of a fleet response.
func launchedIDs(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, i.InstanceIds...)
	}
	return ids
}
