package disruption

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// TestCordonsOfDecisionsNoLongerUnderWayAreLifted: a node a disruption cordoned for a
// decision that is not under way takes pods again; a node cordoned by anything else, whose
// interruption is announced or whose NodeClaim is going stays cordoned, also when the cache
// has not caught up with the API server; and a cordon the cache does not show yet is lifted
// once it does.
func TestCordonsOfDecisionsNoLongerUnderWayAreLifted(t *testing.T) {
	f := newFixture(t, "abandoned")
	names := []string{"left", "interrupted", "others", "going", "late"}
	for _, name := range names {
		f.node(name, "small.xlarge", "1")
		if name != "others" {
			if err := f.ctrl.cordon(f.ctx, f.prefix+"-"+name); err != nil {
				t.Fatal(err)
			}
		}
	}
	other := &corev1.Node{}
	if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-others"}, other); err != nil {
		t.Fatal(err)
	}
	if err := nodeclaim.Cordon(f.ctx, kube, other); err != nil {
		t.Fatal(err)
	}
	f.patchNodeClaim("interrupted", false, func(nc *karpv1.NodeClaim) {
		nc.Annotations = map[string]string{termination.InterruptionDeadlineAnnotationKey: "2026-11-27T12:00:00Z"}
	})
	f.patchNodeClaim("going", false, func(nc *karpv1.NodeClaim) { nc.Finalizers = []string{"test.tailor.sh/hold"} })
	if err := kube.Delete(f.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: f.prefix + "-going"}}); err != nil {
		t.Fatal(err)
	}
	// lagging is the cluster as a cache that has not caught up shows it: no cordon on "late"
	// yet, and "going" not being deleted yet.
	lagging := func() []packing.Node {
		in, err := f.ClusterInput(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range in.Nodes {
			switch n.Node.Name {
			case f.prefix + "-late":
				in.Nodes[i].Node = n.Node.DeepCopy()
				delete(in.Nodes[i].Node.Annotations, CordonedAnnotationKey)
				in.Nodes[i].Node.Spec.Taints = nil
			case f.prefix + "-going":
				in.Nodes[i].NodeClaim = n.NodeClaim.DeepCopy()
				in.Nodes[i].NodeClaim.DeletionTimestamp = nil
			}
		}
		return in.Nodes
	}
	if err := f.ctrl.releaseAbandoned(f.ctx, lagging()); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"left": false, "interrupted": true, "others": true, "going": true, "late": true}
	if diff := cmp.Diff(want, f.tainted(karpv1.DisruptedNoScheduleTaint, names...)); diff != "" {
		t.Errorf("cordoned, after a sweep over a lagging cache (-want +got):\n%s", diff)
	}
	in, err := f.ClusterInput(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ctrl.releaseAbandoned(f.ctx, in.Nodes); err != nil {
		t.Fatal(err)
	}
	want["late"] = false
	if diff := cmp.Diff(want, f.tainted(karpv1.DisruptedNoScheduleTaint, names...)); diff != "" {
		t.Errorf("cordoned, once the cache caught up (-want +got):\n%s", diff)
	}
}

// TestASuccessorReplacesTheDriftedNodeItsPredecessorLeftCordoned replays the randomized
// fault trials' seed 5091: a leader cordons a drifted node and launches its replacement, then
// stops; its successor lifts the cordon and replaces the node itself.
func TestASuccessorReplacesTheDriftedNodeItsPredecessorLeftCordoned(t *testing.T) {
	f := newFixture(t, "succession")
	f.node("drifted", "small.xlarge", "1")
	f.patchNodeClaim("drifted", true, func(nc *karpv1.NodeClaim) {
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeDrifted, metav1.ConditionTrue, "AMIDrifted", "")
	})
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "cordoned"}, f.state("drifted")); diff != "" || f.launched != 1 {
		t.Fatalf("the predecessor's decision launched %d replacements, want 1; (-want +got):\n%s", f.launched, diff)
	}
	f.ctrl = NewController(kube, kube, f, f, f, record.NewFakeRecorder(100), f.clock, f.ctrl.opts)
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "kept"}, f.state("drifted")); diff != "" || f.launched != 1 {
		t.Fatalf("the successor's first pass launched %d replacements in all, want 1; (-want +got):\n%s", f.launched, diff)
	}
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "cordoned"}, f.state("drifted")); diff != "" || f.launched != 2 {
		t.Fatalf("the successor's drift decision launched %d replacements in all, want 2; (-want +got):\n%s", f.launched, diff)
	}
	f.initializeReplacement(2)
	f.pass()
	if diff := cmp.Diff(map[string]string{"drifted": "deleted"}, f.state("drifted")); diff != "" {
		t.Errorf("once the successor's replacement is up (-want +got):\n%s", diff)
	}
}

func TestNodesThePlanTakesLaterArePreferredAgainst(t *testing.T) {
	f := newFixture(t, "planned")
	f.setBudget("1")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1500m")
	f.node("c", "big.2xlarge", "5")
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "kept", "c": "kept"}, f.state("a", "b", "c")); diff != "" {
		t.Errorf("a plan of a and b with a budget of one node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"a": false, "b": true, "c": false}, f.tainted(PlannedTaint, "a", "b", "c")); diff != "" {
		t.Errorf("PlannedTaint while a goes and the plan takes b later (-want +got):\n%s", diff)
	}
	f.setBudget("0")
	f.pass()
	if diff := cmp.Diff(map[string]bool{"b": false, "c": false}, f.tainted(PlannedTaint, "b", "c")); diff != "" {
		t.Errorf("PlannedTaint once nothing may be disrupted (-want +got):\n%s", diff)
	}
}

func (f *fixture) setBudget(nodes string) {
	f.t.Helper()
	f.pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: nodes}}
	if err := kube.Update(f.ctx, f.pool); err != nil {
		f.t.Fatal(err)
	}
}

// tainted says, per node of the fixture, whether it carries the taint.
func (f *fixture) tainted(taint corev1.Taint, names ...string) map[string]bool {
	f.t.Helper()
	out := map[string]bool{}
	for _, name := range names {
		node := &corev1.Node{}
		if err := kube.Get(f.ctx, client.ObjectKey{Name: f.prefix + "-" + name}, node); err != nil {
			f.t.Fatal(err)
		}
		out[name] = slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
	}
	return out
}
