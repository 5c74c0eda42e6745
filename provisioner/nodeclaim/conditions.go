// Package nodeclaim holds what the NodeClaim controllers share: condition helpers and the
// cache indexes they look NodeClaims and Nodes up by.
package nodeclaim

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

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
