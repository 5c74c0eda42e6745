package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeOverlay changes what the planner believes about the instance types its requirements
// select: their price, and extended resources their nodes will offer. It changes planning
// (which type is bought, what a consolidation saves) and the order in which on-demand
// launches try the planned types, never what EC2 charges or what a node advertises.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeoverlays,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight"
// +kubebuilder:printcolumn:name="Price",type="string",JSONPath=".spec.price"
// +kubebuilder:printcolumn:name="Adjustment",type="string",JSONPath=".spec.priceAdjustment"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type NodeOverlay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeOverlaySpec `json:"spec"`
	// +optional
	Status NodeOverlayStatus `json:"status,omitempty"`
}

// NodeOverlaySpec selects instance type offerings and says what changes about them.
//
// +kubebuilder:validation:XValidation:message="price and priceAdjustment cannot both be set: price replaces the offering's price, priceAdjustment changes it; keep one",rule="!(has(self.price) && has(self.priceAdjustment))"
type NodeOverlaySpec struct {
	// Requirements select the offerings the overlay applies to, by the labels of their
	// instance type (node.kubernetes.io/instance-type, karpenter.k8s.aws/instance-family, ...),
	// karpenter.sh/capacity-type, topology.kubernetes.io/zone and karpenter.sh/nodepool. All
	// must hold; no requirement selects every offering.
	// +kubebuilder:validation:XValidation:message="operator In and NotIn need at least one value: add values or use Exists",rule="self.all(x, x.operator == 'In' || x.operator == 'NotIn' ? (has(x.values) && x.values.size() != 0) : true)"
	// +kubebuilder:validation:XValidation:message="operator must be In, NotIn, Exists, DoesNotExist, Gt or Lt",rule="self.all(x, x.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'])"
	// +kubebuilder:validation:XValidation:message="operators Gt and Lt take exactly one integer value",rule="self.all(x, x.operator == 'Gt' || x.operator == 'Lt' ? (has(x.values) && x.values.size() == 1) : true)"
	// +kubebuilder:validation:XValidation:message="kubernetes.io/hostname is set by the kubelet and selects no instance type: select by node.kubernetes.io/instance-type or another instance type label",rule="self.all(x, x.key != 'kubernetes.io/hostname')"
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Requirements []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	// Price replaces the hourly price in USD of the selected offerings' instances, such as
	// "0.0415".
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Price *string `json:"price,omitempty"`
	// PriceAdjustment changes the hourly price of the selected offerings' instances: by an
	// amount in USD ("+0.1", "-0.05") or a percentage of it ("+10%", "-20%"). A price never
	// goes below 0.
	// +kubebuilder:validation:Pattern=`^[+-]([0-9]+(\.[0-9]+)?|\.[0-9]+)%?$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	PriceAdjustment *string `json:"priceAdjustment,omitempty"`
	// Capacity adds extended resources (such as example.com/fpga or nvidia.com/gpu for a
	// sliced GPU) to the capacity of the selected instance types, or replaces their amount.
	// +kubebuilder:validation:XValidation:message="capacity overrides only extended resources: cpu, memory, pods and ephemeral-storage come from the instance type and cannot be overridden",rule="self.all(x, !(x in ['cpu', 'memory', 'pods', 'ephemeral-storage']))"
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Weight orders overlays that select the same offering: the higher weight's price wins,
	// and capacity is merged per resource, the higher weight's amount winning. Two overlays of
	// the same weight that disagree conflict (see the Ready condition).
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=10000
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// NodeOverlayStatus reports whether the overlay applies.
type NodeOverlayStatus struct {
	// Conditions of the NodeOverlay: ValidationSucceeded and Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeOverlay condition types and reasons, Karpenter's: a condition that is True has its type
// as reason.
const (
	// ConditionTypeValidationSucceeded is False when the spec cannot be applied.
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	// ConditionTypeReady is True when the overlay applies without conflict.
	ConditionTypeReady = "Ready"
	// ReasonValidationFailed is the reason of a ValidationSucceeded False.
	ReasonValidationFailed = "ValidationFailed"
	// ReasonConflict is the reason of a Ready False: an overlay of the same weight selects
	// the same offering and sets another price or capacity.
	ReasonConflict = "Conflict"
)

// WeightOrZero is the overlay's weight, 0 when unset.
func (o *NodeOverlay) WeightOrZero() int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}

// NodeOverlayList is a list of NodeOverlays.
//
// +kubebuilder:object:root=true
type NodeOverlayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeOverlay `json:"items"`
}
