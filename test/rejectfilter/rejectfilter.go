// Package rejectfilter is a scheduler filter plugin the planner knows nothing of: it
// rejects pods that carry its label on every node Tailor launched. It stands for whatever a
// real cluster's scheduler may reject a pod for that Tailor does not model (another
// plugin, an extender, a device that is never published), so the end-to-end tests and the
// fault trials can check that Tailor stops buying capacity for such a pod.
package rejectfilter

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "RejectLaunchedNodes"

// Label marks the pods the plugin rejects on launched nodes (value "true").
const Label = "test.tailor.sh/reject-launched-nodes"

// Reason is the plugin's message.
const Reason = "pods labelled " + Label + " run on no node Tailor launched"

// nodePoolLabel marks the nodes Tailor launched.
const nodePoolLabel = "karpenter.sh/nodepool"

// RejectLaunchedNodes rejects labelled pods on launched nodes.
type RejectLaunchedNodes struct{}

var _ fwk.FilterPlugin = &RejectLaunchedNodes{}

// New returns the plugin; it takes no args.
func New(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return &RejectLaunchedNodes{}, nil
}

// Name returns the plugin's name.
func (*RejectLaunchedNodes) Name() string { return Name }

// Filter rejects a labelled pod on a node of a NodePool.
func (*RejectLaunchedNodes) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if pod.Labels[Label] != "true" {
		return nil
	}
	if _, launched := nodeInfo.Node().Labels[nodePoolLabel]; !launched {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, Reason)
}
