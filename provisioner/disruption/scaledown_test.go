package disruption

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
	simulation "github.com/tailor-autoscaler/tailor/provisioner/simulate"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// simCluster is a cluster in memory: nodes launched from plans, with their pods and prices.
type simCluster struct {
	in     packing.Input
	nodes  map[string]*simNode
	serial int
	// rest are the nodes the consolidation plan under way takes away later, as the
	// controller remembers them.
	rest map[string]bool
}

type simNode struct {
	node     packing.Node
	pool     string
	price    float64
	capacity string
	// holdsMoved is set once the node takes pods a decision moved (or is launched for
	// them): the controller's moved-pods hold keeps consolidation off it.
	holdsMoved bool
}

// launch adds the nodes of new NodeClaims, with their pods bound, and returns their names
// (each node's NodeClaim has its name); moved says the pods were moved there by a decision.
func (s *simCluster) launch(t testing.TB, ncs []packing.NewNodeClaim, moved bool) []string {
	t.Helper()
	var names []string
	for _, nc := range ncs {
		s.serial++
		name := fmt.Sprintf("node-%05d", s.serial)
		o := nc.Cheapest
		sn := s.add(t, name, nc.NodePool.Name, o.InstanceType, o.Zone, o.CapacityType, requirements.SingleValueLabels(nc.Requirements))
		sn.holdsMoved = moved
		s.bind(sn, nc.Pods)
		names = append(names, name)
	}
	return names
}

// add adds an empty node of a NodePool's instance type, offered in a zone and capacity
// type, with the type's labels and the given ones.
func (s *simCluster) add(t testing.TB, name, pool, instanceType, zone, capacityType string, labels map[string]string) *simNode {
	t.Helper()
	var np *packing.NodePool
	var it *cloudprovider.InstanceType
	for i := range s.in.NodePools {
		if s.in.NodePools[i].NodePool.Name != pool {
			continue
		}
		np = &s.in.NodePools[i]
		for _, candidate := range np.InstanceTypes {
			if candidate.Name == instanceType {
				it = candidate
			}
		}
	}
	if it == nil {
		t.Fatalf("instance type %s of NodePool %s not found", instanceType, pool)
	}
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, it.Labels)
	labels[corev1.LabelTopologyZone] = zone
	labels[karpv1.CapacityTypeLabelKey] = capacityType
	labels[karpv1.NodePoolLabelKey] = pool
	labels[corev1.LabelHostname] = name
	// Priced as the controller prices a candidate.
	price := offeringPrice(np, labels)
	if price == 0 {
		t.Fatalf("%s is not offered %s in %s", instanceType, capacityType, zone)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: np.NodePool.Spec.Template.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: it.Allocatable()},
	}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	sn := &simNode{node: packing.Node{Node: node, NodeClaim: claim, Schedulable: true}, pool: pool, price: price, capacity: capacityType}
	// Every DaemonSet runs a pod on every node, as the EKS add-ons' do.
	for _, ds := range s.in.DaemonSets {
		sn.node.Pods = append(sn.node.Pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ds.Namespace, Name: ds.Name + "-" + name, Labels: ds.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}},
			},
			Spec: *ds.Spec.Template.Spec.DeepCopy(),
		})
		sn.node.Pods[len(sn.node.Pods)-1].Spec.NodeName = name
	}
	s.nodes[name] = sn
	return sn
}

// movable are the node's pods but its DaemonSets', which go with it.
func (n *simNode) movable() []*corev1.Pod {
	return slices.DeleteFunc(slices.Clone(n.node.Pods), nodeclaim.OwnedByDaemonSet)
}

func (s *simCluster) bind(n *simNode, pods []*corev1.Pod) {
	for _, p := range pods {
		bound := p.DeepCopy()
		bound.Spec.NodeName = n.node.Node.Name
		n.node.Pods = append(n.node.Pods, bound)
	}
}

func (s *simCluster) cost() float64 {
	total := 0.0
	for _, n := range s.nodes {
		total += n.price
	}
	return total
}

// view is the cluster as Decide sees it through the controller: every node a candidate,
// consolidatable unless it holds moved pods.
func (s *simCluster) view() Cluster {
	c := Cluster{NodePools: s.in.NodePools, DaemonSets: s.in.DaemonSets}
	names := make([]string, 0, len(s.nodes))
	for name := range s.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := s.nodes[name]
		c.Nodes = append(c.Nodes, n.node)
		c.Candidates = append(c.Candidates, Candidate{
			Node: name, NodeClaim: name, NodePool: n.pool, Price: n.price, CapacityType: n.capacity,
			Pods: n.movable(), MayRemoveEmpty: true, MayConsolidate: !n.holdsMoved, Planned: s.rest[name],
		})
	}
	return c
}

// scaleDownCase is a scale-down measured in memory.
type scaleDownCase struct {
	shape string
	from  int
	// batch is how many pods are planned at a time; all at once when 0.
	batch int
	// keep says which pods, by their index in the workload, the scale-down keeps.
	keep func(i int) bool
	// likeReplicaSets keeps as many pods of each Deployment (its identical pods) as keep,
	// but picks them as a ReplicaSet scaling down does.
	likeReplicaSets bool
	// byDeployment provisions the pods grouped by Deployment, in the order each first
	// appears in the workload, as the pods of Deployments created one after another arrive
	// on a live cluster.
	byDeployment bool
	// daemonSets run a pod on every node.
	daemonSets []*appsv1.DaemonSet
}

// scaledDown plans the case's workload, c.batch pods at a time, as the provisioner plans
// pods that arrive over time: each batch onto the room the nodes so far have left and new
// nodes. Then it keeps the pods the case keeps and returns the cluster, the pods kept, and
// the hourly cost before.
func scaledDown(t testing.TB, c scaleDownCase) (*simCluster, []*corev1.Pod, float64) {
	t.Helper()
	in := workloads.Load(t, c.shape, c.from)
	in.DaemonSets = c.daemonSets
	s := &simCluster{in: in, nodes: map[string]*simNode{}}
	arrival := in.Pods
	if c.byDeployment {
		arrival = s.byDeployment(t)
	}
	batch := c.batch
	if batch == 0 {
		batch = len(arrival)
	}
	for i := 0; i < len(arrival); i += batch {
		arrived := in
		arrived.Pods = arrival[i:min(i+batch, len(arrival))]
		arrived.Nodes = s.view().Nodes
		plan := packing.Solve(arrived)
		for _, pl := range plan.Existing {
			s.bind(s.nodes[pl.Node.Node.Name], pl.Pods)
		}
		s.launch(t, plan.NewNodeClaims, false)
	}
	before := s.cost()
	keep := c.keep
	if c.likeReplicaSets {
		keep = s.keptByReplicaSets(t, keep)
	}
	kept := map[string]bool{}
	var keptPods []*corev1.Pod
	for i, p := range in.Pods {
		if keep(i) {
			kept[p.Name] = true
			keptPods = append(keptPods, p)
		}
	}
	for _, n := range s.nodes {
		var pods []*corev1.Pod
		for _, p := range n.node.Pods {
			if kept[p.Name] || nodeclaim.OwnedByDaemonSet(p) {
				pods = append(pods, p)
			}
		}
		n.node.Pods = pods
	}
	return s, keptPods, before
}

// keptByReplicaSets keeps as many of each Deployment's pods as keep does, choosing them as
// a ReplicaSet scaling down does (all pods running and ready alike): it deletes first the
// pods on the nodes that run the most of its pods, then the newest. That leaves a few pods
// on many nodes, where keeping every n-th pod empties nodes whole.
func (s *simCluster) keptByReplicaSets(t testing.TB, keep func(i int) bool) func(i int) bool {
	t.Helper()
	nodeOf := map[string]string{}
	for name, n := range s.nodes {
		for _, p := range n.node.Pods {
			nodeOf[p.Name] = name
		}
	}
	kept := map[int]bool{}
	for _, pods := range s.deployments(t) {
		n := 0
		onNode := map[string]int{}
		for _, i := range pods {
			onNode[nodeOf[s.in.Pods[i].Name]]++
			if keep(i) {
				n++
			}
		}
		// Kept first: the fewest pods of the Deployment on their node, then the oldest.
		sort.SliceStable(pods, func(a, b int) bool {
			na, nb := onNode[nodeOf[s.in.Pods[pods[a]].Name]], onNode[nodeOf[s.in.Pods[pods[b]].Name]]
			if na != nb {
				return na < nb
			}
			return pods[a] < pods[b]
		})
		for _, i := range pods[:n] {
			kept[i] = true
		}
	}
	return func(i int) bool { return kept[i] }
}

// deployments groups the workload's pods, by index, into Deployments (identical pods), in
// the order each first appears.
func (s *simCluster) deployments(t testing.TB) [][]int {
	t.Helper()
	out, err := workloads.Deployments(s.in.Pods)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// byDeployment is the workload's pods grouped by Deployment, in the order each first
// appears.
func (s *simCluster) byDeployment(t testing.TB) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	for _, pods := range s.deployments(t) {
		for _, i := range pods {
			out = append(out, s.in.Pods[i])
		}
	}
	return out
}

// movedOnly are the decision's replacements with the pods it moves now: a group's
// replacements launched ahead take the rest of the group's pods in later decisions.
func movedOnly(d Decision) []packing.NewNodeClaim {
	moving := podsOf(d.Originals)
	out := slices.Clone(d.Replacements)
	for i := range out {
		out[i].Pods = among(out[i].Pods, moving)
	}
	return out
}

// defaultBudget is the default budget of the cluster's NodePools: 10% of their nodes.
func (s *simCluster) defaultBudget() Budget {
	perPool := map[string]int{}
	for _, n := range s.nodes {
		perPool[n.pool]++
	}
	return func(pool string, _ karpv1.DisruptionReason) int { return (perPool[pool] + 9) / 10 }
}

// scaleDown consolidates a scaled-down workload (see scaledDown) until no decision is left
// and reports the outcome against a fresh plan of the pods kept.
func scaleDown(t testing.TB, c scaleDownCase) {
	t.Helper()
	s, keptPods, before := scaledDown(t, c)
	s.converge(t, keptPods, before, fmt.Sprintf("%s %d→%d pods", c.shape, c.from, len(keptPods)), DefaultOptions)
}

// fromSnapshot is the cluster a snapshot captured (workloads.Snapshot), with the pods it
// holds, in the workload's order, and its hourly cost.
func fromSnapshot(t testing.TB, path string) (*simCluster, []*corev1.Pod, float64) {
	t.Helper()
	snap, err := workloads.ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	in := workloads.Load(t, snap.Shape, snap.Pods)
	s := &simCluster{in: in, nodes: map[string]*simNode{}}
	var indices []int
	for _, n := range snap.Nodes {
		sn := s.add(t, n.Name, n.NodePool, n.InstanceType, n.Zone, n.CapacityType, n.Labels)
		for _, i := range n.Pods {
			if i < 0 || i >= len(in.Pods) {
				t.Fatalf("node %s of %s holds pod %d of a workload of %d", n.Name, path, i, len(in.Pods))
			}
			s.bind(sn, in.Pods[i:i+1])
			indices = append(indices, i)
		}
	}
	slices.Sort(indices)
	pods := make([]*corev1.Pod, len(indices))
	for j, i := range indices {
		if j > 0 && indices[j-1] == i {
			t.Fatalf("%s places pod %d twice", path, i)
		}
		pods[j] = in.Pods[i]
	}
	return s, pods, s.cost()
}

// converge consolidates the cluster until no decision is left and reports the outcome
// against a fresh plan of the pods kept, which are the pods on its nodes.
func (s *simCluster) converge(t testing.TB, keptPods []*corev1.Pod, before float64, name string, opts Options) {
	t.Helper()
	kept := map[string]bool{}
	for _, p := range keptPods {
		kept[p.Name] = true
	}
	start := time.Now()
	decisions, disrupted, replacements := 0, 0, 0
	moves := map[string]int{}
	// Each decision planned to the end, in one pass, by one planner that carries out its plans.
	opts.PassTime = 0
	var planner Planner
	for decisions < 1000 {
		d, ok := planner.Decide(s.view(), s.defaultBudget(), opts)
		if !ok {
			break
		}
		decisions++
		t.Logf("decision %d: %s, %d nodes, %d replacements, saves $%.4f/h, %d more nodes planned", decisions, d.Reason, len(d.Originals), len(d.Replacements), d.Savings, len(d.Rest))
		disrupted += len(d.Originals)
		replacements += len(d.Replacements)
		planner.Launched(d, s.apply(t, d, moves))
	}
	elapsed := time.Since(start)
	fresh := packing.Solve(packing.Input{Pods: keptPods, NodePools: s.in.NodePools, DaemonSets: s.in.DaemonSets})
	freshCost := fresh.PricePerHour()
	after := s.cost()
	// A pod moved twice is not counted here: the simulation keeps a node holding pods it moved
	// out of consolidation for good (view's MayConsolidate), as the controller does for
	// --moved-pods-hold, longer than any convergence, so it could not happen. The stack
	// counts it (the e2e scale-down and make chaos), where the hold is the controller's own.
	t.Logf("%s: $%.2f/h before, $%.2f/h after %d decisions (%d nodes disrupted, %d replacements, %d pods moved) in %s; fresh plan $%.2f/h: ×%.3f",
		name, before, after, decisions, disrupted, replacements, len(moves), elapsed.Round(time.Millisecond), freshCost, after/freshCost)
	if after > before {
		t.Errorf("consolidation raised the cost from $%.2f to $%.2f an hour", before, after)
	}
	// Issue 5's target: within 5% of a fresh plan of the pods kept.
	if after > 1.05*freshCost {
		t.Errorf("consolidated to $%.2f an hour, over 1.05 × the fresh plan's $%.2f", after, freshCost)
	}
	if decisions == 1000 {
		t.Errorf("consolidation did not converge in %d decisions", decisions)
	}
	for _, n := range s.nodes {
		for _, p := range n.movable() {
			if !kept[p.Name] {
				t.Fatalf("pod %s, removed, is back on %s", p.Name, n.node.Node.Name)
			}
		}
		if got, want := len(n.node.Pods)-len(n.movable()), len(s.in.DaemonSets); got != want {
			t.Errorf("node %s runs %d DaemonSet pods, want %d", n.node.Node.Name, got, want)
		}
	}
	placed := 0
	for _, n := range s.nodes {
		placed += len(n.movable())
	}
	if placed != len(keptPods) {
		t.Errorf("%d pods on nodes after consolidation, want the %d kept", placed, len(keptPods))
	}
}

// TestScaleDownConverges scales the shared workloads down as issue 5 measures them and
// reports cost against a fresh plan, nodes disrupted and pods moved: from
// a plan of every pod at once, and from capacity provisioned ten pods at a time, which
// leaves more room scattered over more nodes, as pods that arrive over time do; and from a
// start captured on the local stack (tailor-dev scaledown --snapshot-dir), which tells what
// the stack's start costs from what its timing does.
func TestScaleDownConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("plans thousands of pods")
	}
	webmix := func(i int) bool { return i%4 == 0 }
	diverse := func(i int) bool { return i%10 < 7 }
	t.Run("webmix 2000 to 500", func(t *testing.T) { scaleDown(t, scaleDownCase{shape: "webmix", from: 2000, keep: webmix}) })
	t.Run("diverse 1000 to 700", func(t *testing.T) { scaleDown(t, scaleDownCase{shape: "diverse", from: 1000, keep: diverse}) })
	t.Run("webmix 2000 to 500, provisioned 10 pods at a time", func(t *testing.T) {
		scaleDown(t, scaleDownCase{shape: "webmix", from: 2000, batch: 10, keep: webmix})
	})
	t.Run("diverse 1000 to 700, provisioned 10 pods at a time", func(t *testing.T) {
		scaleDown(t, scaleDownCase{shape: "diverse", from: 1000, batch: 10, keep: diverse})
	})
	t.Run("webmix 2000 to 500, provisioned 10 pods at a time, scaled down like ReplicaSets", func(t *testing.T) {
		scaleDown(t, scaleDownCase{shape: "webmix", from: 2000, batch: 10, keep: webmix, likeReplicaSets: true})
	})
	t.Run("diverse 1000 to 700, provisioned 5 pods at a time as Deployments arrive, scaled down like ReplicaSets", func(t *testing.T) {
		scaleDown(t, scaleDownCase{shape: "diverse", from: 1000, batch: 5, keep: diverse, likeReplicaSets: true, byDeployment: true})
	})
	// With the EKS add-ons' DaemonSets on every node, as issue 25 prices a scale-down: they
	// take room and pod slots on the nodes that stay and on replacements alike.
	t.Run("webmix 2000 to 500, provisioned 10 pods at a time, EKS DaemonSets", func(t *testing.T) {
		scaleDown(t, scaleDownCase{shape: "webmix", from: 2000, batch: 10, keep: webmix, daemonSets: simulation.EKSDaemonSets()})
	})
	t.Run("diverse 1000 to 700, provisioned 10 pods at a time, EKS DaemonSets", func(t *testing.T) {
		scaleDown(t, scaleDownCase{shape: "diverse", from: 1000, batch: 10, keep: diverse, daemonSets: simulation.EKSDaemonSets()})
	})
	// Two starts the stack provisioned: its zone-sharing pods began in us-east-1d in the
	// first, in us-east-1a (where a fresh plan puts them) in the second.
	for i, start := range []string{"testdata/diverse-1000-start-1.json", "testdata/diverse-1000-start-2.json"} {
		name := fmt.Sprintf("diverse 1000 to 700 from start %d captured on the stack", i+1)
		t.Run(name, func(t *testing.T) {
			s, kept, before := fromSnapshot(t, start)
			s.converge(t, kept, before, name, DefaultOptions)
		})
	}
}

// TestScaleDownReplaysCapturedStarts consolidates, in memory, starts captured on the stack
// and named by SCALEDOWN_STARTS (comma-separated snapshot files, as tailor-dev scaledown
// --snapshot-dir writes them): it tells whether a scale-down that ended costly on the stack
// did so from its start or from its timing. Each start is consolidated with spot-to-spot
// replacements and without them, Karpenter's default.
func TestScaleDownReplaysCapturedStarts(t *testing.T) {
	starts := os.Getenv("SCALEDOWN_STARTS")
	if starts == "" {
		t.Skip("SCALEDOWN_STARTS names no snapshot")
	}
	for _, start := range strings.Split(starts, ",") {
		for _, spotToSpot := range []bool{true, false} {
			name := fmt.Sprintf("%s, spot-to-spot %v", filepath.Base(start), spotToSpot)
			t.Run(name, func(t *testing.T) {
				s, kept, before := fromSnapshot(t, start)
				opts := DefaultOptions
				opts.NoSpotToSpot = !spotToSpot
				s.converge(t, kept, before, name, opts)
			})
		}
	}
}

// BenchmarkConsolidationPlan measures the slowest decision of a scale-down, the first
// consolidation plan, which weighs every node: webmix 2,000 → 500 provisioned ten pods at a
// time, its empty nodes already removed.
func BenchmarkConsolidationPlan(b *testing.B) {
	s, _, _ := scaledDown(b, scaleDownCase{shape: "webmix", from: 2000, batch: 10, keep: func(i int) bool { return i%4 == 0 }})
	for name, n := range s.nodes {
		if len(n.node.Pods) == 0 {
			delete(s.nodes, name)
		}
	}
	c, budget := s.view(), s.defaultBudget()
	var d Decision
	for b.Loop() {
		var ok bool
		if d, ok = Decide(c, budget, DefaultOptions); !ok {
			b.Fatal("no decision")
		}
	}
	b.ReportMetric(float64(len(c.Candidates)), "candidates")
	b.ReportMetric(float64(len(d.Originals)+len(d.Rest)), "planned")
}
