package instancetype

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

func TestEphemeralStorageOfInstanceStorePolicy(t *testing.T) {
	entries := describedCatalog(t)
	raid0 := ptr.To(awsv1.InstanceStorePolicyRAID0)
	rootVolume := []*awsv1.BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvda"), RootVolume: true, EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("100Gi"))}}}
	tests := []struct {
		name         string
		instanceType string
		policy       *awsv1.InstanceStorePolicy
		devices      []*awsv1.BlockDeviceMapping
		// want is the capacity; wantOverhead the kube-reserved 1Gi plus the 10% nodefs threshold.
		want, wantOverhead string
	}{
		{name: "RAID0 on local NVMe is the instance store's size", instanceType: "m5d.large", policy: raid0, want: "75G", wantOverhead: "8573741824"},
		{name: "RAID0 on a larger instance store", instanceType: "i3en.large", policy: raid0, want: "1250G", wantOverhead: "126073741824"},
		{name: "RAID0 wins over the root volume", instanceType: "c6gd.xlarge", policy: raid0, devices: rootVolume, want: "237G", wantOverhead: "24773741824"},
		{name: "without RAID0 the instance store is not the kubelet's", instanceType: "m5d.large", want: "20Gi", wantOverhead: "3Gi"},
		{name: "without RAID0 the root volume is", instanceType: "m5d.large", devices: rootVolume, want: "100Gi", wantOverhead: "11Gi"},
		{name: "RAID0 without local NVMe keeps the root volume", instanceType: "m5.large", policy: raid0, want: "20Gi", wantOverhead: "3Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := entries[tt.instanceType]
			if !ok {
				t.Fatalf("%s is not in the catalog", tt.instanceType)
			}
			class := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{InstanceStorePolicy: tt.policy, BlockDeviceMappings: tt.devices}}
			it := New(e, class, nil, &pricing.Book{}, defaultSettings)
			got := map[string]string{
				"capacity": ptr.To(it.Capacity[corev1.ResourceEphemeralStorage]).String(),
				"overhead": ptr.To(it.Overhead[corev1.ResourceEphemeralStorage]).String(),
			}
			if diff := cmp.Diff(map[string]string{"capacity": tt.want, "overhead": tt.wantOverhead}, got); diff != "" {
				t.Errorf("ephemeral storage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemoryEvictionThresholdOfEvictionHard(t *testing.T) {
	entries := describedCatalog(t)
	tests := []struct {
		name         string
		evictionHard map[string]string
		// want is the memory the threshold holds back on an m5.large, whose capacity is
		// 7577Mi (8Gi less the 7.5% VM overhead).
		want string
	}{
		{name: "unset is the kubelet's 100Mi", want: "100Mi"},
		{name: "a quantity is held back as it is", evictionHard: map[string]string{"memory.available": "500Mi"}, want: "500Mi"},
		{name: "a percentage is of the node's memory, as the kubelet reads it", evictionHard: map[string]string{"memory.available": "5%"}, want: "397253017"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{EvictionHard: tt.evictionHard}}}
			it := New(entries["m5.large"], class, nil, &pricing.Book{}, defaultSettings)
			held := it.Overhead[corev1.ResourceMemory]
			held.Sub(kubeReservedMemory(it.Capacity.Pods().Value()))
			want := resource.MustParse(tt.want)
			if diff := cmp.Diff(want.Value(), held.Value()); diff != "" {
				t.Errorf("memory held back for eviction (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLabelsAndResourcesEC2ReportsButTheCatalogLacks: DescribeInstanceTypes answers carry a
// sustained clock speed, EFA interfaces and inference accelerators by other makers, which
// the local endpoint's catalog does not; they become Karpenter's labels and resources.
func TestLabelsAndResourcesEC2ReportsButTheCatalogLacks(t *testing.T) {
	info := ec2types.InstanceTypeInfo{
		InstanceType: "p5.48xlarge",
		VCpuInfo:     &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(192)},
		MemoryInfo:   &ec2types.MemoryInfo{SizeInMiB: aws.Int64(2097152)},
		ProcessorInfo: &ec2types.ProcessorInfo{
			SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664},
			Manufacturer:           aws.String("AMD"), SustainedClockSpeedInGhz: aws.Float64(3.6),
		},
		NetworkInfo: &ec2types.NetworkInfo{
			MaximumNetworkInterfaces: aws.Int32(64), Ipv4AddressesPerInterface: aws.Int32(50),
			EfaSupported: aws.Bool(true), EfaInfo: &ec2types.EfaInfo{MaximumEfaInterfaces: aws.Int32(32)},
		},
		InferenceAcceleratorInfo: &ec2types.InferenceAcceleratorInfo{Accelerators: []ec2types.InferenceDeviceInfo{{Manufacturer: aws.String("Example"), Count: aws.Int32(1)}}},
	}
	labels := instanceTypeLabels(info)
	got := map[string]string{}
	for _, key := range []string{karpv1.InstanceCPUSustainedClockLabelKey, karpv1.InstanceAcceleratorMfrLabelKey, karpv1.InstanceCapabilityFlexLabelKey} {
		got[key] = labels[key]
	}
	want := map[string]string{
		karpv1.InstanceCPUSustainedClockLabelKey: "3600",
		karpv1.InstanceAcceleratorMfrLabelKey:    "example",
		karpv1.InstanceCapabilityFlexLabelKey:    "false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if n := efaInterfaces(info); n != 32 {
		t.Errorf("efaInterfaces() = %d, want 32", n)
	}
	info.NetworkInfo.EfaSupported = aws.Bool(false)
	if n := efaInterfaces(info); n != 0 {
		t.Errorf("efaInterfaces() without EFA support = %d, want 0", n)
	}
	if flex := instanceTypeLabels(ec2types.InstanceTypeInfo{InstanceType: "c7i-flex.large", VCpuInfo: info.VCpuInfo, MemoryInfo: info.MemoryInfo,
		ProcessorInfo: &ec2types.ProcessorInfo{}, NetworkInfo: &ec2types.NetworkInfo{}})[karpv1.InstanceCapabilityFlexLabelKey]; flex != "true" {
		t.Errorf("c7i-flex.large: %s = %q, want true", karpv1.InstanceCapabilityFlexLabelKey, flex)
	}
}

func TestPodCapacityOfENIsPrefixDelegationAndTrunking(t *testing.T) {
	entries := describedCatalog(t)
	type capacity struct{ Pods, PodENI int64 }
	tests := []struct {
		name             string
		instanceType     string
		prefixDelegation bool
		reservedENIs     int64
		kubelet          *awsv1.KubeletConfiguration
		windows          bool
		want             capacity
	}{
		{name: "a Nitro type without prefixes: ENIs × (IPs − 1) + 2", instanceType: "m5.large", want: capacity{Pods: 29, PodENI: 9}},
		{name: "with prefixes 3 × 9 × 16 + 2 = 434 is capped at 110 below 30 vCPUs", instanceType: "m5.large", prefixDelegation: true, want: capacity{Pods: 110, PodENI: 9}},
		{name: "with prefixes a small type stays under the cap", instanceType: "t3.nano", prefixDelegation: true, want: capacity{Pods: 34}},
		{name: "reserved ENIs still subtract with prefixes", instanceType: "t3.nano", prefixDelegation: true, reservedENIs: 1, want: capacity{Pods: 18}},
		{name: "a large type without prefixes is not capped", instanceType: "c5.24xlarge", want: capacity{Pods: 737, PodENI: 107}},
		{name: "with prefixes 30 vCPUs and more are capped at 250", instanceType: "c5.24xlarge", prefixDelegation: true, want: capacity{Pods: 250, PodENI: 107}},
		{name: "bare metal takes prefixes", instanceType: "m5.metal", prefixDelegation: true, want: capacity{Pods: 250, PodENI: 120}},
		{name: "a Xen type takes no prefixes and has no trunking", instanceType: "m4.large", prefixDelegation: true, want: capacity{Pods: 20}},
		{name: "a burstable Nitro type has no trunking", instanceType: "t3.nano", want: capacity{Pods: 4}},
		{name: "a Windows node takes no prefixes and no security groups for pods", instanceType: "m5.large", prefixDelegation: true, windows: true,
			want: capacity{Pods: 9}},
		{name: "kubelet maxPods wins over prefixes", instanceType: "m5.large", prefixDelegation: true,
			kubelet: &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](50)}, want: capacity{Pods: 50, PodENI: 9}},
		{name: "podsPerCore bounds prefixes", instanceType: "m5.large", prefixDelegation: true,
			kubelet: &awsv1.KubeletConfiguration{PodsPerCore: ptr.To[int32](10)}, want: capacity{Pods: 20, PodENI: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := entries[tt.instanceType]
			if !ok {
				t.Fatalf("%s is not in the catalog", tt.instanceType)
			}
			settings := Settings{VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, ReservedENIs: tt.reservedENIs, PrefixDelegation: tt.prefixDelegation}
			class := &awsv1.EC2NodeClass{}
			if tt.windows {
				class = &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}}}
			}
			class.Spec.Kubelet = tt.kubelet
			it := New(e, class, nil, &pricing.Book{}, settings)
			got := capacity{Pods: ptr.To(it.Capacity[corev1.ResourcePods]).Value()}
			if q, ok := it.Capacity[ResourcePodENI]; ok {
				got.PodENI = q.Value()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInstanceTypeInfoOfAccelerators(t *testing.T) {
	cat, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]*catalog.InstanceType{}
	for i := range cat.InstanceTypes {
		types[cat.InstanceTypes[i].Name] = &cat.InstanceTypes[i]
	}
	tests := []struct {
		name     string
		resource corev1.ResourceName
		count    int64
		labels   map[string]string
	}{
		{
			name: "g5.xlarge", resource: ResourceNVIDIAGPU, count: 1,
			labels: map[string]string{karpv1.InstanceGPUNameLabelKey: "a10g", karpv1.InstanceGPUManufacturerLabelKey: "nvidia", karpv1.InstanceGPUCountLabelKey: "1", karpv1.InstanceGPUMemoryLabelKey: "22888", karpv1.InstanceLocalNVMeLabelKey: "250"},
		},
		{
			name: "inf1.xlarge", resource: ResourceAWSNeuron, count: 1,
			labels: map[string]string{karpv1.InstanceAcceleratorNameLabelKey: "inferentia", karpv1.InstanceAcceleratorCountLabelKey: "1"},
		},
		{
			name:   "m7g.xlarge",
			labels: map[string]string{corev1.LabelArchStable: "arm64", karpv1.InstanceCPUManufacturerLabelKey: "aws"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := instanceTypeInfo(types[tt.name])
			labels := instanceTypeLabels(info)
			got := map[string]string{}
			for k := range tt.labels {
				got[k] = labels[k]
			}
			if diff := cmp.Diff(tt.labels, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			r, n := gpuResource(info)
			if neuron := neuronDevices(info); neuron > 0 {
				r, n = ResourceAWSNeuron, neuron
			}
			if r != tt.resource || n != tt.count {
				t.Errorf("accelerator resource = %q x %d, want %q x %d", r, n, tt.resource, tt.count)
			}
		})
	}
}

// defaultSettings are the provider's settings when none are configured.
var defaultSettings = Settings{VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent}

// describeCatalogOnce describes the local endpoint's catalog once for the whole
// package: the tests only read the entries, and one paginated describe instead
// of one per test cuts the round-trips that failed under CI load (a response
// body cut off with "use of closed network connection").
var describeCatalogOnce = sync.OnceValues(func() (map[string]*Entry, error) {
	endpoint, err := localaws.New(localaws.Options{ClusterName: "test", Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	client := ec2.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL),
	})
	return Describe(context.Background(), client)
})

// describedCatalog returns the entries the local endpoint describes. They are
// shared between tests: read them, never change them.
func describedCatalog(t *testing.T) map[string]*Entry {
	t.Helper()
	entries, err := describeCatalogOnce()
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
