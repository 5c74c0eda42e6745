package instancetype

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// The kubelet of an EKS-optimized AMI reserves resources for itself and the OS, and evicts
// pods below a memory threshold. The planner subtracts the same amounts, so a pod it plans
// onto a node is accepted there.

// defaultEphemeralStorage is the root volume size of EKS AMIs without block device mappings.
var defaultEphemeralStorage = resource.MustParse("20Gi")

// eniMaxPods is the VPC CNI limit without prefix delegation: one IP per pod on every ENI but
// its primary address, plus two host-network pods.
func eniMaxPods(enis, ipsPerENI, reservedENIs int64) int64 {
	enis -= reservedENIs
	if enis <= 0 || ipsPerENI <= 1 {
		return 2
	}
	return enis*(ipsPerENI-1) + 2
}

// Pod ceilings of the EKS max-pods calculator with prefix delegation, by vCPUs.
const (
	prefixPodsSmall      = 110
	prefixPodsLarge      = 250
	prefixPodsLargeVCPUs = 30
	ipsPerPrefix         = 16
)

// prefixMaxPods is the EKS max-pods calculator's limit with prefix delegation: a /28 prefix
// in every secondary address slot of every ENI, plus two host-network pods, capped at 110
// pods below 30 vCPUs and 250 from there.
func prefixMaxPods(enis, ipsPerENI, reservedENIs, vcpus int64) int64 {
	ceiling := int64(prefixPodsSmall)
	if vcpus >= prefixPodsLargeVCPUs {
		ceiling = prefixPodsLarge
	}
	enis -= reservedENIs
	if enis <= 0 || ipsPerENI <= 1 {
		return 2
	}
	return min(enis*(ipsPerENI-1)*ipsPerPrefix+2, ceiling)
}

// prefixCapable says whether the VPC CNI can assign prefixes on the type: Nitro instances
// and bare metal ones.
func prefixCapable(info ec2types.InstanceTypeInfo) bool {
	return info.Hypervisor == ec2types.InstanceTypeHypervisorNitro || aws.ToBool(info.BareMetal)
}

// maxPods applies the EC2NodeClass's kubelet maxPods and podsPerCore to the ENI limit.
func maxPods(eniLimit, vcpus int64, kubelet *awsv1.KubeletConfiguration) int64 {
	pods := eniLimit
	if kubelet == nil {
		return pods
	}
	if kubelet.MaxPods != nil {
		pods = int64(*kubelet.MaxPods)
	}
	if kubelet.PodsPerCore != nil && *kubelet.PodsPerCore > 0 {
		pods = min(pods, int64(*kubelet.PodsPerCore)*vcpus)
	}
	return pods
}

// kubeReservedCPU follows the EKS AMI: 6% of the first core, 1% of the second, 0.5% of
// the next two and 0.25% of every core beyond four.
func kubeReservedCPU(vcpus int64) resource.Quantity {
	// Tenths of a millicore per core, for each band of cores.
	bands := []struct{ cores, tenthMilli int64 }{{1, 600}, {1, 100}, {2, 50}, {vcpus, 25}}
	var tenths, left = int64(0), vcpus
	for _, b := range bands {
		n := min(left, b.cores)
		tenths += n * b.tenthMilli
		left -= n
	}
	return *resource.NewMilliQuantity(tenths/10, resource.DecimalSI)
}

// kubeReservedMemory follows the EKS AMI: 255Mi plus 11Mi per pod.
func kubeReservedMemory(pods int64) resource.Quantity {
	return *resource.NewQuantity((255+11*pods)<<20, resource.BinarySI)
}

// evictionHardMemory is the kubelet default hard eviction threshold for memory.available.
var evictionHardMemory = resource.MustParse("100Mi")

// evictionHardNodefsPercent is the kubelet default nodefs.available threshold.
const evictionHardNodefsPercent = 10
