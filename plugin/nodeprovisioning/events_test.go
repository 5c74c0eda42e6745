package nodeprovisioning

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func nodeClaim(name, nodeName string) *unstructured.Unstructured {
	nc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": map[string]any{"name": name}}}
	if nodeName != "" {
		nc.Object["status"] = map[string]any{"nodeName": nodeName}
	}
	return nc
}

func TestQueueingHints(t *testing.T) {
	pod := st.MakePod().Namespace("default").Name("web-0").UID("uid-0").Obj()
	launched := map[types.UID]Nomination{"uid-0": {NodeClaim: "general-abcde", NodeName: "ip-10-0-0-1"}}
	notLaunched := map[types.UID]Nomination{"uid-0": {NodeClaim: "general-abcde"}}
	onNode := func(node string) *v1.Pod { return st.MakePod().Name("other").Node(node).Obj() }
	tests := []struct {
		name        string
		nominations map[types.UID]Nomination
		hint        func(pl *NodeProvisioning) fwk.QueueingHintFn
		old, new    any
		want        fwk.QueueingHint
	}{
		{"the planned NodeClaim launched", notLaunched, nodeClaimHint, nodeClaim("general-abcde", ""), nodeClaim("general-abcde", "ip-10-0-0-1"), fwk.Queue},
		{"the planned NodeClaim changed, not launched yet", notLaunched, nodeClaimHint, nodeClaim("general-abcde", ""), nodeClaim("general-abcde", ""), fwk.QueueSkip},
		{"the planned NodeClaim was deleted", launched, nodeClaimHint, nodeClaim("general-abcde", "ip-10-0-0-1"), nil, fwk.Queue},
		{"another NodeClaim launched", notLaunched, nodeClaimHint, nodeClaim("general-fghij", ""), nodeClaim("general-fghij", "ip-10-0-0-2"), fwk.QueueSkip},
		{"another NodeClaim was deleted", notLaunched, nodeClaimHint, nodeClaim("general-fghij", ""), nil, fwk.QueueSkip},
		{"a NodeClaim was deleted, the pod has no plan", nil, nodeClaimHint, nodeClaim("general-fghij", "ip-10-0-0-2"), nil, fwk.Queue},
		{"a NodeClaim was created, the pod has no plan", nil, nodeClaimHint, nil, nodeClaim("general-fghij", ""), fwk.QueueSkip},
		{"the planned node registered", launched, nodeHint, nil, st.MakeNode().Name("ip-10-0-0-1").Obj(), fwk.Queue},
		{"another node registered", launched, nodeHint, nil, st.MakeNode().Name("ip-10-0-0-2").Obj(), fwk.QueueSkip},
		{"a node changed, the pod has no plan", nil, nodeHint, st.MakeNode().Name("ip-10-0-0-2").Obj(), st.MakeNode().Name("ip-10-0-0-2").Obj(), fwk.Queue},
		{"a pod bound to the planned node", launched, podHint, nil, onNode("ip-10-0-0-1"), fwk.Queue},
		{"a pod bound to another node", launched, podHint, nil, onNode("ip-10-0-0-2"), fwk.QueueSkip},
		{"a pod bound, the pod's NodeClaim not launched", notLaunched, podHint, nil, onNode("ip-10-0-0-1"), fwk.QueueSkip},
		{"a pod left a node, the pod has no plan", nil, podHint, onNode("ip-10-0-0-2"), nil, fwk.Queue},
		{"a pending pod went away", nil, podHint, st.MakePod().Name("other").Obj(), nil, fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			pl := &NodeProvisioning{provisioner: &fakeProvisioner{nominations: tt.nominations}}
			got, err := tt.hint(pl)(logger, pod, tt.old, tt.new)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func nodeClaimHint(pl *NodeProvisioning) fwk.QueueingHintFn {
	return pl.isSchedulableAfterNodeClaimChange
}
func nodeHint(pl *NodeProvisioning) fwk.QueueingHintFn { return pl.isSchedulableAfterNodeChange }
func podHint(pl *NodeProvisioning) fwk.QueueingHintFn  { return pl.isSchedulableAfterPodChange }

func TestEventsToRegisterWatchNodeClaims(t *testing.T) {
	events, err := (&NodeProvisioning{}).EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []fwk.ClusterEvent
	for _, e := range events {
		if e.QueueingHintFn == nil {
			t.Errorf("event %v has no queueing hint", e.Event)
		}
		got = append(got, e.Event)
	}
	want := []fwk.ClusterEvent{
		{Resource: "nodeclaims.v1.karpenter.sh", ActionType: fwk.Add | fwk.Update | fwk.Delete},
		{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAnnotation},
		{Resource: fwk.Pod, ActionType: fwk.Add | fwk.Delete},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
