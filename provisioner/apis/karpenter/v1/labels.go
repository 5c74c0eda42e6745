package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Well-known labels set on every node Tailor launches. They are the keys NodePool
// requirements, pod node selectors and affinities use to choose capacity.
const (
	// NodePoolLabelKey names the NodePool a node was launched from.
	NodePoolLabelKey = Group + "/nodepool"
	// CapacityTypeLabelKey is "spot" or "on-demand".
	CapacityTypeLabelKey = Group + "/capacity-type"
	// NodeInitializedLabelKey is set to "true" once the node is Ready and its startup taints are gone.
	NodeInitializedLabelKey = Group + "/initialized"
	// NodeRegisteredLabelKey is set to "true" once the node joined and was matched to its NodeClaim.
	NodeRegisteredLabelKey = Group + "/registered"
	// NodeDoNotSyncTaintsLabelKey set to "true" on a node (by its kubelet's --node-labels)
	// keeps the NodeClaim's taints and startup taints off it at registration: something
	// else manages the node's taints.
	NodeDoNotSyncTaintsLabelKey = Group + "/do-not-sync-taints"

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	// CapacityTypeReserved is capacity launched into an EC2 capacity reservation.
	CapacityTypeReserved = "reserved"
)

// Annotations.
const (
	// DoNotDisruptAnnotationKey on a pod or node blocks voluntary disruption.
	DoNotDisruptAnnotationKey = Group + "/do-not-disrupt"
	// NodePoolHashAnnotationKey records the static hash (NodePool.Hash) of the NodePool
	// template a NodeClaim was made from.
	NodePoolHashAnnotationKey = Group + "/nodepool-hash"
	// NodeClaimMinValuesRelaxedAnnotationKey is "true" on a NodeClaim whose requirements'
	// minValues were lowered to the values its pods' instance types have (minValuesPolicy
	// BestEffort), "false" on one of a NodePool with minValues that met them.
	NodeClaimMinValuesRelaxedAnnotationKey = Group + "/nodeclaim-min-values-relaxed"
	// NodePoolHashVersionAnnotationKey records the NodePoolHashVersion that hash was
	// computed with.
	NodePoolHashVersionAnnotationKey = Group + "/nodepool-hash-version"
	// NodeClaimTerminationTimestampAnnotationKey on a deleted NodeClaim (RFC 3339) is when
	// its drain stops waiting for PodDisruptionBudgets and deletes the pods left, if that is
	// sooner than its terminationGracePeriod allows: node repair sets it to the moment of
	// the repair.
	NodeClaimTerminationTimestampAnnotationKey = Group + "/nodeclaim-termination-timestamp"
)

// Finalizers.
const (
	// TerminationFinalizer keeps a NodeClaim (and its Node) until its instance is terminated.
	TerminationFinalizer = Group + "/termination"
)

// Taints Tailor manages.
var (
	// UnregisteredNoExecuteTaint is registered with every new node and removed once Tailor
	// has synced the NodeClaim's labels and taints onto it, so no pod lands on a node whose
	// labels are not final yet.
	UnregisteredNoExecuteTaint = corev1.Taint{Key: Group + "/unregistered", Effect: corev1.TaintEffectNoExecute}
	// DisruptedNoScheduleTaint cordons a node that is being disrupted or terminated.
	DisruptedNoScheduleTaint = corev1.Taint{Key: Group + "/disrupted", Effect: corev1.TaintEffectNoSchedule}
)

// Labels that describe an instance type. They are the keys of the "karpenter.k8s.aws" group
// that Karpenter users already write in NodePool requirements.
const (
	awsGroup                            = "karpenter.k8s.aws"
	InstanceCategoryLabelKey            = awsGroup + "/instance-category"
	InstanceFamilyLabelKey              = awsGroup + "/instance-family"
	InstanceGenerationLabelKey          = awsGroup + "/instance-generation"
	InstanceSizeLabelKey                = awsGroup + "/instance-size"
	InstanceCPULabelKey                 = awsGroup + "/instance-cpu"
	InstanceCPUManufacturerLabelKey     = awsGroup + "/instance-cpu-manufacturer"
	InstanceMemoryLabelKey              = awsGroup + "/instance-memory"
	InstanceHypervisorLabelKey          = awsGroup + "/instance-hypervisor"
	InstanceNetworkBandwidthLabelKey    = awsGroup + "/instance-network-bandwidth"
	InstanceLocalNVMeLabelKey           = awsGroup + "/instance-local-nvme"
	InstanceGPUNameLabelKey             = awsGroup + "/instance-gpu-name"
	InstanceGPUManufacturerLabelKey     = awsGroup + "/instance-gpu-manufacturer"
	InstanceGPUCountLabelKey            = awsGroup + "/instance-gpu-count"
	InstanceGPUMemoryLabelKey           = awsGroup + "/instance-gpu-memory"
	InstanceAcceleratorNameLabelKey     = awsGroup + "/instance-accelerator-name"
	InstanceAcceleratorCountLabelKey    = awsGroup + "/instance-accelerator-count"
	InstanceEncryptionInTransitLabelKey = awsGroup + "/instance-encryption-in-transit-supported"
	InstanceEBSBandwidthLabelKey        = awsGroup + "/instance-ebs-bandwidth"
	InstanceCPUSustainedClockLabelKey   = awsGroup + "/instance-cpu-sustained-clock-speed-mhz"
	InstanceAcceleratorMfrLabelKey      = awsGroup + "/instance-accelerator-manufacturer"
	InstanceCapabilityFlexLabelKey      = awsGroup + "/instance-capability-flex"
	EC2NodeClassLabelKey                = awsGroup + "/ec2nodeclass"
	// CapacityReservationIDLabelKey is the id of the capacity reservation a reserved node
	// runs in; CapacityReservationTypeLabelKey its type, default or capacity-block.
	CapacityReservationIDLabelKey   = awsGroup + "/capacity-reservation-id"
	CapacityReservationTypeLabelKey = awsGroup + "/capacity-reservation-type"
	// ZoneIDLabelKey is the ID of the node's availability zone (use1-az1), the same physical
	// zone in every account, where zone names are shuffled per account.
	ZoneIDLabelKey = "topology.k8s.aws/zone-id"
)

// WellKnownLabels are the label keys whose values Tailor knows for every offering before a
// node exists. Requirements on other keys must be satisfied by the NodePool's own labels.
var WellKnownLabels = map[string]bool{
	NodePoolLabelKey:                    true,
	CapacityTypeLabelKey:                true,
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelTopologyZone:            true,
	ZoneIDLabelKey:                      true,
	CapacityReservationIDLabelKey:       true,
	CapacityReservationTypeLabelKey:     true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelArchStable:              true,
	corev1.LabelOSStable:                true,
	corev1.LabelWindowsBuild:            true,
	InstanceCategoryLabelKey:            true,
	InstanceFamilyLabelKey:              true,
	InstanceGenerationLabelKey:          true,
	InstanceSizeLabelKey:                true,
	InstanceCPULabelKey:                 true,
	InstanceCPUManufacturerLabelKey:     true,
	InstanceMemoryLabelKey:              true,
	InstanceHypervisorLabelKey:          true,
	InstanceNetworkBandwidthLabelKey:    true,
	InstanceLocalNVMeLabelKey:           true,
	InstanceGPUNameLabelKey:             true,
	InstanceGPUManufacturerLabelKey:     true,
	InstanceGPUCountLabelKey:            true,
	InstanceGPUMemoryLabelKey:           true,
	InstanceAcceleratorNameLabelKey:     true,
	InstanceAcceleratorCountLabelKey:    true,
	InstanceEncryptionInTransitLabelKey: true,
	InstanceEBSBandwidthLabelKey:        true,
	InstanceCPUSustainedClockLabelKey:   true,
	InstanceAcceleratorMfrLabelKey:      true,
	InstanceCapabilityFlexLabelKey:      true,
}
