package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is a request for one node: Tailor creates it for capacity it planned, launches
// an instance for it, and follows it until its Node is registered and initialized.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type"
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1
// +kubebuilder:printcolumn:name="Price",type="string",JSONPath=".status.price.perHour",priority=1
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec of a NodeClaim cannot change: delete the NodeClaim and let Tailor make a new one"
	// +required
	Spec NodeClaimSpec `json:"spec"`
	// +optional
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimSpec is what the node must be.
type NodeClaimSpec struct {
	// Taints the node is registered with.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints the node is registered with and that another component removes.
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the launched instance must satisfy (instance types, zones, capacity types, ...).
	// +kubebuilder:validation:XValidation:message="operator In needs at least one value: add values or use Exists",rule="self.all(x, x.operator == 'In' ? (has(x.values) && x.values.size() != 0) : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// Resources the node must offer: the sum of the requests of the pods planned onto it.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// NodeClassRef names the cloud-specific class of the node.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// ExpireAfter is how long the node may live before it is replaced; "Never" disables expiry.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitempty"`
	// TerminationGracePeriod is the longest the node may take to drain once its deletion started.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// ResourceRequirements are the resources a NodeClaim asks for.
type ResourceRequirements struct {
	// Requests are the minimum resources the node must have.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaim condition types, in the order a NodeClaim reaches them. Their types and reasons
// are Karpenter v1's: a condition that is True has its type as reason.
const (
	// ConditionTypeLaunched is True once the cloud provider created the instance, Unknown
	// while a launch fails and is tried again (reason LaunchFailed or NodeClassNotReady).
	ConditionTypeLaunched = "Launched"
	// ConditionTypeRegistered is True once a Node with the instance's providerID joined,
	// Unknown (NodeNotFound) until then, False (MultipleNodesFound) when several did.
	ConditionTypeRegistered = "Registered"
	// ConditionTypeInitialized is True once the Node is Ready with its startup taints removed
	// and its extended resources registered; Unknown until then with the reason it waits for
	// (NodeNotFound, NodeNotReady, StartupTaintsExist, KnownEphemeralTaintsExist,
	// ResourceNotRegistered).
	ConditionTypeInitialized = "Initialized"
	// ConditionTypeReady sums up Launched, Registered and Initialized: True when all three
	// are, False (UnhealthyDependents) when one is False, Unknown (ReconcilingDependents)
	// otherwise; its message lists those that are not True.
	ConditionTypeReady = "Ready"
	// ConditionTypeDrifted is True when the node no longer matches its NodePool or node class
	// (reason NodePoolDrifted, RequirementsDrifted, NodeClassDrifted, AMIDrifted,
	// SubnetDrifted or SecurityGroupDrifted); the disruption controller replaces such nodes.
	ConditionTypeDrifted = "Drifted"
)

// NodeClaimStatus is what the node is.
type NodeClaimStatus struct {
	// NodeName is the name of the NodeClaim's Node. Tailor sets it as soon as the instance
	// is launched (from its private DNS name) so pods can be nominated to it before it joins.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID of the instance, aws:///<zone>/<instance-id>.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID of the instance's AMI.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity of the instance.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable resources of the node: capacity minus kubelet and system overhead.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions of the NodeClaim: Launched, Registered, Initialized, Ready and Drifted.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Price is what the launched node costs per hour: its instance and what the node pays
	// besides (Tailor's; Karpenter has no such field).
	// +optional
	Price *Price `json:"price,omitempty"`
	// LastPodEventTime is the last time a pod was scheduled to or removed from the node.
	// Tailor does not set it: its disruption controller follows each node's pods itself.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// Price is what nodes cost per hour in USD, as decimal strings, split into parts that sum to
// PerHour: the instance (less the DaemonSets' share), its EBS volumes, its public IPv4
// address, detailed monitoring, and the share of the instance the DaemonSet pods take.
type Price struct {
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	PerHour string `json:"perHour"`
	// +optional
	Instance string `json:"instance,omitempty"`
	// +optional
	Volumes string `json:"volumes,omitempty"`
	// +optional
	PublicIPv4 string `json:"publicIPv4,omitempty"`
	// +optional
	Monitoring string `json:"monitoring,omitempty"`
	// +optional
	DaemonSets string `json:"daemonSets,omitempty"`
}
