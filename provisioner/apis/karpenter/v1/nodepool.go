package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool describes a kind of capacity Tailor may launch: the NodeClaim template its
// nodes are made from, how they may be disrupted, and how much of it may exist.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
// +kubebuilder:validation:XValidation:message="spec.replicas cannot be added to or removed from a NodePool: a NodePool is static or dynamic for life, create another NodePool instead",rule="has(oldSelf.spec.replicas) == has(self.spec.replicas)"
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name"
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1
// +kubebuilder:printcolumn:name="Price",type="string",JSONPath=".status.price.perHour",priority=1
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodePoolSpec `json:"spec"`
	// +optional
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolSpec is the desired state of a NodePool.
//
// +kubebuilder:validation:XValidation:message="a static NodePool (spec.replicas) has no weight: remove spec.weight",rule="!has(self.replicas) || !has(self.weight)"
// +kubebuilder:validation:XValidation:message="a static NodePool (spec.replicas) is limited by limits.nodes only: remove the other limits",rule="!has(self.replicas) || !has(self.limits) || self.limits.all(k, k == 'nodes')"
type NodePoolSpec struct {
	// Template describes the NodeClaims (and so the nodes) launched from this NodePool.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when and how fast nodes of this NodePool may be taken away.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption"`
	// Limits caps the total resources (for example cpu and memory) of all nodes of this
	// NodePool. A launch that would exceed a limit does not happen.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders NodePools: pods are planned onto the highest-weight NodePool that can
	// take them. NodePools without a weight have weight 0.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the NodePool static (with the StaticCapacity feature gate): it keeps
	// exactly this many nodes whether pods need them or not, up to limits.nodes. Its nodes
	// are not consolidated; drift and expiry replace them. Set it at creation; kubectl
	// scale nodepool changes it.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// IsStatic reports whether the NodePool keeps a fixed number of nodes (spec.replicas).
func (in *NodePool) IsStatic() bool { return in.Spec.Replicas != nil }

// Limits are resource quantities a NodePool's nodes may add up to.
type Limits corev1.ResourceList

// ConsolidationPolicy says which nodes are candidates for consolidation.
// +kubebuilder:validation:Enum:={WhenEmpty,WhenEmptyOrUnderutilized}
type ConsolidationPolicy string

const (
	// ConsolidationPolicyWhenEmpty removes nodes that run no workload pods.
	ConsolidationPolicyWhenEmpty ConsolidationPolicy = "WhenEmpty"
	// ConsolidationPolicyWhenEmptyOrUnderutilized also deletes or replaces nodes whose pods fit elsewhere more cheaply.
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
)

// Disruption configures voluntary disruption of a NodePool's nodes.
type Disruption struct {
	// ConsolidateAfter is how long a node must have seen no pod scheduled or removed before
	// it may be consolidated. "Never" turns consolidation off.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +required
	ConsolidateAfter NillableDuration `json:"consolidateAfter"`
	// ConsolidationPolicy is WhenEmpty or WhenEmptyOrUnderutilized (the default).
	// +kubebuilder:default:="WhenEmptyOrUnderutilized"
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many nodes may be disrupted at once. The most restrictive active
	// budget applies; without budgets, 10% of the NodePool's nodes may be disrupted at once.
	// +kubebuilder:validation:XValidation:message="a budget with schedule needs duration, and duration needs schedule: set both or neither",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// DisruptionReason is why a node is voluntarily disrupted.
// +kubebuilder:validation:Enum:={Underutilized,Empty,Drifted}
type DisruptionReason string

// The reasons a budget may name.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Budget limits the number of a NodePool's nodes disrupted at the same time, optionally only
// during a schedule window and only for some reasons.
type Budget struct {
	// Reasons this budget applies to; all reasons when empty.
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is the number ("5") or percentage ("10%") of the NodePool's nodes that may be
	// disrupted at once.
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	// +required
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC) at which the budget becomes active; with Duration,
	// it sets the window in which the budget applies. Without it, the budget always applies.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration is how long the budget stays active after each Schedule time.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the template NodeClaims of a NodePool are made from.
type NodeClaimTemplate struct {
	// +optional
	ObjectMeta ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the subset of object metadata a NodeClaim template carries onto its nodes.
type ObjectMeta struct {
	// Labels added to every node of the NodePool.
	// +kubebuilder:validation:XValidation:message="keys in the kubernetes.io domain are reserved for the kubelet: use a well-known key such as topology.kubernetes.io/zone or a key in your own domain",rule="self.all(x, x in [\"beta.kubernetes.io/instance-type\", \"failure-domain.beta.kubernetes.io/region\", \"beta.kubernetes.io/os\", \"beta.kubernetes.io/arch\", \"failure-domain.beta.kubernetes.io/zone\", \"topology.kubernetes.io/zone\", \"topology.kubernetes.io/region\", \"node.kubernetes.io/instance-type\", \"kubernetes.io/arch\", \"kubernetes.io/os\", \"node.kubernetes.io/windows-build\"] || x.find(\"^([^/]+)\").endsWith(\"node.kubernetes.io\") || x.find(\"^([^/]+)\").endsWith(\"node-restriction.kubernetes.io\") || !x.find(\"^([^/]+)\").endsWith(\"kubernetes.io\"))"
	// +kubebuilder:validation:XValidation:message="labels in the karpenter.sh domain are set by Tailor: remove them from the template",rule="self.all(x, !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))"
	// +kubebuilder:validation:XValidation:message="kubernetes.io/hostname is set by the kubelet and cannot be required or set",rule="self.all(x, x != \"kubernetes.io/hostname\")"
	// +kubebuilder:validation:MaxProperties:=100
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to every NodeClaim of the NodePool.
	// +kubebuilder:validation:MaxProperties:=100
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is the spec of the NodeClaims a NodePool makes. Resource requests
// are left out: they come from the pods planned onto each NodeClaim.
type NodeClaimTemplateSpec struct {
	// Taints added to every node; pods must tolerate them to be planned onto this NodePool.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are added to new nodes and expected to be removed by another component
	// (a CNI or a storage driver, say). Pods need not tolerate them.
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements narrow the instance types, zones, capacity types and other labels of the
	// nodes this NodePool may launch.
	// +kubebuilder:validation:XValidation:message="operator In needs at least one value: add values or use Exists",rule="self.all(x, x.operator == 'In' ? (has(x.values) && x.values.size() != 0) : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// NodeClassRef names the cloud-specific class (an EC2NodeClass) of the nodes.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// ExpireAfter is how long a node may live before it is replaced; "Never" disables expiry.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitempty"`
	// TerminationGracePeriod is the longest a node may take to drain once its deletion
	// started; past it, remaining pods are deleted.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// NodeClassReference points at a cloud-specific node class.
type NodeClassReference struct {
	// Kind of the node class, EC2NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind must be set, for example EC2NodeClass"
	// +required
	Kind string `json:"kind"`
	// Name of the node class.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name must be set to the name of an EC2NodeClass"
	// +required
	Name string `json:"name"`
	// Group of the node class, karpenter.k8s.aws.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group must be set, for example karpenter.k8s.aws"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
}

// NodePool condition types; Ready is True when both are.
const (
	// ConditionTypeNodeClassReady is True when the referenced EC2NodeClass exists and is Ready.
	ConditionTypeNodeClassReady = "NodeClassReady"
	// ConditionTypeValidationSucceeded is True when the NodePool passes the checks its schema cannot make.
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
)

// NodePoolStatus is the observed state of a NodePool.
type NodePoolStatus struct {
	// Resources is the total capacity of the NodePool's NodeClaims (what a NodeClaim requests
	// until its instance is launched), the measure its limits apply to, plus the count of
	// NodeClaims as "nodes".
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes is the number of the NodePool's NodeClaims, as Karpenter's status.nodes (the
	// Nodes column of kubectl get nodepools).
	// +kubebuilder:default:=0
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// Price is what the NodePool's NodeClaims cost per hour, summed: each as launched, or as
	// planned until it is (Tailor's; Karpenter has no such field).
	// +optional
	Price *Price `json:"price,omitempty"`
	// NodeClassObservedGeneration is the generation of the node class the NodeClassReady
	// condition was last computed from.
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
	// Conditions of the NodePool: NodeClassReady, ValidationSucceeded and Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}
