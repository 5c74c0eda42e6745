package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// decideCluster is a NodePool of three machine sizes (spot and on-demand) and nodes given as
// name, instance type, capacity type and the CPU requests of their pods. The largest is the
// cheapest per CPU, the middle one the dearest.
func decideCluster(nodes ...node) Cluster {
	types := []*cloudprovider.InstanceType{instanceType("big.2xlarge", 8, 1.0), instanceType("small.xlarge", 4, 0.2), instanceType("large.4xlarge", 16, 0.6)}
	for _, it := range types {
		it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeSpot, Price: it.Offerings[0].Price * 0.9, Available: true})
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	c := Cluster{NodePools: []packing.NodePool{{NodePool: np, InstanceTypes: types}}}
	for _, n := range nodes {
		var it *cloudprovider.InstanceType
		for _, candidate := range types {
			if candidate.Name == n.instanceType {
				it = candidate
			}
		}
		labels := map[string]string{corev1.LabelHostname: n.name, corev1.LabelInstanceTypeStable: it.Name, corev1.LabelTopologyZone: "us-east-1a",
			karpv1.CapacityTypeLabelKey: n.capacityType, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", karpv1.NodePoolLabelKey: "general"}
		node := packing.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: it.Allocatable()}}, Schedulable: true}
		price := offeringPrice(&c.NodePools[0], labels)
		cand := Candidate{Node: n.name, NodeClaim: n.name, NodePool: "general", Price: price, CapacityType: n.capacityType, Drifted: n.drifted, Planned: n.planned, MayRemoveEmpty: true, MayConsolidate: true}
		for i, cpu := range n.pods {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: n.name + "-" + string(rune('a'+i))}, Spec: corev1.PodSpec{NodeName: n.name,
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
			node.Pods = append(node.Pods, p)
			cand.Pods = append(cand.Pods, p)
		}
		c.Nodes = append(c.Nodes, node)
		if !n.keep {
			c.Candidates = append(c.Candidates, cand)
		}
	}
	return c
}

// node is a node of a test cluster: planned marks it left for later by a consolidation
// under way; keep makes it no candidate (say, do-not-disrupt), though it takes pods.
type node = struct {
	name, instanceType, capacityType string
	drifted, planned, keep           bool
	pods                             []string
}

// summary is what a decision does, in a comparable form: Targets are the nodes that take
// pods, Rest what the consolidation plan leaves for later.
type summary struct {
	Reason       karpv1.DisruptionReason
	Originals    []string
	Replacements []string
	Targets      []string
	Rest         []string
}

func summarize(d Decision, ok bool) *summary {
	if !ok {
		return nil
	}
	s := &summary{Reason: d.Reason, Originals: nodeNames(d.Originals)}
	for _, r := range d.Replacements {
		s.Replacements = append(s.Replacements, r.Cheapest.CapacityType+" "+r.Cheapest.InstanceType)
	}
	for _, p := range d.Placements {
		s.Targets = append(s.Targets, p.Node.Node.Name)
	}
	s.Rest = d.Rest
	return s
}

// oneCPUHungryPodEach is spot small nodes, each running a pod too large to share one.
func oneCPUHungryPodEach(names ...string) []node {
	var out []node
	for _, n := range names {
		out = append(out, node{name: n, instanceType: "small.xlarge", capacityType: "spot", pods: []string{"3"}})
	}
	return out
}

// tenAtATime is a budget of ten nodes for each NodePool and reason.
func tenAtATime(string, karpv1.DisruptionReason) int { return 10 }

// decideCase is a cluster, the budgets and options, and the decision Decide makes on them
// (nil: none).
type decideCase struct {
	name   string
	nodes  []node
	budget Budget
	opts   Options
	want   *summary
}

// testDecide runs Decide on each case, with DefaultOptions where the case sets none.
func testDecide(t *testing.T, tests []decideCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts.MaxMultiNode == 0 {
				opts = DefaultOptions
			}
			got := summarize(Decide(decideCluster(tt.nodes...), tt.budget, opts))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}
