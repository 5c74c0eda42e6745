package instancetype

import (
	"math"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
)

// FuzzInstanceType builds the planner's instance types from DescribeInstanceTypes entries
// with any field missing (each bit of missing drops one pointer) or out of range: either the
// catalog leaves the entry out naming the field, or the instance type has its vCPUs, no
// negative capacity, an overhead of each resource, and usable prices.
func FuzzInstanceType(f *testing.F) {
	f.Add("m5.large", int32(2), int64(8192), int32(3), int32(10), "Intel Xeon", "", int32(0), int32(0), int64(0), uint16(0), int32(0))
	f.Add("p3.2xlarge", int32(8), int64(62464), int32(4), int32(15), "Intel", "NVIDIA", int32(1), int32(0), int64(0), uint16(0), int32(110))
	f.Add("inf2.xlarge", int32(4), int64(16384), int32(4), int32(15), "AMD", "", int32(0), int32(1), int64(474), uint16(0), int32(-1))
	f.Add("m5.large", int32(2), int64(8192), int32(3), int32(10), "  ", "", int32(0), int32(0), int64(0), uint16(0), int32(0))
	f.Add("m5.large", int32(2), int64(8192), int32(3), int32(10), "Intel", "", int32(0), int32(0), int64(0), uint16(0xffff), int32(0))
	f.Add("x", int32(-1), int64(math.MaxInt64), int32(math.MaxInt32), int32(math.MaxInt32), "", "AMD", int32(-5), int32(math.MaxInt32), int64(-1), uint16(0), int32(math.MinInt32))
	f.Add("", int32(1), int64(1), int32(0), int32(0), "", "", int32(0), int32(0), int64(0), uint16(0), int32(0))
	f.Fuzz(func(t *testing.T, name string, vcpus int32, memMiB int64, enis, ipsPerENI int32, cpuMaker, gpuMaker string, gpus, neurons int32, storageGB int64, missing uint16, maxPods int32) {
		info := ec2types.InstanceTypeInfo{
			InstanceType:          ec2types.InstanceType(name),
			VCpuInfo:              &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(vcpus)},
			MemoryInfo:            &ec2types.MemoryInfo{SizeInMiB: aws.Int64(memMiB)},
			NetworkInfo:           &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(enis), Ipv4AddressesPerInterface: aws.Int32(ipsPerENI), EncryptionInTransitSupported: aws.Bool(true), NetworkCards: []ec2types.NetworkCardInfo{{BaselineBandwidthInGbps: aws.Float64(float64(vcpus))}, {}}},
			ProcessorInfo:         &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664, "sparc"}, Manufacturer: aws.String(cpuMaker)},
			GpuInfo:               &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Manufacturer: aws.String(gpuMaker), Count: aws.Int32(gpus), Name: aws.String("v100"), MemoryInfo: &ec2types.GpuDeviceMemoryInfo{}}}},
			NeuronInfo:            &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{{Count: aws.Int32(neurons)}}},
			InstanceStorageInfo:   &ec2types.InstanceStorageInfo{TotalSizeInGB: aws.Int64(storageGB)},
			SupportedUsageClasses: []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot, "capacity-block"},
		}
		// Fields inside a struct come before the struct, so each drop finds its parent.
		drops := []func(){
			func() { info.VCpuInfo.DefaultVCpus = nil }, func() { info.MemoryInfo.SizeInMiB = nil },
			func() { info.NetworkInfo.MaximumNetworkInterfaces = nil }, func() { info.ProcessorInfo.Manufacturer = nil },
			func() { info.GpuInfo.Gpus[0].Count = nil }, func() { info.GpuInfo.Gpus[0].Name = nil }, func() { info.GpuInfo.Gpus[0].MemoryInfo = nil },
			func() { info.NeuronInfo.NeuronDevices = nil }, func() { info.InstanceStorageInfo.TotalSizeInGB = nil },
			func() { info.VCpuInfo = nil }, func() { info.MemoryInfo = nil }, func() { info.NetworkInfo = nil }, func() { info.ProcessorInfo = nil },
			func() { info.GpuInfo = nil }, func() { info.NeuronInfo = nil }, func() { info.InstanceStorageInfo = nil },
		}
		for bit, drop := range drops {
			if missing&(1<<bit) != 0 {
				drop()
			}
		}
		if err := checkInstanceTypeInfo(info); err != nil {
			require.Regexp(t, `^(InstanceType|VCpuInfo|MemoryInfo|NetworkInfo|ProcessorInfo)`, err.Error())
			return
		}
		class := &awsv1.EC2NodeClass{}
		class.Spec.InstanceStorePolicy = ptr.To(awsv1.InstanceStorePolicyRAID0)
		if maxPods != 0 {
			class.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr.To(maxPods), PodsPerCore: ptr.To(maxPods / 2)}
		}
		prices := &pricing.Book{OnDemand: map[string]float64{name: 0.1}, Spot: map[string]map[string]float64{name: {"zone-a": 0.03}}}
		it := New(&Entry{Info: info, Zones: map[string]bool{"zone-a": true, "zone-b": true}}, class, map[string]string{"zone-a": "za-az1"}, prices, Settings{VMMemoryOverheadPercent: 0.075})
		require.Equal(t, int64(vcpus), it.Capacity.Cpu().Value())
		require.Equal(t, name, it.Labels[corev1.LabelInstanceTypeStable])
		for r, q := range it.Capacity {
			if r != corev1.ResourcePods {
				require.GreaterOrEqual(t, q.Sign(), 0, "capacity of %s is %s", r, q.String())
			}
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			require.Contains(t, it.Overhead, r)
		}
		require.Len(t, it.Offerings, 2)
		for _, o := range it.Offerings {
			require.Equal(t, "zone-a", o.Zone)
			require.Contains(t, []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}, o.CapacityType)
			require.True(t, nodecost.UsablePrice(o.Price), "price %v", o.Price)
		}
	})
}
