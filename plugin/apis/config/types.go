package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeProvisioningArgs configure the NodeProvisioning plugin of one scheduler profile.
type NodeProvisioningArgs struct {
	metav1.TypeMeta

	// ProvisionerSocket is the unix socket of the provisioner sidecar's gRPC API.
	ProvisionerSocket string
	// RequestTimeout bounds each call to the provisioner.
	RequestTimeout metav1.Duration
	// NodePools lists the NodePools pods of this profile may be provisioned from; empty
	// allows every NodePool.
	NodePools []string
	// NodePoolSelector selects, by label, the NodePools pods of this profile may be
	// provisioned from; nil allows every NodePool.
	NodePoolSelector *metav1.LabelSelector
}
