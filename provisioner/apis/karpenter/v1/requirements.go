package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Operators Karpenter v1 accepts in requirements beyond the core NodeSelectorOperators.
const (
	// NodeSelectorOpGte matches integer label values greater than or equal to the single value.
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	// NodeSelectorOpLte matches integer label values less than or equal to the single value.
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodeSelectorRequirementWithMinValues is a node selector requirement that can also ask
// for a minimum number of distinct values to remain available for the key, so that a
// launch keeps that much flexibility (for example at least 5 instance families).
//
// +kubebuilder:validation:XValidation:message="operator In needs at least one value: add values or use Exists",rule="self.operator == 'In' ? (has(self.values) && self.values.size() != 0) : true"
// +kubebuilder:validation:XValidation:message="operators Gt, Lt, Gte and Lte take exactly one non-negative integer in values",rule="(self.operator in ['Gt', 'Lt', 'Gte', 'Lte']) ? (has(self.values) && self.values.size() == 1 && int(self.values[0]) >= 0) : true"
// +kubebuilder:validation:XValidation:message="minValues is larger than the number of values: list at least minValues values or lower minValues",rule="(self.operator == 'In' && has(self.minValues)) ? (has(self.values) && self.values.size() >= self.minValues) : true"
// +kubebuilder:validation:XValidation:message="operators Exists and DoesNotExist take no values: remove values",rule="(self.operator in ['Exists', 'DoesNotExist']) ? (!has(self.values) || self.values.size() == 0) : true"
type NodeSelectorRequirementWithMinValues struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:XValidation:message="keys in the kubernetes.io domain are reserved for the kubelet: use a well-known key such as topology.kubernetes.io/zone or a key in your own domain",rule="self in ['beta.kubernetes.io/instance-type', 'failure-domain.beta.kubernetes.io/region', 'beta.kubernetes.io/os', 'beta.kubernetes.io/arch', 'failure-domain.beta.kubernetes.io/zone', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region', 'kubernetes.io/arch', 'kubernetes.io/os', 'node.kubernetes.io/windows-build', 'node.kubernetes.io/instance-type'] || self.find(\"^([^/]+)\").endsWith(\"node.kubernetes.io\") || self.find(\"^([^/]+)\").endsWith(\"node-restriction.kubernetes.io\") || !self.find(\"^([^/]+)\").endsWith(\"kubernetes.io\")"
	// +kubebuilder:validation:XValidation:message="keys in the k8s.io domain are reserved: use a key in your own domain",rule="self.find(\"^([^/]+)\").endsWith(\"kops.k8s.io\") || !self.find(\"^([^/]+)\").endsWith(\"k8s.io\")"
	// +kubebuilder:validation:XValidation:message="kubernetes.io/hostname is set by the kubelet and cannot be required or set",rule="self != 'kubernetes.io/hostname'"
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^(([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*)/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte.
	// +kubebuilder:validation:Enum:={"In","NotIn","Exists","DoesNotExist","Gt","Lt","Gte","Lte"}
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values are the label values. In and NotIn take one or more; Gt, Lt, Gte and Lte take
	// exactly one integer; Exists and DoesNotExist take none.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the minimum number of distinct values of this key that must remain
	// possible for the requirement to be satisfied.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}
