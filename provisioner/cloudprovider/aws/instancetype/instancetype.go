// Package instancetype builds the planner's instance types from what EC2 says of them
// (DescribeInstanceTypes and its offerings) or from a catalog: labels, capacity, kubelet
// overhead and priced offerings, and keeps the catalog and its prices fresh.
package instancetype

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
)

// Extended resources of accelerators, as their device plugins name them.
const (
	ResourceNVIDIAGPU corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU    corev1.ResourceName = "amd.com/gpu"
	ResourceAWSNeuron corev1.ResourceName = "aws.amazon.com/neuron"
	// ResourceAWSNeuronCore counts NeuronCores, which the Neuron device plugin also
	// advertises, so a pod may ask for part of a device.
	ResourceAWSNeuronCore corev1.ResourceName = "aws.amazon.com/neuroncore"
	// ResourceEFA counts the Elastic Fabric Adapters a node can attach (EFA device plugin).
	ResourceEFA corev1.ResourceName = "vpc.amazonaws.com/efa"
	// ResourcePodENI counts the branch network interfaces of a type that supports ENI
	// trunking: pods with their own security groups (the VPC resource controller's).
	ResourcePodENI     corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	resourceGPUUnknown corev1.ResourceName = ""
)

// Entry is what EC2 says about an instance type, before a node class applies.
type Entry struct {
	// Info is what DescribeInstanceTypes says of the type.
	Info ec2types.InstanceTypeInfo
	// Zones are those that offer the type.
	Zones map[string]bool
}

// Describe lists every instance type of the region and the zones offering it.
func Describe(ctx context.Context, client *ec2.Client) (map[string]*Entry, error) {
	out := map[string]*Entry{}
	types := ec2.NewDescribeInstanceTypesPaginator(client, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for types.HasMorePages() {
		page, err := types.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance types: %w", err)
		}
		for _, info := range page.InstanceTypes {
			if err := checkInstanceTypeInfo(info); err != nil {
				klog.FromContext(ctx).Info("leaving out an instance type EC2 describes incompletely", "instanceType", info.InstanceType, "reason", err.Error())
				continue
			}
			out[string(info.InstanceType)] = &Entry{Info: info, Zones: map[string]bool{}}
		}
	}
	offerings := ec2.NewDescribeInstanceTypeOfferingsPaginator(client, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		MaxResults:   aws.Int32(1000),
	})
	for offerings.HasMorePages() {
		page, err := offerings.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			if e, ok := out[string(o.InstanceType)]; ok {
				e.Zones[aws.ToString(o.Location)] = true
			}
		}
	}
	return out, nil
}

// maxMemoryMiB is the most memory an instance type may say it has: its bytes must fit an
// int64 (the largest EC2 instances have about 32 TiB).
const maxMemoryMiB = math.MaxInt64 >> 20

// checkInstanceTypeInfo says which field an instance type the planner cannot use lacks:
// a name, vCPUs, memory, network and processor information.
func checkInstanceTypeInfo(info ec2types.InstanceTypeInfo) error {
	switch {
	case info.InstanceType == "":
		return errors.New("InstanceType is empty")
	case info.VCpuInfo == nil || aws.ToInt32(info.VCpuInfo.DefaultVCpus) <= 0:
		return errors.New("VCpuInfo.DefaultVCpus is missing or not positive")
	case info.MemoryInfo == nil || aws.ToInt64(info.MemoryInfo.SizeInMiB) <= 0 || aws.ToInt64(info.MemoryInfo.SizeInMiB) > maxMemoryMiB:
		return errors.New("MemoryInfo.SizeInMiB is missing or out of range")
	case info.NetworkInfo == nil:
		return errors.New("NetworkInfo is missing")
	case info.ProcessorInfo == nil:
		return errors.New("ProcessorInfo is missing")
	}
	return nil
}

// Settings are the cluster-wide settings that shape a node's allocatable resources.
type Settings struct {
	// VMMemoryOverheadPercent of an instance's memory the hypervisor and OS keep.
	VMMemoryOverheadPercent float64
	// ReservedENIs are network interfaces kept from pods.
	ReservedENIs int64
	// PrefixDelegation is the VPC CNI's ENABLE_PREFIX_DELEGATION: Nitro types get a /28
	// prefix, 16 addresses, per secondary IP slot.
	PrefixDelegation bool
}

// New builds the planner's view of an instance type for one node class: its
// labels, capacity and kubelet overhead, and offerings in the class's zones (zone name to
// zone ID, the ID empty where unknown).
func New(e *Entry, class *awsv1.EC2NodeClass, zones map[string]string, prices *pricing.Book, settings Settings) *cloudprovider.InstanceType {
	info := e.Info
	name := string(info.InstanceType)
	vcpus := int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus))
	memMiB := aws.ToInt64(info.MemoryInfo.SizeInMiB)
	enis, ipsPerENI := int64(aws.ToInt32(info.NetworkInfo.MaximumNetworkInterfaces)), int64(aws.ToInt32(info.NetworkInfo.Ipv4AddressesPerInterface))
	eniPods := eniMaxPods(enis, ipsPerENI, settings.ReservedENIs)
	if settings.PrefixDelegation && prefixCapable(info) {
		eniPods = prefixMaxPods(enis, ipsPerENI, settings.ReservedENIs, vcpus)
	}
	build := amifamily.WindowsBuild(class)
	if build != "" {
		eniPods = windowsMaxPods(int64(aws.ToInt32(info.NetworkInfo.Ipv4AddressesPerInterface)))
	}
	pods := maxPods(eniPods, vcpus, class.Spec.Kubelet)

	labels := instanceTypeLabels(info)
	if build != "" {
		labels[corev1.LabelOSStable] = string(corev1.Windows)
		labels[corev1.LabelWindowsBuild] = build
	}
	it := &cloudprovider.InstanceType{
		Name:   name,
		Labels: labels,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewQuantity(vcpus, resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(int64(math.Floor(float64(memMiB)*(1-settings.VMMemoryOverheadPercent)))<<20, resource.BinarySI),
			corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
			corev1.ResourceEphemeralStorage: ephemeralStorage(class, info),
		},
	}
	if r, n := gpuResource(info); n > 0 {
		it.Capacity[r] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if n := neuronDevices(info); n > 0 {
		it.Capacity[ResourceAWSNeuron] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if n := neuronCores(info); n > 0 {
		it.Capacity[ResourceAWSNeuronCore] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if n := efaInterfaces(info); n > 0 {
		it.Capacity[ResourceEFA] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	// Security groups for pods are for Linux nodes only.
	if n := catalog.BranchInterfaces(name); n > 0 && build == "" {
		it.Capacity[ResourcePodENI] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	it.Overhead = overhead(vcpus, pods, it.Capacity[corev1.ResourceMemory], it.Capacity[corev1.ResourceEphemeralStorage], class.Spec.Kubelet)
	if build != "" {
		addWindowsOverhead(it.Overhead, class.Spec.Kubelet)
	}

	for _, usage := range info.SupportedUsageClasses {
		capacityType := karpv1.CapacityTypeOnDemand
		if usage == ec2types.UsageClassTypeSpot {
			capacityType = karpv1.CapacityTypeSpot
		} else if usage != ec2types.UsageClassTypeOnDemand {
			continue
		}
		for zone := range e.Zones {
			zoneID, ok := zones[zone]
			if !ok {
				continue
			}
			price, ok := prices.Price(name, zone, capacityType)
			if !ok {
				continue
			}
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: zone, ZoneID: zoneID, CapacityType: capacityType, Price: price, Available: true})
		}
	}
	return it
}

func ephemeralStorage(class *awsv1.EC2NodeClass, info ec2types.InstanceTypeInfo) resource.Quantity {
	// With RAID0 the kubelet's and containerd's directories move onto the array of the
	// instance store's NVMe disks, whose size EC2 gives in GB.
	if p := class.Spec.InstanceStorePolicy; p != nil && *p == awsv1.InstanceStorePolicyRAID0 {
		if s := info.InstanceStorageInfo; s != nil && aws.ToInt64(s.TotalSizeInGB) > 0 {
			return *resource.NewScaledQuantity(aws.ToInt64(s.TotalSizeInGB), resource.Giga)
		}
	}
	for _, m := range class.Spec.BlockDeviceMappings {
		if m != nil && m.RootVolume && m.EBS != nil && m.EBS.VolumeSize != nil {
			return *m.EBS.VolumeSize
		}
	}
	if len(class.Spec.BlockDeviceMappings) == 1 {
		if m := class.Spec.BlockDeviceMappings[0]; m != nil && m.EBS != nil && m.EBS.VolumeSize != nil {
			return *m.EBS.VolumeSize
		}
	}
	if amifamily.WindowsBuild(class) != "" {
		return defaultWindowsEphemeralStorage
	}
	return defaultEphemeralStorage
}

// overhead is what the kubelet keeps from pods: kube-reserved (EKS defaults unless the node
// class sets it), system-reserved and hard eviction thresholds, a percentage taken of the
// node's memory or storage as the kubelet takes it.
func overhead(vcpus, pods int64, memory, storage resource.Quantity, kubelet *awsv1.KubeletConfiguration) corev1.ResourceList {
	kubeReserved := corev1.ResourceList{
		corev1.ResourceCPU:              kubeReservedCPU(vcpus),
		corev1.ResourceMemory:           kubeReservedMemory(pods),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	nodefs := *resource.NewQuantity(storage.Value()*evictionHardNodefsPercent/100, resource.BinarySI)
	eviction := corev1.ResourceList{corev1.ResourceMemory: evictionHardMemory, corev1.ResourceEphemeralStorage: nodefs}
	var systemReserved corev1.ResourceList
	if kubelet != nil {
		overrideReserved(kubeReserved, kubelet.KubeReserved)
		systemReserved = corev1.ResourceList{}
		overrideReserved(systemReserved, kubelet.SystemReserved)
		if v, ok := kubelet.EvictionHard["memory.available"]; ok {
			eviction[corev1.ResourceMemory] = thresholdQuantity(v, memory)
		}
		if v, ok := kubelet.EvictionHard["nodefs.available"]; ok {
			eviction[corev1.ResourceEphemeralStorage] = thresholdQuantity(v, storage)
		}
	}
	total := corev1.ResourceList{}
	for _, list := range []corev1.ResourceList{kubeReserved, systemReserved, eviction} {
		for k, v := range list {
			q := total[k]
			q.Add(v)
			total[k] = q
		}
	}
	return total
}

func overrideReserved(into corev1.ResourceList, values map[string]string) {
	for k, v := range values {
		if q, err := resource.ParseQuantity(v); err == nil && k != "pid" {
			into[corev1.ResourceName(k)] = q
		}
	}
}

// thresholdQuantity reads an eviction threshold, either a quantity or a percentage of total.
func thresholdQuantity(v string, total resource.Quantity) resource.Quantity {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		pct, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return resource.Quantity{}
		}
		return *resource.NewQuantity(int64(float64(total.Value())*pct/100), resource.BinarySI)
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

var instanceNamePattern = regexp.MustCompile(`^([a-z]+)(\d+)([a-z0-9-]*)\.(.+)$`)

// instanceTypeLabels are the labels every node of the type carries.
func instanceTypeLabels(info ec2types.InstanceTypeInfo) map[string]string {
	name := string(info.InstanceType)
	labels := map[string]string{
		corev1.LabelInstanceTypeStable:             name,
		corev1.LabelOSStable:                       "linux",
		karpv1.InstanceCPULabelKey:                 strconv.Itoa(int(aws.ToInt32(info.VCpuInfo.DefaultVCpus))),
		karpv1.InstanceMemoryLabelKey:              strconv.FormatInt(aws.ToInt64(info.MemoryInfo.SizeInMiB), 10),
		karpv1.InstanceHypervisorLabelKey:          string(info.Hypervisor),
		karpv1.InstanceEncryptionInTransitLabelKey: strconv.FormatBool(aws.ToBool(info.NetworkInfo.EncryptionInTransitSupported)),
	}
	if m := instanceNamePattern.FindStringSubmatch(name); m != nil {
		family, _, _ := strings.Cut(name, ".")
		labels[karpv1.InstanceCategoryLabelKey] = m[1]
		labels[karpv1.InstanceGenerationLabelKey] = m[2]
		labels[karpv1.InstanceFamilyLabelKey] = family
		labels[karpv1.InstanceSizeLabelKey] = m[4]
	}
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		switch a {
		case ec2types.ArchitectureTypeX8664:
			labels[corev1.LabelArchStable] = amifamily.ArchitectureAMD64
		case ec2types.ArchitectureTypeArm64:
			labels[corev1.LabelArchStable] = amifamily.ArchitectureARM64
		}
	}
	if m := strings.Fields(aws.ToString(info.ProcessorInfo.Manufacturer)); len(m) > 0 {
		labels[karpv1.InstanceCPUManufacturerLabelKey] = strings.ToLower(m[0])
	}
	var bandwidth float64
	for _, card := range info.NetworkInfo.NetworkCards {
		bandwidth += aws.ToFloat64(card.BaselineBandwidthInGbps)
	}
	if bandwidth > 0 {
		labels[karpv1.InstanceNetworkBandwidthLabelKey] = strconv.Itoa(int(math.Round(bandwidth * 1000)))
	}
	if s := info.InstanceStorageInfo; s != nil && aws.ToInt64(s.TotalSizeInGB) > 0 {
		labels[karpv1.InstanceLocalNVMeLabelKey] = strconv.FormatInt(aws.ToInt64(s.TotalSizeInGB), 10)
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) > 0 {
		gpu := g.Gpus[0]
		labels[karpv1.InstanceGPUNameLabelKey] = strings.ToLower(aws.ToString(gpu.Name))
		labels[karpv1.InstanceGPUManufacturerLabelKey] = strings.ToLower(aws.ToString(gpu.Manufacturer))
		labels[karpv1.InstanceGPUCountLabelKey] = strconv.Itoa(int(aws.ToInt32(gpu.Count)))
		if gpu.MemoryInfo != nil {
			labels[karpv1.InstanceGPUMemoryLabelKey] = strconv.Itoa(int(aws.ToInt32(gpu.MemoryInfo.SizeInMiB)))
		}
	}
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		labels[karpv1.InstanceAcceleratorNameLabelKey] = strings.ToLower(aws.ToString(n.NeuronDevices[0].Name))
		labels[karpv1.InstanceAcceleratorCountLabelKey] = strconv.Itoa(int(neuronDevices(info)))
		// Inferentia and Trainium are AWS's own chips; EC2 names no manufacturer for them.
		labels[karpv1.InstanceAcceleratorMfrLabelKey] = "aws"
	} else if a := info.InferenceAcceleratorInfo; a != nil && len(a.Accelerators) > 0 {
		labels[karpv1.InstanceAcceleratorMfrLabelKey] = strings.ToLower(aws.ToString(a.Accelerators[0].Manufacturer))
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil && aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps) > 0 {
		labels[karpv1.InstanceEBSBandwidthLabelKey] = strconv.Itoa(int(aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps)))
	}
	if ghz := aws.ToFloat64(info.ProcessorInfo.SustainedClockSpeedInGhz); ghz > 0 {
		labels[karpv1.InstanceCPUSustainedClockLabelKey] = strconv.Itoa(int(math.Round(ghz * 1000)))
	}
	family, _, _ := strings.Cut(name, ".")
	labels[karpv1.InstanceCapabilityFlexLabelKey] = strconv.FormatBool(strings.HasSuffix(family, "-flex"))
	return labels
}

// neuronCores counts the NeuronCores of the type's Neuron devices, the unit the Neuron
// device plugin also advertises (aws.amazon.com/neuroncore).
func neuronCores(info ec2types.InstanceTypeInfo) int64 {
	if info.NeuronInfo == nil {
		return 0
	}
	var n int64
	for _, d := range info.NeuronInfo.NeuronDevices {
		if d.CoreInfo != nil {
			n += int64(aws.ToInt32(d.Count)) * int64(aws.ToInt32(d.CoreInfo.Count))
		}
	}
	return n
}

// efaInterfaces is how many Elastic Fabric Adapters a node of the type can attach, the
// EFA device plugin's vpc.amazonaws.com/efa.
func efaInterfaces(info ec2types.InstanceTypeInfo) int64 {
	if info.NetworkInfo == nil || !aws.ToBool(info.NetworkInfo.EfaSupported) || info.NetworkInfo.EfaInfo == nil {
		return 0
	}
	return int64(aws.ToInt32(info.NetworkInfo.EfaInfo.MaximumEfaInterfaces))
}

// gpuResource names the device plugin resource of the type's GPUs and counts them.
func gpuResource(info ec2types.InstanceTypeInfo) (corev1.ResourceName, int64) {
	if info.GpuInfo == nil {
		return resourceGPUUnknown, 0
	}
	var count int64
	name := resourceGPUUnknown
	for _, g := range info.GpuInfo.Gpus {
		switch strings.ToLower(aws.ToString(g.Manufacturer)) {
		case "nvidia":
			name = ResourceNVIDIAGPU
		case "amd":
			name = ResourceAMDGPU
		default:
			continue
		}
		count += int64(aws.ToInt32(g.Count))
	}
	return name, count
}

func neuronDevices(info ec2types.InstanceTypeInfo) int64 {
	if info.NeuronInfo == nil {
		return 0
	}
	var n int64
	for _, d := range info.NeuronInfo.NeuronDevices {
		n += int64(aws.ToInt32(d.Count))
	}
	return n
}
