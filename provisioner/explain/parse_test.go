package explain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseSchedulingMessage(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want SchedulingFailure
	}{
		{
			name: "filter counts, preemption and NodeProvisioning",
			msg: "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 2 Insufficient cpu. " +
				"preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod., NodeProvisioning: waiting for the provisioner to plan a node.",
			want: SchedulingFailure{
				TotalNodes: 3,
				Reasons: []NodeCount{
					{Nodes: 1, Reason: "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"},
					{Nodes: 2, Reason: "Insufficient cpu"},
				},
				PostFilter: "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod., NodeProvisioning: waiting for the provisioner to plan a node",
			},
		},
		{
			name: "the plugin's own filter reason for a pod planned elsewhere",
			msg:  "0/2 nodes are available: 2 pod is planned for NodeClaim general-x7k2p, not launched yet. NodeProvisioning: waiting for NodeClaim general-x7k2p to launch.",
			want: SchedulingFailure{
				TotalNodes: 2,
				Reasons:    []NodeCount{{Nodes: 2, Reason: "pod is planned for NodeClaim general-x7k2p, not launched yet"}},
				PostFilter: "NodeProvisioning: waiting for NodeClaim general-x7k2p to launch",
			},
		},
		{
			name: "a PreFilter rejection applies to every node",
			msg:  "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
			want: SchedulingFailure{
				TotalNodes: 4,
				PreFilter:  "pod has unbound immediate PersistentVolumeClaims",
				PostFilter: "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling",
			},
		},
		{
			name: "no post-filter message",
			msg:  "0/1 nodes are available: 1 Insufficient memory.",
			want: SchedulingFailure{TotalNodes: 1, Reasons: []NodeCount{{Nodes: 1, Reason: "Insufficient memory"}}},
		},
		{
			name: "another form is kept whole",
			msg:  "no nodes available to schedule pods",
			want: SchedulingFailure{PreFilter: "no nodes available to schedule pods"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseSchedulingMessage(tt.msg)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(SchedulingFailure{}, "Message")); diff != "" {
				t.Errorf("ParseSchedulingMessage (-want +got):\n%s", diff)
			}
			if got.Message != tt.msg {
				t.Errorf("Message = %q, want the input", got.Message)
			}
		})
	}
}

func TestParseProvisioningMessage(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want ProvisioningFailure
	}{
		{
			name: "per NodePool reasons and the existing nodes",
			msg: `cannot provision a node for this pod: NodePool "general": no instance type has room for the pod's requests (cpu=64, memory=1Gi, pods=1): closest is m.large; ` +
				`NodePool "broken": node class not ready: EC2NodeClass "missing" not found; existing nodes: 0/1 nodes are available: 1 node(s): Insufficient cpu (NodeResourcesFit)`,
			want: ProvisioningFailure{
				NodePools: []NodePoolReason{
					{NodePool: "general", Reason: "no instance type has room for the pod's requests (cpu=64, memory=1Gi, pods=1): closest is m.large"},
					{NodePool: "broken", Reason: `node class not ready: EC2NodeClass "missing" not found`},
				},
				ExistingNodes: "0/1 nodes are available: 1 node(s): Insufficient cpu (NodeResourcesFit)",
			},
		},
		{
			name: "a NodePool whose minValues the types that fit cannot meet names the key",
			msg: `cannot provision a node for this pod: NodePool "diverse": minValues 5 for karpenter.k8s.aws/instance-family: only 3 families can take these pods; ` +
				`NodePool "gpu": the pod does not tolerate taint nvidia.com/gpu=true:NoSchedule`,
			want: ProvisioningFailure{
				NodePools: []NodePoolReason{
					{NodePool: "diverse", Reason: "minValues 5 for karpenter.k8s.aws/instance-family: only 3 families can take these pods"},
					{NodePool: "gpu", Reason: "the pod does not tolerate taint nvidia.com/gpu=true:NoSchedule"},
				},
			},
		},
		{
			name: "no NodePool for the profile",
			msg:  "cannot provision a node for this pod: no NodePool is available to this pod's scheduler profile",
			want: ProvisioningFailure{Reason: "no NodePool is available to this pod's scheduler profile"},
		},
		{
			name: "another form is kept whole",
			msg:  "something else",
			want: ProvisioningFailure{Reason: "something else"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseProvisioningMessage(tt.msg)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(ProvisioningFailure{}, "Message")); diff != "" {
				t.Errorf("ParseProvisioningMessage (-want +got):\n%s", diff)
			}
		})
	}
}
