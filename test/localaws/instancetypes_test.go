package localaws

import (
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// typeSummary is the part of an InstanceTypeInfo the tests check.
type typeSummary struct {
	Name                string
	Architectures       []string
	Manufacturer        string
	VCPUs               int32
	MemoryMiB           int64
	Hypervisor          string
	BareMetal           bool
	Burstable           bool
	CurrentGeneration   bool
	UsageClasses        []string
	MaxENIs             int32
	IPv4PerENI          int32
	BandwidthGbps       float64
	EncryptionInTransit bool
	NVMeGB              int64
	GPUs                []string
	Neuron              []string
	Inference           []string
}

func summarizeType(info ec2types.InstanceTypeInfo) typeSummary {
	s := typeSummary{
		Name:                string(info.InstanceType),
		Manufacturer:        aws.ToString(info.ProcessorInfo.Manufacturer),
		VCPUs:               aws.ToInt32(info.VCpuInfo.DefaultVCpus),
		MemoryMiB:           aws.ToInt64(info.MemoryInfo.SizeInMiB),
		Hypervisor:          string(info.Hypervisor),
		BareMetal:           aws.ToBool(info.BareMetal),
		Burstable:           aws.ToBool(info.BurstablePerformanceSupported),
		CurrentGeneration:   aws.ToBool(info.CurrentGeneration),
		MaxENIs:             aws.ToInt32(info.NetworkInfo.MaximumNetworkInterfaces),
		IPv4PerENI:          aws.ToInt32(info.NetworkInfo.Ipv4AddressesPerInterface),
		EncryptionInTransit: aws.ToBool(info.NetworkInfo.EncryptionInTransitSupported),
	}
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		s.Architectures = append(s.Architectures, string(a))
	}
	for _, c := range info.SupportedUsageClasses {
		s.UsageClasses = append(s.UsageClasses, string(c))
	}
	if cards := info.NetworkInfo.NetworkCards; len(cards) > 0 {
		s.BandwidthGbps = aws.ToFloat64(cards[0].BaselineBandwidthInGbps)
	}
	if info.InstanceStorageInfo != nil {
		s.NVMeGB = aws.ToInt64(info.InstanceStorageInfo.TotalSizeInGB)
	}
	if info.GpuInfo != nil {
		for _, g := range info.GpuInfo.Gpus {
			s.GPUs = append(s.GPUs, aws.ToString(g.Manufacturer)+"/"+aws.ToString(g.Name)+"/"+itoa32(aws.ToInt32(g.Count))+"/"+itoa32(aws.ToInt32(g.MemoryInfo.SizeInMiB)))
		}
	}
	if info.NeuronInfo != nil {
		for _, d := range info.NeuronInfo.NeuronDevices {
			s.Neuron = append(s.Neuron, aws.ToString(d.Name)+"/"+itoa32(aws.ToInt32(d.Count)))
		}
	}
	if info.InferenceAcceleratorInfo != nil {
		for _, a := range info.InferenceAcceleratorInfo.Accelerators {
			s.Inference = append(s.Inference, aws.ToString(a.Manufacturer)+"/"+aws.ToString(a.Name)+"/"+itoa32(aws.ToInt32(a.Count)))
		}
	}
	return s
}

func itoa32(n int32) string { return strconv.Itoa(int(n)) }

func TestDescribeInstanceTypesDescribesCatalogTypes(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name string
		want typeSummary
	}{
		{
			name: "general purpose intel",
			want: typeSummary{
				Name: "m5.large", Architectures: []string{"x86_64"}, Manufacturer: "Intel", VCPUs: 2, MemoryMiB: 8192,
				Hypervisor: "nitro", CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 3, IPv4PerENI: 10, BandwidthGbps: 0.75,
			},
		},
		{
			name: "burstable",
			want: typeSummary{
				Name: "t3.micro", Architectures: []string{"x86_64"}, Manufacturer: "Intel", VCPUs: 2, MemoryMiB: 1024,
				Hypervisor: "nitro", Burstable: true, CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 2, IPv4PerENI: 2, BandwidthGbps: 0.064,
			},
		},
		{
			name: "graviton with local NVMe",
			want: typeSummary{
				Name: "c6gd.large", Architectures: []string{"arm64"}, Manufacturer: "AWS", VCPUs: 2, MemoryMiB: 4096,
				Hypervisor: "nitro", CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 3, IPv4PerENI: 10, BandwidthGbps: 0.75, NVMeGB: 118,
			},
		},
		{
			name: "NVIDIA GPU",
			want: typeSummary{
				Name: "g4dn.xlarge", Architectures: []string{"x86_64"}, Manufacturer: "Intel", VCPUs: 4, MemoryMiB: 16384,
				Hypervisor: "nitro", CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 3, IPv4PerENI: 10, BandwidthGbps: 5, EncryptionInTransit: true, NVMeGB: 125,
				GPUs: []string{"NVIDIA/t4/1/16384"},
			},
		},
		{
			name: "AMD GPU",
			want: typeSummary{
				Name: "g4ad.xlarge", Architectures: []string{"x86_64"}, Manufacturer: "AMD", VCPUs: 4, MemoryMiB: 16384,
				Hypervisor: "nitro", CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 2, IPv4PerENI: 4, BandwidthGbps: 2, EncryptionInTransit: true, NVMeGB: 150,
				GPUs: []string{"AMD/radeon-pro-v520/1/8192"},
			},
		},
		{
			name: "first generation inferentia is a neuron device and an inference accelerator",
			want: typeSummary{
				Name: "inf1.xlarge", Architectures: []string{"x86_64"}, Manufacturer: "Intel", VCPUs: 4, MemoryMiB: 8192,
				Hypervisor: "nitro", CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 4, IPv4PerENI: 10, BandwidthGbps: 5, EncryptionInTransit: true,
				Neuron: []string{"inferentia/1"}, Inference: []string{"AWS/inferentia/1"},
			},
		},
		{
			name: "inferentia2 is a neuron device",
			want: typeSummary{
				Name: "inf2.xlarge", Architectures: []string{"x86_64"}, Manufacturer: "AMD", VCPUs: 4, MemoryMiB: 16384,
				Hypervisor: "nitro", CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 4, IPv4PerENI: 15, BandwidthGbps: 2.083, EncryptionInTransit: true,
				Neuron: []string{"inferentia2/1"},
			},
		},
		{
			name: "bare metal has no hypervisor",
			want: typeSummary{
				Name: "m5.metal", Architectures: []string{"x86_64"}, Manufacturer: "Intel", VCPUs: 96, MemoryMiB: 393216,
				BareMetal: true, CurrentGeneration: true, UsageClasses: []string{"on-demand", "spot"},
				MaxENIs: 15, IPv4PerENI: 50, BandwidthGbps: 25,
			},
		},
		{
			name: "previous generation on xen without known bandwidth",
			want: typeSummary{
				Name: "c4.large", Architectures: []string{"x86_64"}, Manufacturer: "Intel", VCPUs: 2, MemoryMiB: 3840,
				Hypervisor: "xen", UsageClasses: []string{"on-demand", "spot"}, MaxENIs: 3, IPv4PerENI: 10,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{
				InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(tt.want.Name)},
			})
			require.NoError(t, err)
			require.Len(t, out.InstanceTypes, 1)
			if diff := cmp.Diff(tt.want, summarizeType(out.InstanceTypes[0])); diff != "" {
				t.Errorf("instance type (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeInstanceTypesPaginatesTheWholeCatalog(t *testing.T) {
	h := newHarness(t, Options{})
	cat, err := catalog.Embedded()
	require.NoError(t, err)
	var want []string
	for _, it := range cat.InstanceTypes {
		want = append(want, it.Name)
	}
	sort.Strings(want)

	var got []string
	pages := 0
	paginator := ec2.NewDescribeInstanceTypesPaginator(h.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for paginator.HasMorePages() {
		page, err := paginator.NextPage(h.ctx)
		require.NoError(t, err)
		pages++
		for _, it := range page.InstanceTypes {
			got = append(got, string(it.InstanceType))
		}
	}
	require.Len(t, want, 1345)
	require.Equal(t, 14, pages)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance types (-want +got):\n%s", diff)
	}
}

func TestDescribeInstanceTypesFilters(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name     string
		input    ec2.DescribeInstanceTypesInput
		want     []string
		wantCode string
	}{
		{
			name:  "instance-type with wildcard",
			input: ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.*large", "m5.metal"}}}},
			want:  []string{"m5.12xlarge", "m5.16xlarge", "m5.24xlarge", "m5.2xlarge", "m5.4xlarge", "m5.8xlarge", "m5.large", "m5.metal", "m5.xlarge"},
		},
		{
			name: "names and architecture",
			input: ec2.DescribeInstanceTypesInput{
				InstanceTypes: []ec2types.InstanceType{"m5.large", "m6g.large", "c6gd.large"},
				Filters:       []ec2types.Filter{{Name: aws.String("processor-info.supported-architecture"), Values: []string{"arm64"}}},
			},
			want: []string{"c6gd.large", "m6g.large"},
		},
		{
			name:     "unknown instance type",
			input:    ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large", "m99.huge"}},
			wantCode: "InvalidInstanceType",
		},
		{
			name:     "unknown filter",
			input:    ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"blue"}}}},
			wantCode: "InvalidParameterValue",
		},
		{
			name:     "page size out of range",
			input:    ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(3)},
			wantCode: "InvalidParameterValue",
		},
		{
			name:     "foreign next token",
			input:    ec2.DescribeInstanceTypesInput{NextToken: aws.String("bm90LW91cnM")},
			wantCode: "InvalidPaginationToken",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.DescribeInstanceTypes(h.ctx, &tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if err != nil {
				return
			}
			var got []string
			for _, it := range out.InstanceTypes {
				got = append(got, string(it.InstanceType))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("instance types (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeInstanceTypeOfferings(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name  string
		input ec2.DescribeInstanceTypeOfferingsInput
		want  []string
	}{
		{
			name: "by zone for a type sold in three zones",
			input: ec2.DescribeInstanceTypeOfferingsInput{
				LocationType: ec2types.LocationTypeAvailabilityZone,
				Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"c5.large"}}},
			},
			want: []string{"c5.large@us-east-1a", "c5.large@us-east-1b", "c5.large@us-east-1d"},
		},
		{
			name: "by zone id",
			input: ec2.DescribeInstanceTypeOfferingsInput{
				LocationType: ec2types.LocationTypeAvailabilityZoneId,
				Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m6g.large"}}},
			},
			want: []string{"m6g.large@use1-az1", "m6g.large@use1-az3", "m6g.large@use1-az4"},
		},
		{
			name: "by region",
			input: ec2.DescribeInstanceTypeOfferingsInput{
				Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.large", "c5.large"}}},
			},
			want: []string{"c5.large@us-east-1", "m5.large@us-east-1"},
		},
		{
			name: "location and type",
			input: ec2.DescribeInstanceTypeOfferingsInput{
				LocationType: ec2types.LocationTypeAvailabilityZone,
				Filters: []ec2types.Filter{
					{Name: aws.String("location"), Values: []string{"us-east-1c"}},
					{Name: aws.String("instance-type"), Values: []string{"c5.large", "m5.large"}},
				},
			},
			want: []string{"m5.large@us-east-1c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			paginator := ec2.NewDescribeInstanceTypeOfferingsPaginator(h.ec2, &tt.input)
			for paginator.HasMorePages() {
				page, err := paginator.NextPage(h.ctx)
				require.NoError(t, err)
				for _, o := range page.InstanceTypeOfferings {
					got = append(got, string(o.InstanceType)+"@"+aws.ToString(o.Location))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("offerings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeInstanceTypeOfferingsPaginatesEveryZoneOffering(t *testing.T) {
	h := newHarness(t, Options{})
	cat, err := catalog.Embedded()
	require.NoError(t, err)
	want := 0
	for _, it := range cat.InstanceTypes {
		zones := map[string]bool{}
		for _, o := range it.Offerings {
			zones[o.Zone] = true
		}
		want += len(zones)
	}
	got, pages := 0, 0
	paginator := ec2.NewDescribeInstanceTypeOfferingsPaginator(h.ec2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		MaxResults:   aws.Int32(1000),
	})
	for paginator.HasMorePages() {
		page, err := paginator.NextPage(h.ctx)
		require.NoError(t, err)
		got += len(page.InstanceTypeOfferings)
		pages++
	}
	require.Equal(t, want, got)
	require.Equal(t, (want+999)/1000, pages)
}

func TestDescribeSpotPriceHistory(t *testing.T) {
	h := newHarness(t, Options{})
	cat, err := catalog.Embedded()
	require.NoError(t, err)
	// Every spot offering has a Linux price, and those of x86_64 types a Windows one too.
	spotOfferings := 0
	for _, it := range cat.InstanceTypes {
		for _, o := range it.Offerings {
			if o.CapacityType == "spot" {
				spotOfferings++
				if it.Arch == "amd64" {
					spotOfferings++
				}
			}
		}
	}
	tests := []struct {
		name  string
		input ec2.DescribeSpotPriceHistoryInput
		want  []string
		count int
	}{
		{
			name: "one type in every zone",
			input: ec2.DescribeSpotPriceHistoryInput{
				InstanceTypes:       []ec2types.InstanceType{"m5.large"},
				ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
				StartTime:           aws.Time(testStart),
			},
			want: []string{
				"m5.large@us-east-1a=0.055010 Linux/UNIX", "m5.large@us-east-1b=0.066290 Linux/UNIX",
				"m5.large@us-east-1c=0.060340 Linux/UNIX", "m5.large@us-east-1d=0.028230 Linux/UNIX",
			},
		},
		{
			name: "zone parameter and type filter",
			input: ec2.DescribeSpotPriceHistoryInput{
				AvailabilityZone: aws.String("us-east-1b"),
				Filters:          []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"c5.large", "m5.metal"}}},
			},
			want: []string{"c5.large@us-east-1b=0.027040 Linux/UNIX", "c5.large@us-east-1b=0.119040 Windows"},
		},
		{
			name: "windows prices include the license",
			input: ec2.DescribeSpotPriceHistoryInput{
				InstanceTypes:       []ec2types.InstanceType{"m5.large", "m6g.large"},
				ProductDescriptions: []string{"Windows"},
			},
			want: []string{
				"m5.large@us-east-1a=0.147010 Windows", "m5.large@us-east-1b=0.158290 Windows",
				"m5.large@us-east-1c=0.152340 Windows", "m5.large@us-east-1d=0.120230 Windows",
			},
		},
		{
			name:  "everything, paginated",
			input: ec2.DescribeSpotPriceHistoryInput{StartTime: aws.Time(testStart), MaxResults: aws.Int32(1000)},
			count: spotOfferings,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			count := 0
			paginator := ec2.NewDescribeSpotPriceHistoryPaginator(h.ec2, &tt.input)
			for paginator.HasMorePages() {
				page, err := paginator.NextPage(h.ctx)
				require.NoError(t, err)
				for _, p := range page.SpotPriceHistory {
					count++
					require.Equal(t, testStart.Truncate(time.Hour), aws.ToTime(p.Timestamp))
					if tt.count == 0 {
						got = append(got, string(p.InstanceType)+"@"+aws.ToString(p.AvailabilityZone)+"="+aws.ToString(p.SpotPrice)+" "+string(p.ProductDescription))
					}
				}
			}
			if tt.count > 0 {
				require.Equal(t, tt.count, count)
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spot prices (-want +got):\n%s", diff)
			}
		})
	}
}
