package nodecost_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// perHour turns a monthly price into the hourly one of the table's 730-hour month.
func perHour(monthly float64) float64 { return monthly / 730 }

func class(alias string, mutate func(*awsv1.EC2NodeClassSpec)) *awsv1.EC2NodeClass {
	c := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: alias}}}}
	if mutate != nil {
		mutate(&c.Spec)
	}
	return c
}

func ebs(volumeType, size string, iops, throughput *int64) *awsv1.BlockDeviceMapping {
	q := resource.MustParse(size)
	return &awsv1.BlockDeviceMapping{EBS: &awsv1.BlockDevice{VolumeType: ptr.To(volumeType), VolumeSize: &q, IOPS: iops, Throughput: throughput}}
}

func TestNodeCosts(t *testing.T) {
	table, err := nodecost.Embedded()
	require.NoError(t, err)
	tests := []struct {
		name         string
		class        *awsv1.EC2NodeClass
		subnetPublic bool
		want         cloudprovider.NodeCosts
	}{
		{
			name:  "AL2023 without mappings gets the 20Gi gp3 root volume",
			class: class("al2023@latest", nil),
			want:  cloudprovider.NodeCosts{Volumes: perHour(20 * 0.08)},
		},
		{
			name:  "Bottlerocket's default is a 4Gi OS and a 20Gi data volume",
			class: class("bottlerocket@latest", nil),
			want:  cloudprovider.NodeCosts{Volumes: perHour(24 * 0.08)},
		},
		{
			name:  "Windows2022 gets the Windows AMIs' 50Gi gp3 root volume",
			class: class("windows2022@latest", nil),
			want:  cloudprovider.NodeCosts{Volumes: perHour(50 * 0.08)},
		},
		{
			name:  "Windows2019 the same",
			class: class("windows2019@latest", nil),
			want:  cloudprovider.NodeCosts{Volumes: perHour(50 * 0.08)},
		},
		{
			name: "mappings replace the family's default",
			class: class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{ebs("gp2", "100Gi", nil, nil)}
			}),
			want: cloudprovider.NodeCosts{Volumes: perHour(100 * 0.10)},
		},
		{
			name: "gp3 pays only IOPS and throughput above its baseline",
			class: class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{ebs("gp3", "50Gi", ptr.To[int64](4000), ptr.To[int64](250)), ebs("gp3", "10Gi", ptr.To[int64](3000), nil)}
			}),
			want: cloudprovider.NodeCosts{Volumes: perHour(60*0.08 + 1000*0.005 + 125*0.04)},
		},
		{
			name: "io1 pays every provisioned IOPS",
			class: class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{ebs("io1", "20Gi", ptr.To[int64](1000), nil)}
			}),
			want: cloudprovider.NodeCosts{Volumes: perHour(20*0.125 + 1000*0.065)},
		},
		{
			name: "io2 IOPS by tier",
			class: class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{ebs("io2", "10Gi", ptr.To[int64](40000), nil)}
			}),
			want: cloudprovider.NodeCosts{Volumes: perHour(10*0.125 + 32000*0.065 + 8000*0.0455)},
		},
		{
			name:         "a subnet that maps public addresses adds one",
			class:        class("al2023@latest", nil),
			subnetPublic: true,
			want:         cloudprovider.NodeCosts{Volumes: perHour(20 * 0.08), PublicIPv4: 0.005},
		},
		{
			name:         "associatePublicIPAddress false wins over the subnet",
			class:        class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) { s.AssociatePublicIPAddress = ptr.To(false) }),
			subnetPublic: true,
			want:         cloudprovider.NodeCosts{Volumes: perHour(20 * 0.08)},
		},
		{
			name:  "associatePublicIPAddress true in a private subnet",
			class: class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) { s.AssociatePublicIPAddress = ptr.To(true) }),
			want:  cloudprovider.NodeCosts{Volumes: perHour(20 * 0.08), PublicIPv4: 0.005},
		},
		{
			name:  "detailed monitoring is seven metrics a month",
			class: class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) { s.DetailedMonitoring = ptr.To(true) }),
			want:  cloudprovider.NodeCosts{Volumes: perHour(20 * 0.08), Monitoring: perHour(7 * 0.30)},
		},
		{
			name: "a volume from a snapshot without a size costs nothing here",
			class: class("al2023@latest", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{EBS: &awsv1.BlockDevice{SnapshotID: ptr.To("snap-1")}}}
			}),
			want: cloudprovider.NodeCosts{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := table.NodeCosts(tt.class, tt.subnetPublic)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("NodeCosts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewPriceParts(t *testing.T) {
	tests := []struct {
		name  string
		share float64
		want  cloudprovider.PriceParts
	}{
		{name: "no DaemonSets", share: 0, want: cloudprovider.PriceParts{Instance: 0.1, Volumes: 0.002, PublicIPv4: 0.005}},
		{name: "a fifth of the node", share: 0.2, want: cloudprovider.PriceParts{Instance: 0.08, Volumes: 0.002, PublicIPv4: 0.005, DaemonSets: 0.02}},
		{name: "share capped at the whole instance", share: 3, want: cloudprovider.PriceParts{Volumes: 0.002, PublicIPv4: 0.005, DaemonSets: 0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cloudprovider.NewPriceParts(0.1, cloudprovider.NodeCosts{Volumes: 0.002, PublicIPv4: 0.005}, tt.share)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("PriceParts (-want +got):\n%s", diff)
			}
			require.InDelta(t, 0.107, got.Total(), 1e-12)
		})
	}
}

// TestReadFromPricingAPI reads the prices over HTTP from the local endpoint, which serves the
// repository's table, onto a fallback whose prices are all different: every price the API
// lists replaces the fallback's, the rest stays.
func TestReadFromPricingAPI(t *testing.T) {
	endpoint, err := localaws.New(localaws.Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(endpoint)
	t.Cleanup(srv.Close)
	client := pricing.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL),
	})
	want, err := nodecost.Embedded()
	require.NoError(t, err)
	fallback, err := nodecost.Embedded()
	require.NoError(t, err)
	for k, v := range fallback.EBS {
		v.PerGiBMonth *= 2
		v.PerIopsMonth *= 2
		v.PerIopsMonthAboveFree *= 2
		v.PerMiBpsMonthAboveFree *= 2
		fallback.EBS[k] = v
	}
	fallback.PublicIPv4.PerHour = 1
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	got, err := nodecost.Read(ctx, client, "us-east-1", fallback, 1)
	require.NoError(t, err)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	require.InDelta(t, 20*0.08/730, got.NodeCosts(class("al2023@latest", nil), false).Volumes, 1e-12)
}

func TestReadFailsWithoutTheAPI(t *testing.T) {
	client := pricing.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
	})
	fallback, err := nodecost.Embedded()
	require.NoError(t, err)
	_, err = nodecost.Read(context.Background(), client, "us-east-1", fallback, 1)
	require.ErrorContains(t, err, "getting EBS prices")
}

func TestParseRefusesUnknownVolumeTypesInDefaults(t *testing.T) {
	_, err := nodecost.Parse(strings.NewReader(`{"hoursPerMonth":730,"ebs":{"gp3":{"perGiBMonth":0.08}},"defaultBlockDeviceMappings":{"AL2023":[{"deviceName":"/dev/xvda","volumeSize":"20Gi","volumeType":"gp4"}]}}`))
	require.EqualError(t, err, `defaultBlockDeviceMappings.AL2023[0]: volume type "gp4" has no ebs prices`)
}

func TestParsePriceTakesOnlyUsablePrices(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    float64
		wantErr string
	}{
		{name: "a price", in: "0.0960000000", want: 0.096},
		{name: "nothing to pay", in: "0", want: 0},
		{name: "not a number", in: "abc", wantErr: `price "abc" is not a number`},
		{name: "NaN", in: "NaN", wantErr: `price "NaN" is not a finite amount of dollars`},
		{name: "infinite", in: "+Inf", wantErr: `price "+Inf" is not a finite amount of dollars`},
		{name: "out of range", in: "1e400", wantErr: `price "1e400" is not a number`},
		{name: "negative", in: "-0.5", wantErr: `price "-0.5" is not a finite amount of dollars`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nodecost.ParsePrice(tt.in)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.True(t, nodecost.UsablePrice(got))
		})
	}
}

// TestParseNamesWhereAFieldIsMisspelt: a field that differs but for case is read, as
// encoding/json reads it; one misspelt is an error that says where.
func TestParseNamesWhereAFieldIsMisspelt(t *testing.T) {
	_, err := nodecost.Parse(strings.NewReader(`{"hoursPerMonth":730,
 "ebs":{"gp3":{"perGibMonth":0.08, "freeIOPS":3000, "freeThroughputMibs":125}}}`))
	require.EqualError(t, err, `line 2, column 53: ebs["gp3"].freeThroughputMibs: unknown field; did you mean "freeThroughputMiBps"?`)
}
