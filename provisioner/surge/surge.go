// Package surge replaces a pod before it is evicted. A pod opted in (AnnotationKey) whose
// eviction would leave its Deployment without a Ready replica, or that its
// PodDisruptionBudget lets no one evict now, is not evicted when consolidation or drift
// takes its node: a copy of it, made from its ReplicaSet's template, starts first where the
// plan reserved room for it, and the old pod goes only once the copy is Ready.
//
// The copy is a surge the Deployment controller never sees. Until it is Ready it is owned by
// the NodeClaim whose node the old pod leaves, so its ReplicaSet does not adopt it (a
// ReplicaSet adopts only pods no controller owns) and does not count it; and it carries
// ReplacesLabelKey, the old pod's UID. Once it is Ready, Release gives the old pod the
// lowest deletion cost and drops the copy's owner and marks: the ReplicaSet adopts the copy,
// finds one pod more than it wants, and deletes the one with the lowest deletion cost, the
// old pod. The Deployment's spec is never written, so neither an HorizontalPodAutoscaler
// nor a GitOps tool sees a change, and the Deployment's maxSurge bounds the surge: with
// maxSurge 0 there is none.
//
// A copy that is not Ready by its deadline (DeadlineAnnotationKey: the Deployment's
// progressDeadlineSeconds, or the provisioner's flag) is deleted, and the decision that
// started it abandoned. A copy whose decision was lost with a leader is deleted by the next
// leader (Orphans): nothing is left behind.
package surge

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

const (
	// AnnotationKey opts a pod in with "true" (on the pod or its template). On a NodePool,
	// "true" makes it the default for the pods on the NodePool's nodes, and a pod opts out
	// with "false".
	AnnotationKey = "tailor.sh/replace-before-evict"
	// ReplacesLabelKey on a copy is the UID of the pod it replaces. Release removes it.
	ReplacesLabelKey = "tailor.sh/replaces"
	// ReplacesAnnotationKey on a copy is the name of the pod it replaces, in its namespace.
	ReplacesAnnotationKey = "tailor.sh/replaces-pod"
	// DeadlineAnnotationKey on a copy is when it must be Ready (RFC 3339); a copy not Ready
	// by then is deleted and its decision abandoned.
	DeadlineAnnotationKey = "tailor.sh/replacement-deadline"
)

// OptedIn reports whether a pod is to be replaced before it is evicted: it says so, or its
// NodePool does and the pod does not say otherwise. pool may be nil.
func OptedIn(pod *corev1.Pod, pool *karpv1.NodePool) bool {
	if v, ok := pod.Annotations[AnnotationKey]; ok {
		on, err := strconv.ParseBool(v)
		return err == nil && on
	}
	if pool == nil {
		return false
	}
	on, err := strconv.ParseBool(pool.Annotations[AnnotationKey])
	return err == nil && on
}
