package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeProvisioningArgs configure the NodeProvisioning plugin of one scheduler profile.
type NodeProvisioningArgs struct {
	metav1.TypeMeta `json:",inline"`

	// ProvisionerSocket is the unix socket of the provisioner sidecar's gRPC API
	// (default /var/run/tailor/provisioner.sock).
	ProvisionerSocket *string `json:"provisionerSocket,omitempty"`
	// RequestTimeout bounds each call to the provisioner (default 5s).
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`
	// NodePools lists the NodePools pods of this profile may be provisioned from; empty
	// allows every NodePool.
	NodePools []string `json:"nodePools,omitempty"`
	// NodePoolSelector selects, by label, the NodePools pods of this profile may be
	// provisioned from; unset allows every NodePool.
	NodePoolSelector *metav1.LabelSelector `json:"nodePoolSelector,omitempty"`
}
