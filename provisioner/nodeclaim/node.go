package nodeclaim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// NodeOf returns the NodeClaim's Node, or nil while it has none: not named yet, not
// registered, or a Node of that name from another instance.
func NodeOf(ctx context.Context, kube client.Reader, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	if nc.Status.NodeName == "" {
		return nil, nil
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if node.Spec.ProviderID != nc.Status.ProviderID {
		return nil, nil
	}
	return node, nil
}

// LiveNodeOf is NodeOf through the cache and, when the cache has no such node, through api,
// which reads the API server itself. A cache can lag the API server by tens of seconds after
// an outage (its watch comes back with backoff): a decision that ends an instance must not
// take a node the cache does not show yet for one that never joined.
func LiveNodeOf(ctx context.Context, cache, api client.Reader, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	node, err := NodeOf(ctx, cache, nc)
	if node != nil || err != nil || nc.Status.NodeName == "" {
		return node, err
	}
	return NodeOf(ctx, api, nc)
}

// Cordoned reports whether Cordon marked the node: it is being disrupted or terminated.
func Cordoned(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}

// OwnedByDaemonSet reports whether a DaemonSet controls the pod: it belongs to its node and
// goes with it.
func OwnedByDaemonSet(p *corev1.Pod) bool {
	c := metav1.GetControllerOf(p)
	return c != nil && c.Kind == "DaemonSet"
}

// Cordon taints the node karpenter.sh/disrupted:NoSchedule, so nothing new lands on it while
// it is taken away. It does nothing when the node has the taint already.
func Cordon(ctx context.Context, kube client.Client, node *corev1.Node) error {
	return SetTaint(ctx, kube, node, karpv1.DisruptedNoScheduleTaint, true)
}

// SetTaint adds the taint to the node (present) or removes it, patching the node only when
// that changes something.
func SetTaint(ctx context.Context, kube client.Client, node *corev1.Node, taint corev1.Taint, present bool) error {
	patch := client.MergeFrom(node.DeepCopy())
	if !WithTaint(node, taint, present) {
		return nil
	}
	if err := kube.Patch(ctx, node, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("setting taint %s:%s of node %s: %w", taint.Key, taint.Effect, node.Name, err)
	}
	return nil
}

// WithTaint adds the taint to the node object (present) or removes it, and reports whether
// that changed it.
func WithTaint(node *corev1.Node, taint corev1.Taint, present bool) bool {
	var taints []corev1.Taint
	has := false
	for _, t := range node.Spec.Taints {
		if t.MatchTaint(&taint) {
			has = true
			if !present {
				continue
			}
		}
		taints = append(taints, t)
	}
	if has == present {
		return false
	}
	if present {
		taints = append(taints, taint)
	}
	node.Spec.Taints = taints
	return true
}
