package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// StaticAnnotationKey marks a NodeClaim launched to keep a static NodePool at its replicas.
const StaticAnnotationKey = "tailor.sh/static"

// ErrNoStaticOffering is LaunchStatic's error when no offering of the NodePool can be
// planned (requirements, limits or minValues leave none).
var ErrNoStaticOffering = errors.New("no offering can be planned for a node of the static NodePool")

// staticReplicaLabel labels the stand-in pods a static NodePool's nodes are planned for.
const staticReplicaLabel = "tailor.sh/static-replica"

// LaunchStatic creates n NodeClaims of the static NodePool np, each for the cheapest
// offering its requirements allow that also holds the DaemonSets that will run on it. The
// planner places one empty stand-in pod per node, pinned to the NodePool and tolerating its
// taints, so the NodeClaims get instance types, zones and minValues as any other.
func (p *Provisioner) LaunchStatic(ctx context.Context, np *karpv1.NodePool, n int) ([]*karpv1.NodeClaim, error) {
	if n <= 0 {
		return nil, nil
	}
	its, err := p.instanceTypes.InstanceTypes(ctx, np)
	if err != nil {
		return nil, fmt.Errorf("listing instance types of NodePool %s: %w", np.Name, err)
	}
	daemonSets, err := p.daemonSets(ctx)
	if err != nil {
		return nil, err
	}
	in := packing.Input{
		Pods:            standIns(np, n),
		NodePools:       []packing.NodePool{{NodePool: np, InstanceTypes: its}},
		DaemonSets:      daemonSets,
		MinValuesPolicy: p.minValuesPolicy,
	}
	plan := packing.Solve(in)
	if len(plan.Unschedulable) > 0 {
		reasons := make([]string, 0, len(plan.Unschedulable))
		for _, u := range plan.Unschedulable {
			reasons = append(reasons, u.Reason)
		}
		return nil, fmt.Errorf("NodePool %s: %w: %s", np.Name, ErrNoStaticOffering, strings.Join(dedupe(reasons), "; "))
	}
	var created []*karpv1.NodeClaim
	for i := range plan.NewNodeClaims {
		planned := plan.NewNodeClaims[i]
		planned.Pods = nil
		nc, err := p.createNodeClaim(ctx, &planned, map[string]string{StaticAnnotationKey: "true"}, metrics.ReasonProvisioned)
		if err != nil {
			return created, err
		}
		created = append(created, nc)
	}
	return created, nil
}

// standIns are n empty pods, one per node of the NodePool: pinned to it, tolerating every
// taint, and keeping apart by host name.
func standIns(np *karpv1.NodePool, n int) []*corev1.Pod {
	labels := map[string]string{staticReplicaLabel: np.Name}
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		name := fmt.Sprintf("%s-replica-%d", np.Name, i)
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, UID: types.UID("static/" + name), Labels: labels},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{karpv1.NodePoolLabelKey: np.Name},
				Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
				}},
			},
		}
	}
	return pods
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
