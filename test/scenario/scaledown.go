package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// DeploymentLabel names, on the scale-down's pods, the Deployment they belong to; it is
// the Deployment's and its PodDisruptionBudget's selector.
const DeploymentLabel = "scenario.tailor.sh/deployment"

// discoveryTag tags the subnets and security groups of a cluster.
const discoveryTag = "karpenter.sh/discovery"

// evictedReason is the reason of the DisruptionTarget condition the Eviction API sets on a
// pod just before deleting it; nothing else sets it, so it tells an eviction from a deletion.
const evictedReason = "EvictionByEvictionAPI"

// KeepRule says which pods of a workload a scale-down keeps, by their index in it: pod i
// is kept when i%Every < Kept.
type KeepRule struct {
	Kept, Every int
}

// Keeps reports whether the pod of index i is kept.
func (k KeepRule) Keeps(i int) bool { return i%k.Every < k.Kept }

// String renders the rule the way ParseKeepRule reads it: "1/4" keeps one pod in four.
func (k KeepRule) String() string { return fmt.Sprintf("%d/%d", k.Kept, k.Every) }

// ParseKeepRule reads "K/N": keep pod i when i%N < K.
func ParseKeepRule(s string) (KeepRule, error) {
	kept, every, ok := strings.Cut(s, "/")
	k, errK := strconv.Atoi(kept)
	n, errN := strconv.Atoi(every)
	if !ok || errK != nil || errN != nil || n < 1 || k < 0 || k > n {
		return KeepRule{}, fmt.Errorf("keep rule %q: want K/N with 0 ≤ K ≤ N, N ≥ 1 (pod i is kept when i%%N < K)", s)
	}
	return KeepRule{Kept: k, Every: n}, nil
}

// Workload is one shared workload (test/workloads) a scale-down runs: its shape, its pods,
// and the pods the scale-down keeps.
type Workload struct {
	Shape string
	Pods  int
	Keep  KeepRule
}

// Kept counts the pods the scale-down keeps.
func (w Workload) Kept() int {
	n := 0
	for i := range w.Pods {
		if w.Keep.Keeps(i) {
			n++
		}
	}
	return n
}

// IssueScaleDowns are the scale-downs issue 5 measures: webmix from 2,000 pods to 500 and
// diverse from 1,000 to 700, with the keep rules of provisioner/disruption's in-memory
// measurement (i%4 == 0 and i%10 < 7).
func IssueScaleDowns() []ScaleDownOptions {
	return []ScaleDownOptions{
		{Shape: "webmix", Pods: 2000, Keep: KeepRule{Kept: 1, Every: 4}},
		{Shape: "diverse", Pods: 1000, Keep: KeepRule{Kept: 7, Every: 10}},
	}
}

// Scale-down defaults.
const (
	// DefaultConsolidateAfter is set on the workload's NodePools: one disruption interval.
	// The pods one decision moves then have a pass's time to land before their new nodes
	// are judged again, and the scenario does not sit out the generator's 30s after every
	// move, which would make the time to converge mostly waiting.
	DefaultConsolidateAfter = 10 * time.Second
	// DefaultDisruptionInterval is the sidecar's own default --disruption-interval.
	DefaultDisruptionInterval = 10 * time.Second
	// newNodeProtection is how long the sidecar keeps new nodes from disruption: its
	// --batch-max-duration, left at its default on the local stack.
	newNodeProtection = 10 * time.Second
)

// ScaleDownOptions configure a scale-down.
type ScaleDownOptions struct {
	// Root is the repository root; the workload is generated under Root/_output/workloads.
	Root string
	// Shape and Pods name the shared workload (test/workloads) the Deployments are made of.
	Shape string
	Pods  int
	// Keep says which of the workload's pods the scale-down keeps.
	Keep KeepRule
	// With are further workloads run beside the first in the same cluster (bench-scale's
	// webmix and diverse): their NodePools are applied beside the first's (an EC2NodeClass
	// of a name already applied is applied once), their pods grouped into Deployments with
	// the first's, and the fresh plans plan them all together.
	With []Workload
	// ConsolidateAfter is set on every NodePool of the workload once the Deployments have
	// deleted the pods scaled down (DefaultConsolidateAfter). Until then it is Never:
	// consolidating while thousands of pods come up moves pods of a cluster still being
	// provisioned, and the moves measured would not all be the scale-down's.
	ConsolidateAfter time.Duration
	// ConsolidateDuringScaleDown turns consolidation on as soon as the Deployments are
	// scaled, while their controller still deletes pods, as on a cluster where it is always
	// on. Budgets then race the deletions: a budget's status still counts the pods being
	// deleted, so the Eviction API lets consolidation evict pods that the deletions leave
	// missing, and Deployments fall below their budget with no component at fault.
	ConsolidateDuringScaleDown bool
	// DisruptionInterval is the sidecar's --disruption-interval on the stack
	// (DefaultDisruptionInterval); only Quiet's default uses it.
	DisruptionInterval time.Duration
	// Quiet is how long no NodeClaim may be created or deleted for the cluster to count as
	// converged; the sidecar must also have made two passes that found nothing to disrupt
	// since (tailor_disruption_passes_total{result="idle"}), for a pass that plans a large
	// consolidation may take longer than Quiet. By default the longer of ConsolidateAfter
	// and the sidecar's protection of new nodes (its --batch-max-duration, 10s), plus three
	// disruption intervals: after a move its nodes wait that long before they are
	// candidates again, a pass may take an interval to come, and two more cover passes that
	// found nothing while a node settled.
	Quiet time.Duration
	// RunTimeout bounds the wait for every pod to run before the scale-down (10 minutes);
	// ConvergeTimeout the wait for convergence after it (20 minutes).
	RunTimeout, ConvergeTimeout time.Duration
	// StallTimeout, when set, lets the scale-down begin although some pods are still
	// pending, once no more pod has started running for that long: the scale-down deletes
	// pending pods first, and the pods left stuck are reported. Zero waits for every pod
	// until RunTimeout.
	StallTimeout time.Duration
	// Snapshot, when set, is the file the start of consolidation is written to once the
	// Deployments have deleted the pods scaled down: the nodes and the workload's pods on
	// them (workloads.Snapshot), to replay in memory. A snapshot holds one workload: it
	// cannot be set With others.
	Snapshot string
	// Provisioned, when set, is called once the pods run (or the run stalled), before the
	// scale-down, while the burst's pods and NodeClaims are all there to read.
	Provisioned func(ctx context.Context) error
}

// workloads are the scale-down's workloads, the first one first.
func (o *ScaleDownOptions) workloads() []Workload {
	return append([]Workload{{Shape: o.Shape, Pods: o.Pods, Keep: o.Keep}}, o.With...)
}

func (o *ScaleDownOptions) defaults() error {
	if o.Root == "" {
		return errors.New("scale-down: Root must be set")
	}
	for _, w := range o.workloads() {
		if w.Shape == "" || w.Pods < 1 || w.Keep.Every < 1 {
			return errors.New("scale-down: every workload's Shape, Pods and Keep must be set")
		}
	}
	if o.Snapshot != "" && len(o.With) > 0 {
		return errors.New("scale-down: a snapshot holds one workload, not one With others")
	}
	if o.ConsolidateAfter == 0 {
		o.ConsolidateAfter = DefaultConsolidateAfter
	}
	if o.DisruptionInterval == 0 {
		o.DisruptionInterval = DefaultDisruptionInterval
	}
	if o.Quiet == 0 {
		o.Quiet = max(o.ConsolidateAfter, newNodeProtection) + 3*o.DisruptionInterval
	}
	if o.RunTimeout == 0 {
		o.RunTimeout = 10 * time.Minute
	}
	if o.ConvergeTimeout == 0 {
		o.ConvergeTimeout = 20 * time.Minute
	}
	return nil
}

// ScaleDownResult is what a scale-down measured.
type ScaleDownResult struct {
	// Workloads are the workloads run, the first one first.
	Workloads []Workload
	// From and To are the pods before and after the scale-down, Deployments how many
	// Deployments (each with a PodDisruptionBudget of maxUnavailable 1) hold them.
	From, To, Deployments int
	// Provisioned is how long all From pods took to run after the Deployments were created,
	// or, when some were stuck, until the scale-down began anyway. RunningBefore counts
	// the pods running then, and Stuck describes pods left pending.
	Provisioned   time.Duration
	RunningBefore int
	Stuck         []string

	// CostBefore and CostAfter are the hourly prices of the live nodes when every pod first
	// ran and once converged, priced whole as the fresh plans are (WholeNodePrices);
	// NodesBefore and NodesAfter count them. Unpriced are the live instances no NodeClaim
	// priced, counted at their instance price.
	CostBefore, CostAfter   float64
	NodesBefore, NodesAfter int
	Unpriced                []string
	// FreshAll and FreshKept are the hourly prices of the planner's fresh plans of all the
	// workload's pods and of the kept ones; FreshAllNodes and FreshKeptNodes their nodes.
	FreshAll, FreshKept           float64
	FreshAllNodes, FreshKeptNodes int
	// PriceMismatches name live instances whose price on the local endpoint differs from
	// the planner's price of their offering.
	PriceMismatches []string
	// Zones sets the end state beside the fresh plan of the kept pods, zone by zone, so a
	// gap can be traced to where it sits.
	Zones []ZoneCost

	// Deleted is how long after the scale-down consolidation was turned on: once the
	// Deployments had deleted the pods scaled down, unless ConsolidateDuringScaleDown.
	Deleted time.Duration
	// NodesDisrupted counts NodeClaims deleted after the scale-down; NodeClaimsCreated the
	// ones created after it (replacements).
	NodesDisrupted, NodeClaimsCreated int
	// Evictions counts pods evicted after the scale-down; EvictedTwice those among them that
	// were themselves created after it, i.e. replaced an evicted pod and were evicted again.
	// EvictionsBefore counts evictions before the scale-down.
	Evictions, EvictedTwice, EvictionsBefore int
	// Twice describes the first few pods evicted twice: the node and when, counted from the
	// scale-down, they were created and evicted.
	Twice []string
	// OtherDeletions counts pods deleted without eviction beyond what the scale-down itself
	// deleted, per Deployment.
	OtherDeletions int
	// PDBViolations counts observations of a PodDisruptionBudget with fewer healthy pods
	// than it desires, from when every pod of its Deployment first ran and the budget
	// first saw as many healthy pods as it desires; Violations describes the first few.
	PDBViolations int
	Violations    []string

	// Converged is set when every kept pod ran, none was pending, and no NodeClaim changed
	// for the quiet period; Converge is then the time from the scale-down to the last
	// NodeClaim change, or to consolidation turned on when none changed.
	Converged bool
	Converge  time.Duration
	Quiet     time.Duration
	// Running counts the kept pods running at the end, Pending the pods pending.
	Running, Pending int
	// NodeClaims counts NodeClaims at the end; Orphans names live instances without a
	// NodeClaim and ClaimsWithoutInstance NodeClaims without a live instance.
	NodeClaims            int
	Orphans               []string
	ClaimsWithoutInstance []string
	// Wall is the whole scenario's time.
	Wall time.Duration
	// Applied is when the Deployments were created, ScaledAt when they were scaled down
	// and ConsolidationOn when consolidation was turned on.
	Applied, ScaledAt, ConsolidationOn time.Time
}

// Name names the workloads run: their shapes joined by "+".
func (r *ScaleDownResult) Name() string { return workloadsName(r.Workloads) }

func workloadsName(ws []Workload) string {
	shapes := make([]string, len(ws))
	for i, w := range ws {
		shapes[i] = w.Shape
	}
	return strings.Join(shapes, "+")
}

// Ratio is the hourly cost after convergence over the fresh plan of the kept pods.
func (r *ScaleDownResult) Ratio() float64 {
	if r.FreshKept == 0 {
		return 0
	}
	return r.CostAfter / r.FreshKept
}

// ZoneCost is one zone's share of the end state and of the fresh plan of the kept pods.
type ZoneCost struct {
	Zone string
	// Cost, Nodes and Pods are the live instances' hourly price, their number and the
	// workload's running pods on their nodes; Fresh, FreshNodes and FreshPods the fresh
	// plan's.
	Cost, Fresh       float64
	Nodes, FreshNodes int
	Pods, FreshPods   int
}

// deployment is a set of identical pods of the workload, run as one Deployment.
type deployment struct {
	name string
	// pod is the first of the pods, the template of the Deployment.
	pod *corev1.Pod
	// from and to are its replicas before and after the scale-down.
	from, to int
	// kept are the indices, in the workload, of the pods the scale-down keeps.
	kept []int
	// minAvailable, when set, is its PodDisruptionBudget's minAvailable, in place of a
	// maxUnavailable of 1; unbudgeted leaves it without a budget.
	minAvailable *intstr.IntOrString
	unbudgeted   bool
}

// ScaleDown runs a scale-down on the stack: the workload's pods as Deployments, each with a
// PodDisruptionBudget, all running, then scaled down to the pods the keep rule keeps. It
// records consolidation until the cluster converges and prints a report to out. Not
// converging within opts.ConvergeTimeout is a result, not an error.
func ScaleDown(ctx context.Context, stack *localstack.Stack, opts ScaleDownOptions, out io.Writer) (*ScaleDownResult, error) {
	start := time.Now()
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	parts := opts.workloads()
	paths, in, keeps, err := readWorkloads(opts.Root, parts)
	if err != nil {
		return nil, err
	}
	keep := func(i int) bool { return keeps[i] }
	deployments, err := groupDeployments(in.Pods, keep)
	if err != nil {
		return nil, err
	}
	name := workloadsName(parts)
	// Thousands of objects are created, scaled and read: the default 5 requests a second
	// would take minutes.
	cfg := rest.CopyConfig(stack.Config)
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		return nil, err
	}
	r := &ScaleDownResult{Workloads: parts, Deployments: len(deployments), Quiet: opts.Quiet}
	for _, d := range deployments {
		r.From += d.from
		r.To += d.to
	}
	fmt.Fprintf(out, "%s: %d pods as %d Deployments, each with a PodDisruptionBudget of maxUnavailable 1; scaling down to %d (%s)\n",
		name, r.From, len(deployments), r.To, describeWorkloads(parts))
	pools, err := applyNodePools(ctx, cfg, paths, stack.ClusterName())
	if err != nil {
		return nil, err
	}
	for _, c := range pools.classes {
		if err := waitNodeClassReady(ctx, kube, c); err != nil {
			return nil, fmt.Errorf("waiting for EC2NodeClass %s to be ready: %w", c, err)
		}
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := watchScaleDown(watchCtx, cfg, deployments)
	if err != nil {
		return nil, err
	}
	run := &scaleDownRun{opts: opts, name: name, in: in, endpoint: stack.AWSEndpoint, metricsURLs: stack.ProvisionerMetricsURLs, cs: cs, kube: kube, deployments: deployments, pools: pools, w: w, r: r, out: out}
	if err := run.provision(ctx); err != nil {
		return nil, err
	}
	if err := run.scaleDown(ctx); err != nil {
		return nil, err
	}
	if err := run.converge(ctx); err != nil {
		return nil, err
	}
	stopWatch()
	w.record(r)
	if err := r.measureEnd(ctx, kube, stack.AWSEndpoint, in, keep); err != nil {
		return nil, err
	}
	r.Wall = time.Since(start)
	PrintScaleDown(out, r)
	return r, nil
}

// scaleDownRun is a scale-down under way.
type scaleDownRun struct {
	opts ScaleDownOptions
	// name names the workloads in progress lines.
	name string
	// in is the workload as planner input.
	in          packing.Input
	endpoint    string
	metricsURLs []string
	cs          kubernetes.Interface
	kube        client.Client
	deployments []*deployment
	pools       *workloadPools
	w           *scaleDownWatch
	r           *ScaleDownResult
	out         io.Writer
	scaledAt    time.Time
}

// provision creates the Deployments and waits until their pods run (or, with a
// StallTimeout, until no more start), then records the cost.
func (s *scaleDownRun) provision(ctx context.Context) error {
	created := time.Now()
	s.r.Applied = created
	if err := createDeployments(ctx, s.cs, s.deployments); err != nil {
		return err
	}
	r, opts := s.r, s.opts
	running, progressed := 0, time.Now()
	err := wait.PollUntilContextTimeout(ctx, time.Second, opts.RunTimeout, true, func(ctx context.Context) (bool, error) {
		st, err := s.w.state(ctx)
		if err != nil {
			return false, err
		}
		if st.running > running {
			running, progressed = st.running, time.Now()
		}
		if st.running == r.From && st.pending == 0 {
			return true, nil
		}
		return opts.StallTimeout > 0 && time.Since(progressed) >= opts.StallTimeout, nil
	})
	if err != nil {
		st, _ := s.w.state(ctx)
		return fmt.Errorf("waiting for %d pods to run (%d running, %d pending%s): %w", r.From, st.running, st.pending, describe(s.w.pendingPods(ctx)), err)
	}
	r.Provisioned = time.Since(created)
	if r.RunningBefore = running; running < r.From {
		r.Stuck = s.w.pendingPods(ctx)
		fmt.Fprintf(s.out, "%s: %d of %d pods running, none more for %s; scaling down anyway (the scale-down deletes pending pods first)%s\n",
			s.name, running, r.From, opts.StallTimeout, describe(r.Stuck))
	}
	before, err := liveInstances(ctx, s.endpoint)
	if err != nil {
		return err
	}
	claims := &karpv1.NodeClaimList{}
	if err := s.kube.List(ctx, claims); err != nil {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	r.NodesBefore = len(before)
	r.CostBefore, r.Unpriced = WholeNodePrice(before, claims.Items)
	fmt.Fprintf(s.out, "%s: %d pods running after %s on %d nodes, $%.2f/hour; scaling down\n",
		s.name, r.RunningBefore, r.Provisioned.Round(time.Second), r.NodesBefore, r.CostBefore)
	if opts.Provisioned != nil {
		return opts.Provisioned(ctx)
	}
	return nil
}

// scaleDown scales the Deployments down and turns consolidation on: once their
// controller has deleted the pods scaled down, or at once with ConsolidateDuringScaleDown.
func (s *scaleDownRun) scaleDown(ctx context.Context) error {
	s.scaledAt = s.w.startScaleDown()
	s.r.ScaledAt = s.scaledAt
	if err := scaleDeployments(ctx, s.cs, s.deployments); err != nil {
		return err
	}
	if !s.opts.ConsolidateDuringScaleDown {
		err := wait.PollUntilContextTimeout(ctx, time.Second, s.opts.ConvergeTimeout, true, func(ctx context.Context) (bool, error) {
			st, err := s.w.state(ctx)
			return err == nil && st.over == 0, err
		})
		if err != nil {
			return fmt.Errorf("waiting for the Deployments to delete the pods scaled down: %w", err)
		}
	}
	s.r.Deleted = time.Since(s.scaledAt)
	if s.opts.Snapshot != "" {
		snap, err := snapshot(ctx, s.kube, s.opts, s.in, s.deployments)
		if err != nil {
			return err
		}
		if err := workloads.WriteSnapshot(s.opts.Snapshot, snap); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "%s: the start of consolidation, %d nodes, written to %s\n", s.name, len(snap.Nodes), s.opts.Snapshot)
	}
	if err := s.pools.consolidate(ctx, s.opts.ConsolidateAfter); err != nil {
		return err
	}
	// The quiet period counts from when consolidation could first act.
	s.w.changed()
	s.r.ConsolidationOn = time.Now()
	fmt.Fprintf(s.out, "%s: scaled down; consolidation on after %s\n", s.name, s.r.Deleted.Round(time.Second))
	return nil
}

// snapshot captures the NodePools' nodes and the workload's pods running on them, each
// given the index of one of its Deployment's kept pods in the workload (a Deployment's pods
// are identical).
func snapshot(ctx context.Context, kube client.Client, opts ScaleDownOptions, in packing.Input, ds []*deployment) (*workloads.Snapshot, error) {
	nodes, pods, err := listWorkload(ctx, kube)
	if err != nil {
		return nil, err
	}
	kept := map[string][]int{}
	for _, d := range ds {
		kept[d.name] = d.kept
	}
	onNode := map[string][]int{}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			continue
		}
		d := p.Labels[DeploymentLabel]
		if len(kept[d]) == 0 {
			return nil, fmt.Errorf("the Deployment %s runs more pods than the scale-down keeps of it", d)
		}
		onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], kept[d][0])
		kept[d] = kept[d][1:]
	}
	instanceLabels := map[string]map[string]string{}
	for _, pool := range in.NodePools {
		for _, it := range pool.InstanceTypes {
			instanceLabels[it.Name] = it.Labels
		}
	}
	snap := &workloads.Snapshot{Shape: opts.Shape, Pods: opts.Pods}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	for _, n := range nodes.Items {
		pool, ok := n.Labels[karpv1.NodePoolLabelKey]
		if !ok || n.DeletionTimestamp != nil {
			continue
		}
		sn := workloads.SnapshotNode{
			Name: n.Name, NodePool: pool, InstanceType: n.Labels[corev1.LabelInstanceTypeStable],
			Zone: n.Labels[corev1.LabelTopologyZone], CapacityType: n.Labels[karpv1.CapacityTypeLabelKey],
			Pods: onNode[n.Name],
		}
		delete(onNode, n.Name)
		known := instanceLabels[sn.InstanceType]
		for k, v := range n.Labels {
			switch k {
			case corev1.LabelTopologyZone, karpv1.CapacityTypeLabelKey, karpv1.NodePoolLabelKey, corev1.LabelHostname:
				continue
			}
			if w, ok := known[k]; ok && w == v {
				continue
			}
			if sn.Labels == nil {
				sn.Labels = map[string]string{}
			}
			sn.Labels[k] = v
		}
		snap.Nodes = append(snap.Nodes, sn)
	}
	for name, pods := range onNode {
		return nil, fmt.Errorf("node %s runs %d of the workload's pods but is no NodePool's live node: the snapshot would lose them", name, len(pods))
	}
	return snap, nil
}

// converge waits until the cluster converges or ConvergeTimeout passes.
func (s *scaleDownRun) converge(ctx context.Context) error {
	var last convergence
	// idleAt is the count of the sidecar's idle passes at the last NodeClaim change, seen.
	var idleAt float64
	var seen time.Time
	err := wait.PollUntilContextTimeout(ctx, time.Second, s.opts.ConvergeTimeout, true, func(ctx context.Context) (bool, error) {
		st, err := s.w.state(ctx)
		if err != nil {
			return false, err
		}
		last = st
		idle, err := idlePasses(ctx, s.metricsURLs)
		if err != nil {
			return false, err
		}
		if !st.lastChange.Equal(seen) {
			seen, idleAt = st.lastChange, idle
		}
		return st.converged(s.r.To, s.opts.Quiet) && idle-idleAt >= 2, nil
	})
	switch {
	case err == nil:
		s.r.Converged = true
	case ctx.Err() != nil || !wait.Interrupted(err):
		return err
	default:
		fmt.Fprintf(s.out, "%s: not converged within %s: %s%s\n", s.name, s.opts.ConvergeTimeout, last, describe(s.w.pendingPods(ctx)))
	}
	s.r.Converge = last.lastChange.Sub(s.scaledAt)
	s.r.Running, s.r.Pending = last.running, last.pending
	return nil
}

// idlePasses reads how many disruption passes found nothing to disrupt, summed over the
// sidecar's replicas that answer (only the leader makes passes).
func idlePasses(ctx context.Context, metricsURLs []string) (float64, error) {
	n, err := passCounts(ctx, metricsURLs, disruption.PassIdle)
	return n[disruption.PassIdle], err
}

// passCounts reads how many disruption passes ended with each of the results
// (disruption.PassIdle, ...), summed over the sidecar's replicas that answer.
func passCounts(ctx context.Context, metricsURLs []string, results ...string) (map[string]float64, error) {
	out := map[string]float64{}
	answered := 0
	var errs []error
	for _, url := range metricsURLs {
		metrics, err := localstack.ScrapeMetrics(ctx, url)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range results {
			out[r] += metrics.Sum("tailor_disruption_passes_total", map[string]string{"result": r})
		}
		answered++
	}
	if answered == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// groupDeployments groups the workload's pods whose labels and spec are identical into
// Deployments, in the order of their first pod, and counts the pods keep keeps of each (by
// their index in pods).
func groupDeployments(pods []*corev1.Pod, keep func(i int) bool) ([]*deployment, error) {
	groups, err := workloads.Deployments(pods)
	if err != nil {
		return nil, err
	}
	out := make([]*deployment, len(groups))
	for j, indices := range groups {
		d := &deployment{pod: pods[indices[0]], from: len(indices)}
		for _, i := range indices {
			if keep(i) {
				d.to++
				d.kept = append(d.kept, i)
			}
		}
		out[j] = d
	}
	nameDeployments(out)
	return out, nil
}

// nameDeployments names each Deployment after its pods' label values (webmix's app=web-3
// gives web-3), adding the pods' requests where labels alone do not tell two apart
// (diverse's class=c1 gives c1-500m-1024mi), and a number where even those do not.
func nameDeployments(ds []*deployment) {
	base := make([]string, len(ds))
	count := map[string]int{}
	for i, d := range ds {
		keys := make([]string, 0, len(d.pod.Labels))
		for k := range d.pod.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, d.pod.Labels[k])
		}
		base[i] = strings.Join(parts, "-")
		count[base[i]]++
	}
	used := map[string]int{}
	for i, d := range ds {
		name := base[i]
		if count[name] > 1 || name == "" {
			var parts []string
			if name != "" {
				parts = append(parts, name)
			}
			for _, c := range d.pod.Spec.Containers {
				names := make([]string, 0, len(c.Resources.Requests))
				for r := range c.Resources.Requests {
					names = append(names, string(r))
				}
				sort.Strings(names)
				for _, r := range names {
					q := c.Resources.Requests[corev1.ResourceName(r)]
					parts = append(parts, q.String())
				}
			}
			name = strings.Join(parts, "-")
		}
		name = dnsLabel(name)
		used[name]++
		if used[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, used[name])
		}
		d.name = name
	}
}

// dnsLabel lower-cases a name and replaces what a DNS label cannot hold.
func dnsLabel(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
	s = strings.Trim(s, "-")
	if len(s) > validation.DNS1123LabelMaxLength-6 {
		s = s[:validation.DNS1123LabelMaxLength-6]
	}
	if s == "" {
		return "pods"
	}
	return s
}

// workloadPools are the workload's EC2NodeClasses and NodePools as applied.
type workloadPools struct {
	applier *localstack.Applier
	classes []string
	pools   []*unstructured.Unstructured
}

// applyNodePools applies the EC2NodeClasses and NodePools of the workload files as
// applyPoolObjects does.
func applyNodePools(ctx context.Context, cfg *rest.Config, paths []string, cluster string) (*workloadPools, error) {
	var objs []*unstructured.Unstructured
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading workload: %w", err)
		}
		decoded, err := localstack.Decode(raw)
		if err != nil {
			return nil, err
		}
		objs = append(objs, decoded...)
	}
	return applyPoolObjects(ctx, cfg, objs, cluster)
}

// applyPoolObjects applies the EC2NodeClasses among objs, selecting the subnets and
// security groups tagged for the stack's cluster, and the NodePools among them with
// consolidation off until consolidate turns it on; other objects are left out. The objects
// are applied as given, with those fields set in place.
func applyPoolObjects(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, cluster string) (*workloadPools, error) {
	applier, err := localstack.NewApplier(cfg)
	if err != nil {
		return nil, err
	}
	w := &workloadPools{applier: applier}
	var classes []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case awsv1.SchemeGroupVersion.WithKind("EC2NodeClass").GroupKind():
			if slices.Contains(w.classes, o.GetName()) {
				continue
			}
			// The generator tags for a cluster named demo.
			for _, field := range []string{"subnetSelectorTerms", "securityGroupSelectorTerms"} {
				terms := []any{map[string]any{"tags": map[string]any{discoveryTag: cluster}}}
				if err := unstructured.SetNestedSlice(o.Object, terms, "spec", field); err != nil {
					return nil, fmt.Errorf("setting %s of EC2NodeClass %s: %w", field, o.GetName(), err)
				}
			}
			w.classes = append(w.classes, o.GetName())
			classes = append(classes, o)
		case karpv1.SchemeGroupVersion.WithKind("NodePool").GroupKind():
			w.pools = append(w.pools, o)
		}
	}
	if err := applier.ApplyObjects(ctx, classes...); err != nil {
		return nil, err
	}
	return w, w.setConsolidateAfter(ctx, "Never")
}

// consolidate lets the NodePools consolidate nodes whose pods have not changed for after.
func (w *workloadPools) consolidate(ctx context.Context, after time.Duration) error {
	// Whole seconds: the CRD's pattern takes no fractions.
	return w.setConsolidateAfter(ctx, fmt.Sprintf("%ds", int(after.Round(time.Second).Seconds())))
}

// setConsolidateAfter applies the NodePools with spec.disruption.consolidateAfter set; the
// NodePools' template, and so their NodeClaims' drift, does not change.
func (w *workloadPools) setConsolidateAfter(ctx context.Context, after string) error {
	for _, p := range w.pools {
		if err := unstructured.SetNestedField(p.Object, after, "spec", "disruption", "consolidateAfter"); err != nil {
			return fmt.Errorf("setting consolidateAfter of NodePool %s: %w", p.GetName(), err)
		}
	}
	return w.applier.ApplyObjects(ctx, w.pools...)
}

// createDeployments creates each Deployment's PodDisruptionBudget, unless it has none, then
// the Deployment with all its replicas, its pod's labels and annotations on its template.
func createDeployments(ctx context.Context, cs kubernetes.Interface, ds []*deployment) error {
	one := intstr.FromInt32(1)
	for _, d := range ds {
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{DeploymentLabel: d.name}}
		if !d.unbudgeted {
			spec := policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: sel}
			if d.minAvailable != nil {
				spec.MaxUnavailable, spec.MinAvailable = nil, d.minAvailable
			}
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: metav1.NamespaceDefault}, Spec: spec}
			if _, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceDefault).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating PodDisruptionBudget %s: %w", d.name, err)
			}
		}
		// The pods' own labels stay: their spread and affinity selectors refer to them.
		podLabels := map[string]string{DeploymentLabel: d.name}
		for k, v := range d.pod.Labels {
			podLabels[k] = v
		}
		replicas := int32(d.from)
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: metav1.NamespaceDefault},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: sel,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: d.pod.Annotations},
					Spec:       *d.pod.Spec.DeepCopy(),
				},
			},
		}
		if _, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", d.name, err)
		}
	}
	return nil
}

// scaleDeployments sets each Deployment's replicas to what the scale-down keeps.
func scaleDeployments(ctx context.Context, cs kubernetes.Interface, ds []*deployment) error {
	for _, d := range ds {
		if d.to == d.from {
			continue
		}
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, d.to)
		if _, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).Patch(ctx, d.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scaling Deployment %s to %d: %w", d.name, d.to, err)
		}
	}
	return nil
}

// scaleDownWatch follows the scale-down's pods, the NodeClaims and the
// PodDisruptionBudgets through informers, so that nothing that happens between two looks
// is missed.
type scaleDownWatch struct {
	cache cache.Cache
	// from and to are the replicas of each Deployment before and after the scale-down.
	from, to map[string]int

	mu sync.Mutex
	// ran names the Deployments whose pods all ran at some point, met the budgets whose
	// last status had as many healthy pods as desired, and armed the budgets seen met
	// after their Deployment's pods all ran: from then on their violations count (a
	// budget's status lags the pods it counts). scaledAt is when the scale-down began.
	ran, met, armed map[string]bool
	scaledAt        time.Time
	// evicted are the pods seen evicted, deletedUnevicted counts per Deployment the pods
	// deleted without.
	evicted          map[types.UID]eviction
	deletedUnevicted map[string]int
	// claims are the NodeClaims seen, deleting those seen with a deletion timestamp.
	claims, deleting  map[string]bool
	created, deleted  int
	lastChange        time.Time
	violations        int
	violationExamples []string
}

// eviction is one pod evicted.
type eviction struct {
	pod, node   string
	created, at time.Time
	// afterScaleDown is set when the eviction was seen after the scale-down began.
	afterScaleDown bool
}

// maxViolationExamples bounds the violations a result describes.
const maxViolationExamples = 10

// newScaleDownWatch returns a watch of the Deployments that reads no cache yet.
func newScaleDownWatch(ds []*deployment) *scaleDownWatch {
	w := &scaleDownWatch{
		from: map[string]int{}, to: map[string]int{},
		evicted: map[types.UID]eviction{}, deletedUnevicted: map[string]int{},
		ran: map[string]bool{}, met: map[string]bool{}, armed: map[string]bool{},
		claims: map[string]bool{}, deleting: map[string]bool{},
	}
	for _, d := range ds {
		w.from[d.name], w.to[d.name] = d.from, d.to
	}
	return w
}

// watchScaleDown starts informers on the scale-down's pods, the NodeClaims and the
// PodDisruptionBudgets, and returns once they have synced.
func watchScaleDown(ctx context.Context, cfg *rest.Config, ds []*deployment) (*scaleDownWatch, error) {
	ours, err := labels.NewRequirement(DeploymentLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme: apischeme.New(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: labels.NewSelector().Add(*ours)},
			&policyv1.PodDisruptionBudget{}: {},
			&karpv1.NodeClaim{}:             {},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache: %w", err)
	}
	w := newScaleDownWatch(ds)
	w.cache = c
	handlers := []struct {
		obj     client.Object
		handler toolscache.ResourceEventHandlerFuncs
	}{
		{&corev1.Pod{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.pod(o, false) },
			UpdateFunc: func(_, o any) { w.pod(o, false) },
			DeleteFunc: func(o any) { w.pod(o, true) },
		}},
		{&karpv1.NodeClaim{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.nodeClaim(o, false) },
			UpdateFunc: func(_, o any) { w.nodeClaim(o, false) },
			DeleteFunc: func(o any) { w.nodeClaim(o, true) },
		}},
		{&policyv1.PodDisruptionBudget{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    w.pdb,
			UpdateFunc: func(_, o any) { w.pdb(o) },
		}},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, fmt.Errorf("watching %T: %w", h.obj, err)
		}
		if _, err := inf.AddEventHandler(h.handler); err != nil {
			return nil, fmt.Errorf("watching %T: %w", h.obj, err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the cache of pods, NodeClaims and PodDisruptionBudgets did not sync")
	}
	return w, nil
}

// unwrap returns the object of an informer event, also of a deletion whose final state
// the informer missed.
func unwrap(o any) any {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return o
}

func (w *scaleDownWatch) pod(o any, deleted bool) {
	p, ok := unwrap(o).(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.evicted[p.UID]; !seen && evictedPod(p) {
		w.evicted[p.UID] = eviction{
			pod: p.Name, node: p.Spec.NodeName, created: p.CreationTimestamp.Time, at: time.Now(),
			afterScaleDown: !w.scaledAt.IsZero(),
		}
		return
	}
	if _, seen := w.evicted[p.UID]; deleted && !seen {
		w.deletedUnevicted[p.Labels[DeploymentLabel]]++
	}
}

// evictedPod reports whether the Eviction API evicted the pod.
func evictedPod(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == evictedReason {
			return true
		}
	}
	return false
}

func (w *scaleDownWatch) nodeClaim(o any, deleted bool) {
	nc, ok := unwrap(o).(*karpv1.NodeClaim)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	after := !w.scaledAt.IsZero()
	if !w.claims[nc.Name] {
		w.claims[nc.Name] = true
		if after {
			w.created++
			w.lastChange = time.Now()
		}
	}
	if (deleted || nc.DeletionTimestamp != nil) && !w.deleting[nc.Name] {
		w.deleting[nc.Name] = true
		if after {
			w.deleted++
			w.lastChange = time.Now()
		}
	}
	if deleted && after {
		w.lastChange = time.Now()
	}
}

func (w *scaleDownWatch) pdb(o any) {
	pdb, ok := unwrap(o).(*policyv1.PodDisruptionBudget)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := pdb.Status
	current := s.ObservedGeneration == pdb.Generation
	// Each budget is named after its Deployment.
	name := pdb.Name
	w.met[name] = current && s.CurrentHealthy >= s.DesiredHealthy
	if !w.armed[name] {
		w.armed[name] = w.met[name] && w.ran[name]
		return
	}
	if !current || w.met[name] {
		return
	}
	w.violations++
	if len(w.violationExamples) < maxViolationExamples {
		w.violationExamples = append(w.violationExamples, fmt.Sprintf("%s %s: %d healthy, %d desired",
			time.Now().Format(time.TimeOnly), pdb.Name, s.CurrentHealthy, s.DesiredHealthy))
	}
}

// startScaleDown marks the start of the scale-down and returns its time.
func (w *scaleDownWatch) startScaleDown() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scaledAt = time.Now()
	w.lastChange = w.scaledAt
	return w.scaledAt
}

// changed marks a change: the quiet period starts again.
func (w *scaleDownWatch) changed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastChange = time.Now()
}

// convergence is the state the convergence check reads.
type convergence struct {
	// running and pending count the live pods (not being deleted) that run and wait.
	running, pending, live int
	// short counts the Deployments with fewer pods running than they want, over those
	// with more live pods than they want.
	short, over int
	// claims counts NodeClaims, terminating those being deleted.
	claims, terminating int
	lastChange          time.Time
}

func (c convergence) converged(want int, quiet time.Duration) bool {
	return c.running == want && c.live == want && c.pending == 0 && c.short == 0 && c.terminating == 0 &&
		time.Since(c.lastChange) >= quiet
}

func (c convergence) String() string {
	return fmt.Sprintf("%d pods running, %d pending, %d Deployments short of pods, %d NodeClaims (%d terminating), last NodeClaim change %s ago",
		c.running, c.pending, c.short, c.claims, c.terminating, time.Since(c.lastChange).Round(time.Second))
}

func (w *scaleDownWatch) state(ctx context.Context) (convergence, error) {
	pods := &corev1.PodList{}
	if err := w.cache.List(ctx, pods); err != nil {
		return convergence{}, err
	}
	claims := &karpv1.NodeClaimList{}
	if err := w.cache.List(ctx, claims); err != nil {
		return convergence{}, err
	}
	var s convergence
	running, live := map[string]int{}, map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		s.live++
		live[p.Labels[DeploymentLabel]]++
		switch p.Status.Phase {
		case corev1.PodRunning:
			s.running++
			running[p.Labels[DeploymentLabel]]++
		case corev1.PodPending:
			s.pending++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	want := w.from
	if !w.scaledAt.IsZero() {
		want = w.to
	}
	for d, n := range want {
		if running[d] < n {
			s.short++
		} else {
			w.ran[d] = true
			w.armed[d] = w.armed[d] || w.met[d]
		}
		if live[d] > n {
			s.over++
		}
	}
	s.claims = len(claims.Items)
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil {
			s.terminating++
		}
	}
	s.lastChange = w.lastChange
	return s, nil
}

// maxPendingShown bounds the pending pods described.
const maxPendingShown = 10

// pendingPods describes a few pending pods and why the scheduler left them pending.
func (w *scaleDownWatch) pendingPods(ctx context.Context) []string {
	return pendingPods(ctx, w.cache)
}

// pendingPods describes a few of the pending pods a reader holds and why the scheduler left
// them pending.
func pendingPods(ctx context.Context, r client.Reader) []string {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods); err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil || len(out) == maxPendingShown {
			continue
		}
		why := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				why = c.Message
			}
		}
		out = append(out, fmt.Sprintf("%s, created %s: %s", p.Name, p.CreationTimestamp.Format(time.TimeOnly), why))
	}
	return out
}

// describe renders pending pods after a message; "" when there are none.
func describe(pending []string) string {
	if len(pending) == 0 {
		return ""
	}
	return ", among them:\n  " + strings.Join(pending, "\n  ") + "\n"
}

// record copies what the watch counted into the result.
func (w *scaleDownWatch) record(r *ScaleDownResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var twice []eviction
	for _, e := range w.evicted {
		if !e.afterScaleDown {
			r.EvictionsBefore++
			continue
		}
		r.Evictions++
		if !e.created.Before(w.scaledAt.Truncate(time.Second)) {
			r.EvictedTwice++
			twice = append(twice, e)
		}
	}
	slices.SortFunc(twice, func(a, b eviction) int { return a.at.Compare(b.at) })
	for _, e := range twice[:min(len(twice), maxViolationExamples)] {
		r.Twice = append(r.Twice, fmt.Sprintf("%s, created %s after the scale-down, evicted from %s %s after it",
			e.pod, e.created.Sub(w.scaledAt).Round(time.Second), e.node, e.at.Sub(w.scaledAt).Round(time.Second)))
	}
	for d, n := range w.deletedUnevicted {
		r.OtherDeletions += max(0, n-(w.from[d]-w.to[d]))
	}
	r.NodesDisrupted, r.NodeClaimsCreated = w.deleted, w.created
	r.PDBViolations, r.Violations = w.violations, append([]string(nil), w.violationExamples...)
}

// measureEnd reads the cost and the instances at the end, plans the pods afresh and checks
// that the planner's prices are the local endpoint's.
func (r *ScaleDownResult) measureEnd(ctx context.Context, kube client.Client, endpoint string, in packing.Input, keep func(i int) bool) error {
	live, err := liveInstances(ctx, endpoint)
	if err != nil {
		return err
	}
	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	nodePrices, unpriced := WholeNodePrices(live, claims.Items)
	r.NodesAfter, r.Unpriced = len(live), append(r.Unpriced, unpriced...)
	r.CostAfter = 0
	for _, p := range nodePrices {
		r.CostAfter += p
	}
	r.NodeClaims = len(claims.Items)
	claimed := map[string]bool{}
	for _, nc := range claims.Items {
		// A NodeClaim not launched yet has no provider ID, and no instance.
		id, _ := aws.InstanceIDOf(nc.Status.ProviderID)
		claimed[id] = true
		if !hasInstance(live, id) {
			r.ClaimsWithoutInstance = append(r.ClaimsWithoutInstance, nc.Name)
		}
	}
	prices := offeringPrices(in.NodePools)
	for _, i := range live {
		if !claimed[i.ID] {
			r.Orphans = append(r.Orphans, i.ID)
		}
		want, ok := prices[offeringKey(i.InstanceType, i.Zone, i.CapacityType)]
		if !ok || math.Abs(want-i.PricePerHour) > 1e-9 {
			r.PriceMismatches = append(r.PriceMismatches, fmt.Sprintf("%s (%s %s %s): $%.4f/hour on the endpoint, $%.4f/hour planned",
				i.ID, i.CapacityType, i.InstanceType, i.Zone, i.PricePerHour, want))
		}
	}
	var kept []*corev1.Pod
	for i, p := range in.Pods {
		if keep(i) {
			kept = append(kept, p)
		}
	}
	all, fresh := freshPlan(in, in.Pods), freshPlan(in, kept)
	r.FreshAll, r.FreshAllNodes = all.PricePerHour(), len(all.NewNodeClaims)
	r.FreshKept, r.FreshKeptNodes = fresh.PricePerHour(), len(fresh.NewNodeClaims)
	podZones, err := workloadPodsByZone(ctx, kube)
	if err != nil {
		return err
	}
	r.Zones = byZone(live, nodePrices, podZones, fresh.NewNodeClaims)
	return nil
}

// listWorkload lists the cluster's Nodes and the workload's pods.
func listWorkload(ctx context.Context, kube client.Client) (*corev1.NodeList, *corev1.PodList, error) {
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx, nodes); err != nil {
		return nil, nil, fmt.Errorf("listing Nodes: %w", err)
	}
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.InNamespace(metav1.NamespaceDefault), client.HasLabels{DeploymentLabel}); err != nil {
		return nil, nil, fmt.Errorf("listing the workload's pods: %w", err)
	}
	return nodes, pods, nil
}

// workloadPodsByZone counts the workload's running pods by the zone of their node.
func workloadPodsByZone(ctx context.Context, kube client.Client) (map[string]int, error) {
	nodes, pods, err := listWorkload(ctx, kube)
	if err != nil {
		return nil, err
	}
	zoneOf := map[string]string{}
	for _, n := range nodes.Items {
		zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[zoneOf[p.Spec.NodeName]]++
		}
	}
	return out, nil
}

// byZone sets the live nodes (priced whole, prices by instance ID) and pods beside the fresh
// plan, zone by zone.
func byZone(live []localaws.InstanceSummary, prices map[string]float64, pods map[string]int, fresh []packing.NewNodeClaim) []ZoneCost {
	zones := map[string]*ZoneCost{}
	zone := func(name string) *ZoneCost {
		if zones[name] == nil {
			zones[name] = &ZoneCost{Zone: name}
		}
		return zones[name]
	}
	for _, i := range live {
		z := zone(i.Zone)
		z.Cost += prices[i.ID]
		z.Nodes++
	}
	for name, n := range pods {
		zone(name).Pods += n
	}
	for _, nc := range fresh {
		z := zone(nc.Cheapest.Zone)
		z.Fresh += nc.Cheapest.Price
		z.FreshNodes++
		z.FreshPods += len(nc.Pods)
	}
	out := make([]ZoneCost, 0, len(zones))
	for _, z := range zones {
		out = append(out, *z)
	}
	slices.SortFunc(out, func(a, b ZoneCost) int { return strings.Compare(a.Zone, b.Zone) })
	return out
}

// freshPlan is the planner's plan of pods on an empty cluster with the workload's
// NodePools.
func freshPlan(in packing.Input, pods []*corev1.Pod) packing.Plan {
	return packing.Solve(packing.Input{Pods: pods, NodePools: in.NodePools, DaemonSets: in.DaemonSets})
}

func offeringKey(instanceType, zone, capacityType string) string {
	return instanceType + "/" + zone + "/" + capacityType
}

// offeringPrices are the planner's prices of every offering of the NodePools.
func offeringPrices(pools []packing.NodePool) map[string]float64 {
	out := map[string]float64{}
	for _, p := range pools {
		for _, it := range p.InstanceTypes {
			for _, o := range it.Offerings {
				out[offeringKey(it.Name, o.Zone, o.CapacityType)] = o.Price
			}
		}
	}
	return out
}

// liveInstances lists the pending and running instances of the local endpoint.
func liveInstances(ctx context.Context, endpoint string) ([]localaws.InstanceSummary, error) {
	all, err := instances(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	var out []localaws.InstanceSummary
	for _, i := range all {
		if i.State == "pending" || i.State == "running" {
			out = append(out, i)
		}
	}
	return out, nil
}

func hasInstance(instances []localaws.InstanceSummary, id string) bool {
	for _, i := range instances {
		if i.ID == id {
			return true
		}
	}
	return false
}

// PrintScaleDown prints the report of one scale-down, in one write (a test's log takes
// each write as a line).
func PrintScaleDown(w io.Writer, r *ScaleDownResult) {
	out := &bytes.Buffer{}
	defer func() { _, _ = w.Write(out.Bytes()) }()
	fmt.Fprintf(out, "\n%s, %d Deployments with a PodDisruptionBudget of maxUnavailable 1\n", describeWorkloads(r.Workloads), r.Deployments)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t"+format+"\n", append([]any{k}, args...)...)
	}
	if r.RunningBefore == r.From {
		row("provisioned", "%d pods running after %s", r.From, r.Provisioned.Round(time.Second))
	} else {
		row("provisioned", "%d of %d pods running after %s, the others stuck pending (below)", r.RunningBefore, r.From, r.Provisioned.Round(time.Second))
	}
	row("cost before", "$%.2f/hour on %d nodes (fresh plan of all pods: $%.2f/hour on %d nodes, ×%.3f)",
		r.CostBefore, r.NodesBefore, r.FreshAll, r.FreshAllNodes, ratio(r.CostBefore, r.FreshAll))
	row("consolidation", "on %s after the scale-down", r.Deleted.Round(time.Second))
	row("cost after", "$%.2f/hour on %d nodes", r.CostAfter, r.NodesAfter)
	row("fresh plan", "$%.2f/hour on %d nodes for the %d pods kept", r.FreshKept, r.FreshKeptNodes, r.To)
	row("after / fresh", "×%.3f (target ≤ 1.05)", r.Ratio())
	row("nodes disrupted", "%d (NodeClaims deleted after the scale-down)", r.NodesDisrupted)
	row("NodeClaims created", "%d (replacements)", r.NodeClaimsCreated)
	if rep := r.Report(); rep.EvictionsPerDollarSaved > 0 {
		row("evictions", "%d, %.0f per $1/hour saved", r.Evictions, rep.EvictionsPerDollarSaved)
	} else {
		row("evictions", "%d", r.Evictions)
	}
	row("evicted twice", "%d pods evicted more than once (target 0)", r.EvictedTwice)
	row("PDB violations", "%d (target 0)", r.PDBViolations)
	if r.EvictionsBefore > 0 {
		row("evicted before", "%d pods evicted before the scale-down", r.EvictionsBefore)
	}
	row("other deletions", "%d pods deleted neither by eviction nor by the scale-down", r.OtherDeletions)
	if r.Converged {
		row("converged", "in %s (the scale-down's last NodeClaim change, or consolidation on; then quiet for %s and two disruption passes that found nothing)", r.Converge.Round(time.Second), r.Quiet)
	} else {
		row("converged", "NO: last NodeClaim change %s after the scale-down", r.Converge.Round(time.Second))
	}
	row("end state", "%d/%d kept pods running, %d pending; %d NodeClaims, %d live instances",
		r.Running, r.To, r.Pending, r.NodeClaims, r.NodesAfter)
	row("orphans", "%d instances without a NodeClaim, %d NodeClaims without an instance", len(r.Orphans), len(r.ClaimsWithoutInstance))
	if len(r.PriceMismatches) == 0 {
		row("prices", "the endpoint's price of every live instance is the planner's")
	} else {
		row("prices", "%d live instances priced differently by the endpoint and the planner", len(r.PriceMismatches))
	}
	row("wall time", "%s", r.Wall.Round(time.Second))
	if len(r.Zones) > 0 {
		row("by zone", "after\t\t\tfresh plan")
	}
	for _, z := range r.Zones {
		row("  "+z.Zone, "$%.2f/hour\t%d nodes\t%d pods\t$%.2f/hour\t%d nodes\t%d pods",
			z.Cost, z.Nodes, z.Pods, z.Fresh, z.FreshNodes, z.FreshPods)
	}
	tw.Flush()
	for _, list := range []struct {
		what  string
		items []string
	}{
		{"pods stuck pending before the scale-down", r.Stuck},
		{"PDB violations", r.Violations},
		{"pods evicted twice (the first few)", r.Twice},
		{"orphaned instances", r.Orphans},
		{"NodeClaims without an instance", r.ClaimsWithoutInstance},
		{"price mismatches", r.PriceMismatches},
	} {
		if len(list.items) > 0 {
			fmt.Fprintf(out, "  %s:\n    %s\n", list.what, strings.Join(list.items, "\n    "))
		}
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// describeWorkloads renders the scale-down of each workload: "webmix 2000 → 500 pods (keep
// 1/4)", joined by " and ".
func describeWorkloads(ws []Workload) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%s %d → %d pods (keep %s)", w.Shape, w.Pods, w.Kept(), w.Keep)
	}
	return strings.Join(parts, " and ")
}

// readWorkloads generates each workload and reads them as one planner input: the pods in
// order, workload by workload, the NodePools of every workload (one of a name already read
// is left out) and their DaemonSets. keeps says, per pod of the input, whether the
// scale-down keeps it.
func readWorkloads(root string, ws []Workload) (paths []string, in packing.Input, keeps []bool, err error) {
	for _, w := range ws {
		path, err := workloads.Generate(root, w.Shape, w.Pods)
		if err != nil {
			return nil, packing.Input{}, nil, err
		}
		part, err := workloads.Read(path)
		if err != nil {
			return nil, packing.Input{}, nil, err
		}
		paths = append(paths, path)
		for i, p := range part.Pods {
			in.Pods = append(in.Pods, p)
			keeps = append(keeps, w.Keep.Keeps(i))
		}
		for _, np := range part.NodePools {
			if !slices.ContainsFunc(in.NodePools, func(o packing.NodePool) bool { return o.NodePool.Name == np.NodePool.Name }) {
				in.NodePools = append(in.NodePools, np)
			}
		}
		in.DaemonSets = append(in.DaemonSets, part.DaemonSets...)
	}
	return paths, in, keeps, nil
}
