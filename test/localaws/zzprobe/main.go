package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	ptypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

func main() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Println("----", r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("X-Amz-Target"))
		if vals, err := url.ParseQuery(string(b)); err == nil && r.Header.Get("X-Amz-Target") == "" {
			keys := make([]string, 0)
			for k := range vals {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Printf("  %s=%s\n", k, vals[k])
			}
		} else {
			fmt.Println(string(b))
		}
		w.WriteHeader(500)
	}))
	defer srv.Close()
	ctx := context.Background()
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	e := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, RetryMaxAttempts: 1})
	s := ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, RetryMaxAttempts: 1})
	p := pricing.New(pricing.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, RetryMaxAttempts: 1})
	e.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.large", "c5.xlarge"}, Filters: []types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.*", "c5.large"}}}, MaxResults: aws.Int32(10), NextToken: aws.String("tok")})
	e.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone, Filters: []types.Filter{{Name: aws.String("location"), Values: []string{"us-east-1a"}}}})
	e.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1a"}, ZoneIds: []string{"use1-az1"}, AllAvailabilityZones: aws.Bool(true)})
	e.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []types.InstanceType{"m5.large"}, AvailabilityZone: aws.String("us-east-1a"), ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(time.Unix(1700000000, 0)), EndTime: aws.Time(time.Unix(1700000000, 0))})
	e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-1"}})
	e.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-1"}, GroupNames: []string{"n"}})
	e.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-1"}, Owners: []string{"amazon"}, ExecutableUsers: []string{"self"}, IncludeDeprecated: aws.Bool(true)})
	e.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt"), ClientToken: aws.String("ct"), LaunchTemplateData: &types.RequestLaunchTemplateData{
		UserData: aws.String("dXNlcg=="), ImageId: aws.String("ami-1"),
		BlockDeviceMappings: []types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(80), VolumeType: types.VolumeTypeGp3, Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true), Iops: aws.Int32(3000), Throughput: aws.Int32(125), KmsKeyId: aws.String("k")}}},
		MetadataOptions:     &types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1), HttpEndpoint: types.LaunchTemplateInstanceMetadataEndpointStateEnabled, HttpProtocolIpv6: types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled, InstanceMetadataTags: types.LaunchTemplateInstanceMetadataTagsStateDisabled},
		SecurityGroupIds:    []string{"sg-1", "sg-2"}, IamInstanceProfile: &types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("prof"), Arn: aws.String("arn")},
		TagSpecifications:   []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}},
		InstanceType:        "m5.large", KeyName: aws.String("kn"), Monitoring: &types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(true)},
		NetworkInterfaces:   []types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{DeviceIndex: aws.Int32(0), Groups: []string{"sg-3"}, AssociatePublicIpAddress: aws.Bool(false)}},
	}, TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate, Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}}})
	e.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"lt"}, LaunchTemplateIds: []string{"lt-1"}, Filters: []types.Filter{{Name: aws.String("tag:x"), Values: []string{"y"}}}})
	e.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("lt"), LaunchTemplateId: aws.String("lt-1")})
	e.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant, ClientToken: aws.String("tok"),
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt"), LaunchTemplateId: aws.String("lt-1"), Version: aws.String("$Latest")},
			Overrides: []types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String("subnet-1"), AvailabilityZone: aws.String("us-east-1a"), Priority: aws.Float64(1), ImageId: aws.String("ami-1"), MaxPrice: aws.String("1")}, {InstanceType: "c5.large"}}}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeSpot, OnDemandTargetCapacity: aws.Int32(0), SpotTargetCapacity: aws.Int32(1)},
		SpotOptions:                 &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized, SingleInstanceType: aws.Bool(true), MinTargetCapacity: aws.Int32(1)},
		OnDemandOptions:             &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications:           []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}, {ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("k2"), Value: aws.String("v2")}}}},
	})
	e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-1"}, Filters: []types.Filter{{Name: aws.String("tag-key"), Values: []string{"a"}}}, MaxResults: aws.Int32(5), NextToken: aws.String("n")})
	e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-1", "i-2"}})
	e.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-1"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/a/b"), WithDecryption: aws.Bool(true)})
	s.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{"/a/b", "/c"}})
	p.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: []ptypes.Filter{{Type: ptypes.FilterTypeTermMatch, Field: aws.String("instanceType"), Value: aws.String("m5.large")}}, MaxResults: aws.Int32(10), NextToken: aws.String("x"), FormatVersion: aws.String("aws_v1")})
}
