package provisioning

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// ClusterInput is the planner's view of the whole cluster, for taking capacity away: every
// NodePool with its instance types and remaining limits, every node and in-flight NodeClaim
// with its pods, the DaemonSets, and the volumes of the pods on nodes. Unlike a provisioning
// batch, registered nodes may take pods: those not cordoned and not going away. Pods are the
// pods bound to no node yet, sorted by namespace and name: what is on its way to a node.
// The objects are the cache's own: the caller must not change them (see input).
func (p *Provisioner) ClusterInput(ctx context.Context) (packing.Input, error) {
	unbound, err := p.unboundPods(ctx)
	if err != nil {
		return packing.Input{}, err
	}
	in, _, err := p.input(ctx, NodePoolSelector{}, nil, unbound, inputOptions{static: true})
	if err != nil {
		return packing.Input{}, err
	}
	var pods []*corev1.Pod
	for i := range in.Nodes {
		n := &in.Nodes[i]
		pods = append(pods, n.Pods...)
		if !n.Schedulable {
			n.Schedulable = takesPods(n)
		}
	}
	if in.Volumes, err = p.volumes(ctx, pods); err != nil {
		return packing.Input{}, err
	}
	for _, pod := range unbound {
		if pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			in.Pods = append(in.Pods, pod)
		}
	}
	slices.SortFunc(in.Pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return in, nil
}

// takesPods reports whether a registered node can take more pods: not cordoned, not
// tainted for disruption and not being deleted.
func takesPods(n *packing.Node) bool {
	if n.Node.Spec.Unschedulable || n.Node.DeletionTimestamp != nil {
		return false
	}
	if n.NodeClaim != nil && n.NodeClaim.DeletionTimestamp != nil {
		return false
	}
	return !nodeclaim.Cordoned(n.Node)
}

// Launch creates a NodeClaim for capacity that replaces nodes being taken away for reason.
// Its pods are not recorded as planned: the pods of the nodes replaced are new pods by the
// time they need a node, and find it through the scheduler.
func (p *Provisioner) Launch(ctx context.Context, planned packing.NewNodeClaim, reason karpv1.DisruptionReason) (*karpv1.NodeClaim, error) {
	planned.Pods = nil
	nc, err := p.createNodeClaim(ctx, &planned, map[string]string{ReplacementAnnotationKey: "true"}, string(reason))
	if err != nil {
		return nil, fmt.Errorf("launching a replacement: %w", err)
	}
	return nc, nil
}
