// Package nodeclaim holds what the NodeClaim controllers share: condition helpers and the
// cache indexes they look NodeClaims and Nodes up by.
package nodeclaim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// readyDependents are the conditions Ready sums up, as Karpenter v1's NodeClaim does.
var readyDependents = []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized}

// Reasons of the conditions SetCondition sets by itself, Karpenter's.
const (
	// ReasonAwaitingReconciliation: a condition Ready depends on that no controller set yet.
	ReasonAwaitingReconciliation = "AwaitingReconciliation"
	// ReasonReconcilingDependents: Ready is Unknown because a condition it sums up is.
	ReasonReconcilingDependents = "ReconcilingDependents"
	// ReasonUnhealthyDependents: Ready is False because a condition it sums up is.
	ReasonUnhealthyDependents = "UnhealthyDependents"
)

// IsTrue reports whether the NodeClaim's condition is True.
func IsTrue(nc *karpv1.NodeClaim, condition string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, condition)
}

// SetCondition sets a condition of the NodeClaim, keeping its transition time when the
// status does not change. Setting Launched, Registered or Initialized also sets those of
// the three not set yet (Unknown, AwaitingReconciliation) and Ready from them.
func SetCondition(nc *karpv1.NodeClaim, condition string, status metav1.ConditionStatus, reason, message string) {
	set(nc, condition, status, reason, message)
	if !slices.Contains(readyDependents, condition) {
		return
	}
	for _, t := range readyDependents {
		if meta.FindStatusCondition(nc.Status.Conditions, t) == nil {
			set(nc, t, metav1.ConditionUnknown, ReasonAwaitingReconciliation, "object is awaiting reconciliation")
		}
	}
	setReady(nc)
}

func set(nc *karpv1.NodeClaim, condition string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: condition, Status: status, Reason: reason, Message: message, ObservedGeneration: nc.Generation,
	})
}

// setReady sets Ready from its dependents: True when all are True, False when one is
// False, Unknown otherwise, with a message that lists the dependents not True, the most
// recently changed first.
func setReady(nc *karpv1.NodeClaim) {
	var pending []metav1.Condition
	for _, t := range readyDependents {
		if c := meta.FindStatusCondition(nc.Status.Conditions, t); c.Status != metav1.ConditionTrue {
			pending = append(pending, *c)
		}
	}
	if len(pending) == 0 {
		set(nc, karpv1.ConditionTypeReady, metav1.ConditionTrue, karpv1.ConditionTypeReady, "")
		return
	}
	// By the second, as the API stores them: conditions set together keep their order.
	slices.SortStableFunc(pending, func(a, b metav1.Condition) int {
		return b.LastTransitionTime.Truncate(time.Second).Compare(a.LastTransitionTime.Truncate(time.Second))
	})
	status, reason := metav1.ConditionUnknown, ReasonReconcilingDependents
	names := make([]string, 0, len(pending))
	for _, c := range pending {
		if c.Status == metav1.ConditionFalse {
			status, reason = metav1.ConditionFalse, ReasonUnhealthyDependents
		}
		names = append(names, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	set(nc, karpv1.ConditionTypeReady, status, reason, strings.Join(names, ", "))
}
