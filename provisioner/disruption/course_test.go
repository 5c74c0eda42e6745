package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// oneAtATime is a budget of one node per decision.
func oneAtATime(string, karpv1.DisruptionReason) int { return 1 }

// withNodeClaims gives every node of the cluster a NodeClaim of its name, as launched
// replacements have.
func withNodeClaims(c Cluster) Cluster {
	for i, n := range c.Nodes {
		c.Nodes[i].NodeClaim = &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: n.Node.Name}}
	}
	return c
}

// TestAPlanIsCarriedOutAsPlanned: consolidation plans two on-demand nodes away, the larger
// pod onto the room a kept node has, the smaller onto a small spot node. The budget lets one
// node go at a time: the first part moves its pod onto the small node the plan bought for
// it, not onto the room the plan keeps for the second part (which would then need a large
// replacement). The second part moves its pod where the plan put it while that holds; when
// the room was taken meanwhile, the pod goes to other room if there is some, else the rest
// of the plan is planned anew.
func TestAPlanIsCarriedOutAsPlanned(t *testing.T) {
	kept := node{name: "kept", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true, pods: []string{"2"}}
	a := node{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"2"}}
	b := node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"5"}}
	// After the first part, a's pod runs on the replacement and b is left for later.
	moved := node{name: "replacement", instanceType: "small.xlarge", capacityType: "spot", keep: true, pods: []string{"2"}}
	planned := b
	planned.planned = true
	full := kept
	full.pods = []string{"2", "5"}
	spare := node{name: "spare", instanceType: "big.2xlarge", capacityType: "on-demand", keep: true}
	tests := []struct {
		name string
		// then is the cluster once the first part is done.
		then []node
		want *summary
		// follows says the second part follows the plan of the first.
		follows bool
	}{
		{
			name:    "the room is still there",
			then:    []node{kept, moved, planned},
			want:    &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"kept"}},
			follows: true,
		},
		{
			name:    "the room was taken, other room came",
			then:    []node{full, moved, spare, planned},
			want:    &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"spare"}},
			follows: true,
		},
		{
			name: "the room was taken: planned anew",
			then: []node{full, moved, planned},
			want: &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Replacements: []string{"spot large.4xlarge"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := DefaultOptions
			opts.PassTime = 0
			var p Planner
			first, ok := p.Decide(decideCluster(kept, a, b), oneAtATime, opts)
			want := &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a"}, Replacements: []string{"spot small.xlarge"}, Rest: []string{"b"}}
			if diff := cmp.Diff(want, summarize(first, ok)); diff != "" {
				t.Fatalf("first part (-want +got):\n%s", diff)
			}
			second, ok := p.Decide(decideCluster(tt.then...), oneAtATime, opts)
			if diff := cmp.Diff(tt.want, summarize(second, ok)); diff != "" {
				t.Errorf("second part (-want +got):\n%s", diff)
			}
			if follows := second.from != nil && second.from == first.from; follows != tt.follows {
				t.Errorf("the second part follows the plan of the first: %v, want %v", follows, tt.follows)
			}
		})
	}
}

// TestAPartOfAGroupLeavesTheRestToItsReplacement: two nodes whose pods the plan puts on one
// spot node; one node goes at a time. The first part launches that replacement, sized for
// both pods; the second moves its pod onto the replacement once launched, as the plan said.
func TestAPartOfAGroupLeavesTheRestToItsReplacement(t *testing.T) {
	a := node{name: "a", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1500m"}}
	b := node{name: "b", instanceType: "big.2xlarge", capacityType: "on-demand", pods: []string{"1500m"}}
	opts := DefaultOptions
	opts.PassTime = 0
	var p Planner
	first, ok := p.Decide(decideCluster(a, b), oneAtATime, opts)
	want := &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"a"}, Replacements: []string{"spot small.xlarge"}, Rest: []string{"b"}}
	if diff := cmp.Diff(want, summarize(first, ok)); diff != "" {
		t.Fatalf("first part (-want +got):\n%s", diff)
	}
	if got := len(first.Replacements[0].Pods); got != 2 {
		t.Fatalf("the replacement is planned for %d pods, want a's and b's", got)
	}
	p.Launched(first, []string{"replacement"})

	moved := node{name: "replacement", instanceType: "small.xlarge", capacityType: "spot", keep: true, pods: a.pods}
	b.planned = true
	second, ok := p.Decide(withNodeClaims(decideCluster(moved, b)), oneAtATime, opts)
	want = &summary{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []string{"b"}, Targets: []string{"replacement"}}
	if diff := cmp.Diff(want, summarize(second, ok)); diff != "" {
		t.Errorf("second part (-want +got):\n%s", diff)
	}
	if second.from == nil || second.from != first.from {
		t.Error("the second part did not follow the plan of the first")
	}
}
