package disruption

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// ReasonInterrupted is the reason of capacity launched ahead of an interruption's drain.
const ReasonInterrupted karpv1.DisruptionReason = "Interrupted"

// Prelaunch launches capacity for the pods of a NodeClaim's node that is going away
// involuntarily (an interruption): the planner puts them on the other nodes and on new
// NodeClaims, which are launched at once, so the pods find room while the node drains.
func (c *Controller) Prelaunch(ctx context.Context, nodeClaim string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, err := c.cluster.ClusterInput(ctx)
	if err != nil {
		return err
	}
	var gone *Candidate
	for _, n := range in.Nodes {
		if n.NodeClaim == nil || n.NodeClaim.Name != nodeClaim {
			continue
		}
		cand := Candidate{Node: n.Node.Name, NodeClaim: nodeClaim, NodePool: n.NodeClaim.Labels[karpv1.NodePoolLabelKey]}
		for _, p := range n.Pods {
			if movable(p) {
				cand.Pods = append(cand.Pods, p)
			}
		}
		gone = &cand
	}
	if gone == nil || len(gone.Pods) == 0 {
		return nil
	}
	plan, _ := simulate(clusterOf(in), []Candidate{*gone}, nil)
	for _, r := range plan.NewNodeClaims {
		nc, err := c.launcher.Launch(ctx, r, ReasonInterrupted)
		if err != nil {
			return err
		}
		log.FromContext(ctx).Info("launched capacity ahead of an interruption", "nodeClaim", nodeClaim, "replacement", nc.Name,
			"instanceType", r.Cheapest.InstanceType, "pods", len(r.Pods))
	}
	decisionsTotal.WithLabelValues(string(ReasonInterrupted), "prelaunch").Inc()
	return nil
}
