// Package nodeclaim holds what the NodeClaim controllers share: condition helpers and the
// cache indexes they look NodeClaims and Nodes up by.
package nodeclaim

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// Cache index names.
const (
	// NodeProviderIDIndex indexes Nodes by spec.providerID.
	NodeProviderIDIndex = "spec.providerID"
	// NodeClaimProviderIDIndex indexes NodeClaims by status.providerID.
	NodeClaimProviderIDIndex = "status.providerID"
	// PodNodeNameIndex indexes pods by spec.nodeName: bound pods under their node's name,
	// unbound pods under "". It answers like the API server's spec.nodeName field selector,
	// so a client reads the same through the cache or straight from the server.
	PodNodeNameIndex = "spec.nodeName"
)

// PodNodeName is the index function of PodNodeNameIndex.
func PodNodeName(o client.Object) []string {
	return []string{o.(*corev1.Pod).Spec.NodeName}
}

// NodeProviderID is the index function of NodeProviderIDIndex.
func NodeProviderID(o client.Object) []string {
	if id := o.(*corev1.Node).Spec.ProviderID; id != "" {
		return []string{id}
	}
	return nil
}

// NodeClaimProviderID is the index function of NodeClaimProviderIDIndex.
func NodeClaimProviderID(o client.Object) []string {
	if id := o.(*karpv1.NodeClaim).Status.ProviderID; id != "" {
		return []string{id}
	}
	return nil
}

// IsTrue reports whether the NodeClaim's condition is True.
func IsTrue(nc *karpv1.NodeClaim, condition string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, condition)
}

// SetCondition sets a condition of the NodeClaim, keeping its transition time when the
// status does not change.
func SetCondition(nc *karpv1.NodeClaim, condition string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: condition, Status: status, Reason: reason, Message: message, ObservedGeneration: nc.Generation,
	})
}
