package disruption

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

// PlannedTaint marks the nodes a consolidation plan takes away in later passes. Being
// PreferNoSchedule, it keeps the pods that replace evicted ones off them where other nodes
// fit, so those pods are not moved again when the rest of the plan goes.
var PlannedTaint = corev1.Taint{Key: "tailor.sh/consolidation-planned", Effect: corev1.TaintEffectPreferNoSchedule}

// CordonedAnnotationKey on a Node says that a disruption decision cordoned it, and when
// (RFC 3339). The decision itself lives in its leader's memory: a leader that finds the mark
// on a node whose NodeClaim is not being deleted, outside its own decision under way, lifts
// the cordon, since the decision was lost with a predecessor or failed half-way.
const CordonedAnnotationKey = "tailor.sh/disruption-cordoned"

// Event reasons.
const (
	// ReasonDisrupting: the NodeClaim is being taken away, and why.
	ReasonDisrupting = "Disrupting"
	// ReasonDisruptionAborted: a replacement failed, the NodeClaim stays.
	ReasonDisruptionAborted = "DisruptionAborted"
)

// ReasonInterrupted is the reason of capacity launched ahead of an interruption's drain.
const ReasonInterrupted karpv1.DisruptionReason = "Interrupted"

var (
	decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "decisions_total",
		Help: "Disruption decisions carried out, by reason (Drifted, Empty, Underutilized) and action (delete, replace).",
	}, []string{"reason", "action"})
	savingsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "savings_dollars_per_hour_total",
		Help: "Hourly price saved by the disruption decisions that save, summed over decisions, by reason (a drifted node's replacement, or a group's replacements launched ahead of the rest of the group, may cost more than the nodes they take away).",
	}, []string{"reason"})
	passesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "passes_total",
		Help: "Disruption passes, by result: decided (a disruption began), idle (nothing to disrupt), busy (a disruption under way), failed.",
	}, []string{"result"})
	budgetBlockedCandidates = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "budget_blocked_candidates",
		Help: "Nodes the last disruption pass would disrupt for a reason (Drifted; Empty; Underutilized: consolidatable with pods) that their NodePool's disruption budgets allow none of now, by NodePool and reason.",
	}, []string{metrics.LabelNodePool, "reason"})
	decideSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "tailor", Subsystem: "disruption", Name: "decide_duration_seconds",
		Help:    "Time one pass took to decide the next disruption.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	})
)

// Pass results, the result label of tailor_disruption_passes_total.
const (
	PassDecided = "decided"
	PassIdle    = "idle"
	PassBusy    = "busy"
	PassFailed  = "failed"
	// PassPlanning weighed part of a consolidation plan; the next pass carries it on.
	PassPlanning = "planning"
)

// planningPause is the wait before a pass that carries on a plan: long enough for what
// waits for the controller (capacity launched ahead of an interruption) to go first.
const planningPause = 100 * time.Millisecond

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics disruption registers: what init registers, and what the
// metrics reference lists.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{decisionsTotal, savingsTotal, passesTotal, budgetBlockedCandidates, decideSeconds}
}

// ClusterReader is the planner's view of the whole cluster. Its objects are the cache's
// own: copy what you change.
type ClusterReader interface {
	ClusterInput(ctx context.Context) (packing.Input, error)
}

// Launcher creates replacement NodeClaims.
type Launcher interface {
	Launch(ctx context.Context, planned packing.NewNodeClaim, reason karpv1.DisruptionReason) (*karpv1.NodeClaim, error)
}

// Planned says which pods wait for a NodeClaim: its node must stay.
type Planned interface {
	PodsOf(nodeClaim string) []nomination.Pod
}

// ControllerOptions configure the controller.
type ControllerOptions struct {
	Options
	// Interval between passes.
	Interval time.Duration
	// MinNodeAge protects nodes launched less than this ago (a provisioning batch window):
	// pods planned onto them may still be on their way.
	MinNodeAge time.Duration
	// ReplacementTimeout abandons a replacement that has not initialized by then.
	ReplacementTimeout time.Duration
	// MovedPodsHold keeps consolidation off nodes holding pods it moved and off the
	// replacements it launched, for this long, so that no pod moves twice in a row and
	// replacements are not themselves replaced.
	MovedPodsHold time.Duration
	// LeaderElection says replicas take turns leading, so that pods created before this
	// controller led may have been moved by the one that led before. Without it the
	// controller leads from its construction, as the process starts: a pod created after
	// that was moved by no one else, even when it is created before the controller's first
	// pass (the process is ready before its caches have synced).
	LeaderElection bool
	// StaticCapacity (the feature gate) leaves the nodes of static NodePools
	// (spec.replicas) out of consolidation and launches no replacement in them: their
	// controller keeps their count. Drift and expiry still replace their nodes.
	StaticCapacity bool
}

// Controller disrupts nodes, one decision at a time, while it leads.
type Controller struct {
	kube client.Client
	// api reads the API server itself, past the cache, to confirm what the cache shows
	// before acting on it.
	api      client.Reader
	cluster  ClusterReader
	launcher Launcher
	planned  Planned
	recorder record.EventRecorder
	clock    clock.Clock
	opts     ControllerOptions

	mu sync.Mutex
	// stable tracks, per node, a digest of its pods and since when it has not changed.
	stable map[string]stability
	// pending is a replacement under way: its originals go once the replacements are up.
	pending *command
	// rest are the nodes the consolidation plan under way takes away in later passes.
	rest map[string]bool
	// moved is, per controller (ReplicaSet, StatefulSet, ...) whose pods consolidation
	// evicted, when: the pods it creates after the first eviction are the moved pods,
	// which stay put until MovedPodsHold has passed since the last.
	moved map[types.UID]moves
	// replacements are the NodeClaims disruption launched, and when: they hold moved
	// pods (or were launched for them) and stay put for MovedPodsHold too.
	replacements map[string]time.Time
	// leadingSince is when this controller began to lead (Start, or its construction
	// without LeaderElection). moved and replacements
	// are in memory: a leader does not know what its predecessor moved, so it holds every
	// pod created before it led as if it had moved it, until the pod is MovedPodsHold old.
	leadingSince time.Time
	// deleting are the NodeClaims disruption deleted: until they are gone and their pods
	// have landed again, the cluster is in motion and no new decision is made.
	deleting map[string]bool
	// planner carries a consolidation plan across passes, opts.PassTime each.
	planner Planner
}

type stability struct {
	digest uint64
	since  time.Time
}

// command is a decision being carried out.
type command struct {
	decision     Decision
	replacements []string
	started      time.Time
}

// NewController returns a Controller.
func NewController(kube client.Client, api client.Reader, cluster ClusterReader, launcher Launcher, planned Planned, recorder record.EventRecorder, clk clock.Clock, opts ControllerOptions) *Controller {
	c := &Controller{kube: kube, api: api, cluster: cluster, launcher: launcher, planned: planned, recorder: recorder, clock: clk, opts: opts,
		stable: map[string]stability{}, moved: map[types.UID]moves{}, replacements: map[string]time.Time{},
		deleting: map[string]bool{}}
	if !opts.LeaderElection {
		c.leadingSince = clk.Now()
	}
	return c
}

// NeedLeaderElection: only the leader disrupts.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("disruption")
	c.mu.Lock()
	if c.opts.LeaderElection {
		c.leadingSince = c.clock.Now()
	}
	// A plan left from leading before was weighed on a view long gone.
	c.planner = Planner{}
	c.mu.Unlock()
	wait := c.opts.Interval
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(wait):
			if err := c.Pass(ctx); err != nil {
				logger.Error(err, "disruption pass failed")
			}
			wait = c.opts.Interval
			if c.planning() {
				wait = planningPause
			}
		}
	}
}

// planning reports whether a consolidation plan is under way, to carry on in the next pass.
func (c *Controller) planning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.planner.Planning()
}

// Pass finishes the replacement under way, or else decides and starts the next disruption.
func (c *Controller) Pass(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	result, err := c.pass(ctx)
	if err != nil {
		result = PassFailed
	}
	passesTotal.WithLabelValues(result).Inc()
	return err
}

func (c *Controller) pass(ctx context.Context) (string, error) {
	if c.pending != nil {
		return PassBusy, c.continuePending(ctx)
	}
	in, err := c.cluster.ClusterInput(ctx)
	if err != nil {
		return "", err
	}
	if err := c.releaseAbandoned(ctx, in.Nodes); err != nil {
		return "", err
	}
	if moving, err := c.inMotion(ctx, in); moving || err != nil {
		return PassBusy, err
	}
	if err := c.release(ctx, in.Nodes); err != nil {
		return "", err
	}
	cluster, budget, err := c.view(ctx, in)
	if err != nil {
		return "", err
	}
	reportBudgetBlocked(cluster.Candidates, budget)
	start := time.Now()
	d, ok := c.planner.Decide(cluster, budget, c.opts.Options)
	took := time.Since(start)
	decideSeconds.Observe(took.Seconds())
	recordPass(cluster, budget, d, ok, took)
	if ok && !c.unchanged(ctx, d.Originals) {
		log.FromContext(ctx).V(1).Info("pods moved while deciding; deciding again", "reason", d.Reason, "nodes", nodeNames(d.Originals))
		return PassBusy, nil
	}
	c.rest = map[string]bool{}
	for _, n := range d.Rest {
		c.rest[n] = true
	}
	if err := c.markPlanned(ctx, in.Nodes); err != nil {
		return "", err
	}
	switch {
	case ok:
		return PassDecided, c.execute(ctx, d)
	case c.planner.Planning():
		return PassPlanning, nil
	}
	return PassIdle, nil
}

// inMotion reports whether the last decisions are still under way: a NodeClaim they
// deleted is not gone yet, or a pod that replaces one they evicted waits for a node. A
// decision made now would see pods where they are not going to stay.
func (c *Controller) inMotion(ctx context.Context, in packing.Input) (bool, error) {
	for name := range c.deleting {
		err := c.kube.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodeClaim{})
		if client.IgnoreNotFound(err) != nil {
			return false, err
		}
		if err == nil {
			return true, nil
		}
		delete(c.deleting, name)
	}
	for _, p := range in.Pods {
		if c.wasMoved(p) {
			return true, nil
		}
	}
	return false, nil
}

// unchanged reports whether the originals still run the pods the decision moves: a
// decision takes long to make in a large cluster, and pods may have landed meanwhile.
func (c *Controller) unchanged(ctx context.Context, originals []Candidate) bool {
	in, err := c.cluster.ClusterInput(ctx)
	if err != nil {
		return false
	}
	now := map[string]map[types.UID]bool{}
	for _, n := range in.Nodes {
		uids := map[types.UID]bool{}
		for _, p := range n.Pods {
			if movable(p) {
				uids[p.UID] = true
			}
		}
		now[n.Node.Name] = uids
	}
	for _, o := range originals {
		if len(now[o.Node]) != len(o.Pods) {
			return false
		}
		for _, p := range o.Pods {
			if !now[o.Node][p.UID] {
				return false
			}
		}
	}
	return true
}

// markPlanned puts PlannedTaint on the nodes the plan takes later and lifts it from the
// others.
func (c *Controller) markPlanned(ctx context.Context, nodes []packing.Node) error {
	for _, n := range nodes {
		has := slices.ContainsFunc(n.Node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&PlannedTaint) })
		if want := c.rest[n.Node.Name]; has != want {
			err := c.withNode(ctx, n.Node.Name, func(ctx context.Context, kube client.Client, node *corev1.Node) error {
				return nodeclaim.SetTaint(ctx, kube, node, PlannedTaint, want)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// view turns the planner's input into candidates and budgets.
func (c *Controller) view(ctx context.Context, in packing.Input) (Cluster, Budget, error) {
	now := c.clock.Now()
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return Cluster{}, nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	total, disrupting := map[string]int{}, map[string]int{}
	for i := range claims.Items {
		pool := claims.Items[i].Labels[karpv1.NodePoolLabelKey]
		total[pool]++
		if claims.Items[i].DeletionTimestamp != nil {
			disrupting[pool]++
		}
	}
	pools := map[string]*packing.NodePool{}
	launchable := make([]packing.NodePool, 0, len(in.NodePools))
	for i := range in.NodePools {
		np := &in.NodePools[i]
		pools[np.NodePool.Name] = np
		if !c.static(np.NodePool) {
			launchable = append(launchable, *np)
		}
	}
	in.NodePools = launchable
	for owner, m := range c.moved {
		if now.Sub(m.last) >= c.opts.MovedPodsHold {
			delete(c.moved, owner)
		}
	}
	for name, at := range c.replacements {
		if now.Sub(at) >= c.opts.MovedPodsHold {
			delete(c.replacements, name)
		}
	}
	cluster := clusterOf(in)
	seen := map[string]bool{}
	for _, n := range in.Nodes {
		seen[n.Node.Name] = true
		cand, ok := c.candidate(n, pools, now)
		if ok {
			cluster.Candidates = append(cluster.Candidates, cand)
		}
	}
	for name := range c.stable {
		if !seen[name] {
			delete(c.stable, name)
		}
	}
	var budgetErr error
	budget := func(pool string, reason karpv1.DisruptionReason) int {
		np, ok := pools[pool]
		if !ok {
			return 0
		}
		n, err := Allowed(np.NodePool, reason, total[pool], disrupting[pool], now)
		if err != nil {
			budgetErr = errors.Join(budgetErr, err)
			return 0
		}
		return n
	}
	if budgetErr != nil {
		log.FromContext(ctx).Error(budgetErr, "reading disruption budgets; those NodePools are not disrupted")
	}
	return cluster, budget, nil
}

// blockedKey is a NodePool and a disruption reason.
type blockedKey struct {
	nodePool string
	reason   karpv1.DisruptionReason
}

// budgetBlocked counts, per NodePool and reason, the candidates a pass would disrupt for
// that reason (drifted; empty; consolidatable with pods) and whether the NodePool's budgets
// allow any of them now: the count is 0 where they do.
func budgetBlocked(candidates []Candidate, budget Budget) map[blockedKey]int {
	out := map[blockedKey]int{}
	allowed := map[blockedKey]bool{}
	for _, cand := range candidates {
		var reason karpv1.DisruptionReason
		switch {
		case cand.Drifted:
			reason = karpv1.DisruptionReasonDrifted
		case cand.MayRemoveEmpty && len(cand.Pods) == 0:
			reason = karpv1.DisruptionReasonEmpty
		case cand.MayConsolidate && len(cand.Pods) > 0:
			reason = karpv1.DisruptionReasonUnderutilized
		default:
			continue
		}
		key := blockedKey{nodePool: cand.NodePool, reason: reason}
		ok, seen := allowed[key]
		if !seen {
			ok = budget(cand.NodePool, reason) > 0
			allowed[key] = ok
			out[key] = 0
		}
		if !ok {
			out[key]++
		}
	}
	return out
}

// reportBudgetBlocked publishes budgetBlocked as tailor_disruption_budget_blocked_candidates.
func reportBudgetBlocked(candidates []Candidate, budget Budget) {
	budgetBlockedCandidates.Reset()
	for key, n := range budgetBlocked(candidates, budget) {
		budgetBlockedCandidates.WithLabelValues(key.nodePool, string(key.reason)).Set(float64(n))
	}
}

// candidate decides whether a node may be disrupted at all, and how.
func (c *Controller) candidate(n packing.Node, pools map[string]*packing.NodePool, now time.Time) (Candidate, bool) {
	nc := n.NodeClaim
	if nc == nil || nc.DeletionTimestamp != nil || !nodeclaim.IsTrue(nc, karpv1.ConditionTypeInitialized) || !n.Schedulable {
		return Candidate{}, false
	}
	pool, ok := pools[nc.Labels[karpv1.NodePoolLabelKey]]
	if !ok || now.Sub(nc.CreationTimestamp.Time) < c.opts.MinNodeAge {
		return Candidate{}, false
	}
	if n.Node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" || len(c.planned.PodsOf(nc.Name)) > 0 {
		return Candidate{}, false
	}
	cand := Candidate{
		Node: n.Node.Name, NodeClaim: nc.Name, NodePool: pool.NodePool.Name,
		CapacityType: n.Node.Labels[karpv1.CapacityTypeLabelKey],
		Price:        offeringPrice(pool, n.Node.Labels),
		Drifted:      nodeclaim.IsTrue(nc, karpv1.ConditionTypeDrifted),
		Planned:      c.rest[n.Node.Name],
	}
	digest := fnv.New64a()
	_, holdsMoved := c.replacements[nc.Name]
	holdsGang := false
	for _, p := range n.Pods {
		if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			return Candidate{}, false
		}
		if movable(p) {
			cand.Pods = append(cand.Pods, p)
			_, _ = digest.Write([]byte(p.Namespace + "/" + p.Name + "/" + string(p.UID) + ";"))
			holdsMoved = holdsMoved || c.wasMoved(p)
			_, member := gang.KeyOf(p)
			holdsGang = holdsGang || member
		}
	}
	st, ok := c.stable[cand.Node]
	if !ok || st.digest != digest.Sum64() {
		st = stability{digest: digest.Sum64(), since: now}
		c.stable[cand.Node] = st
	}
	disruption := pool.NodePool.Spec.Disruption
	if after := disruption.ConsolidateAfter.Duration; after != nil && now.Sub(st.since) >= *after && !c.static(pool.NodePool) {
		cand.MayRemoveEmpty = true
		// A gang's members run together: moving one stops them all until it lands again,
		// so consolidation leaves their nodes alone.
		cand.MayConsolidate = disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty && !holdsMoved && !holdsGang
	}
	return cand, true
}

// static reports whether the NodePool keeps a fixed number of nodes, which consolidation
// leaves alone.
func (c *Controller) static(np *karpv1.NodePool) bool {
	return c.opts.StaticCapacity && np.IsStatic()
}

// moves are when consolidation first and last evicted pods of one controller.
type moves struct{ first, last time.Time }

// wasMoved reports whether a pod took the place of one consolidation evicted: its
// controller lost pods to consolidation before the pod was created. A later eviction does
// not make the pods created since the first any less moved.
func (c *Controller) wasMoved(p *corev1.Pod) bool {
	owner, ok := reservation.ControllerOf(p)
	if !ok {
		return false
	}
	if c.inherited(p) {
		return true
	}
	m, ok := c.moved[owner]
	return ok && !p.CreationTimestamp.Time.Before(m.first.Truncate(time.Second))
}

// inherited reports whether a pod was created before this controller led and is younger
// than MovedPodsHold: a predecessor may have moved it (found by the randomized fault
// trials: a sidecar killed just after a consolidation left its successor free to move the
// same pods again). Creation timestamps have whole seconds, so a pod created in the second
// the controller began to lead counts as created after: otherwise a pod created a moment
// after a single replica started would look older than it, and stay put for MovedPodsHold.
func (c *Controller) inherited(p *corev1.Pod) bool {
	created := p.CreationTimestamp.Time
	return !c.leadingSince.IsZero() && created.Before(c.leadingSince.Truncate(time.Second)) && c.clock.Since(created) < c.opts.MovedPodsHold
}

// movable reports whether a pod must find another node when its node goes: not a DaemonSet
// pod, not a mirror pod, not finished.
func movable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	return !nodeclaim.OwnedByDaemonSet(p)
}

// offeringPrice is the hourly price of a node of the offering a node runs on (its instance
// and its node costs: volumes, public IPv4, monitoring); zero when unknown. A node in a
// capacity reservation has its reservation's offering, priced next to nothing: consolidation
// keeps it rather than replace it.
func offeringPrice(pool *packing.NodePool, labels map[string]string) float64 {
	if o, ok := cloudprovider.OfferingOf(pool.InstanceTypes, labels); ok {
		return o.NodePrice()
	}
	return 0
}

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

// execute starts a decision: the originals are cordoned at once so nothing new lands on
// them; without replacements they are deleted now, otherwise once the replacements are up.
func (c *Controller) execute(ctx context.Context, d Decision) error {
	logger := log.FromContext(ctx)
	action := "delete"
	if len(d.Replacements) > 0 {
		action = "replace"
	}
	for _, o := range d.Originals {
		if err := c.cordon(ctx, o.Node); err != nil {
			return err
		}
	}
	recordDecision(d, action)
	logger.Info("disrupting", "reason", d.Reason, "action", action, "nodes", nodeNames(d.Originals), "replacements", len(d.Replacements), "savingsPerHour", d.Savings)
	if len(d.Replacements) == 0 {
		return c.deleteOriginals(ctx, d, nil)
	}
	cmd := &command{decision: d, started: c.clock.Now()}
	for _, r := range d.Replacements {
		nc, err := c.launcher.Launch(ctx, r, d.Reason)
		if err != nil {
			c.pending = cmd
			return c.abort(ctx, fmt.Sprintf("launching a replacement failed: %v", err))
		}
		cmd.replacements = append(cmd.replacements, nc.Name)
		c.replacements[nc.Name] = c.clock.Now()
	}
	// The rest of the plan moves pods onto these replacements too.
	c.planner.Launched(d, cmd.replacements)
	c.pending = cmd
	return nil
}

// continuePending deletes the originals once every replacement is initialized, and gives
// up when one is gone or too slow.
func (c *Controller) continuePending(ctx context.Context) error {
	cmd := c.pending
	var nodes []string
	for _, name := range cmd.replacements {
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return c.abort(ctx, fmt.Sprintf("replacement %s is gone", name))
			}
			return err
		}
		if nc.DeletionTimestamp != nil {
			return c.abort(ctx, fmt.Sprintf("replacement %s is being deleted", name))
		}
		if !nodeclaim.IsTrue(nc, karpv1.ConditionTypeInitialized) {
			if c.clock.Since(cmd.started) > c.opts.ReplacementTimeout {
				return c.abort(ctx, fmt.Sprintf("replacement %s did not initialize within %s", name, c.opts.ReplacementTimeout))
			}
			return nil
		}
		nodes = append(nodes, nc.Status.NodeName)
	}
	if why := c.revalidate(ctx, cmd.decision.Originals); why != "" {
		return c.abort(ctx, why)
	}
	c.pending = nil
	return c.deleteOriginals(ctx, cmd.decision, nodes)
}

// revalidate checks, just before the originals go, what may have changed while their
// replacements came up: a do-not-disrupt annotation on a node or one of its pods, or pods
// planned onto one of them. It returns why they must stay, or "".
func (c *Controller) revalidate(ctx context.Context, originals []Candidate) string {
	for _, o := range originals {
		if len(c.planned.PodsOf(o.NodeClaim)) > 0 {
			return fmt.Sprintf("pods were planned onto node %s meanwhile", o.Node)
		}
		node := &corev1.Node{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: o.Node}, node); err == nil && node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			return fmt.Sprintf("node %s is marked %s", o.Node, karpv1.DoNotDisruptAnnotationKey)
		}
		pods := &corev1.PodList{}
		if err := c.kube.List(ctx, pods, client.MatchingFields{nodeclaim.PodNodeNameIndex: o.Node}); err != nil {
			return fmt.Sprintf("listing the pods of node %s: %v", o.Node, err)
		}
		for _, p := range pods.Items {
			if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" && movable(&p) {
				return fmt.Sprintf("pod %s/%s on node %s is marked %s", p.Namespace, p.Name, o.Node, karpv1.DoNotDisruptAnnotationKey)
			}
		}
	}
	return ""
}

// abort lifts the cordon of the originals; the replacements left, if any, are empty nodes
// emptiness removes later.
func (c *Controller) abort(ctx context.Context, why string) error {
	cmd := c.pending
	c.pending = nil
	for _, o := range cmd.decision.Originals {
		if err := c.uncordon(ctx, o.Node); err != nil {
			return err
		}
		c.event(ctx, o.NodeClaim, corev1.EventTypeWarning, ReasonDisruptionAborted, why)
	}
	log.FromContext(ctx).Info("disruption aborted", "reason", why, "nodes", nodeNames(cmd.decision.Originals))
	return nil
}

// deleteOriginals deletes the NodeClaims of the originals: termination drains them. The
// nodes the pods move onto are reserved for them first (replacementNodes are the
// replacements' node names), and the controllers of the pods are remembered, so the pods
// they make up for the ones evicted are not moved again soon.
func (c *Controller) deleteOriginals(ctx context.Context, d Decision, replacementNodes []string) error {
	if d.Savings > 0 {
		savingsTotal.WithLabelValues(string(d.Reason)).Add(d.Savings)
	}
	if err := c.reserve(ctx, d, replacementNodes); err != nil {
		// Reservations only steer the moved pods; without them the pods still land.
		log.FromContext(ctx).Error(err, "reserving nodes for the pods moving onto them")
	}
	now := c.clock.Now()
	for _, o := range d.Originals {
		for _, p := range o.Pods {
			if owner, ok := reservation.ControllerOf(p); ok {
				m, ok := c.moved[owner]
				if !ok {
					m.first = now
				}
				m.last = now
				c.moved[owner] = m
			}
		}
	}
	for _, o := range d.Originals {
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: o.NodeClaim}, nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return err
		}
		c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonDisrupting, "%s: %s; %s", d.Reason, describe(d), describeSavings(d))
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodeClaim %s: %w", nc.Name, err)
		}
		c.deleting[nc.Name] = true
		metrics.NodeClaimDisrupted(nc, string(d.Reason), c.consolidationPolicy(ctx, d.Reason, o.NodePool))
	}
	return nil
}

// consolidationPolicy is the consolidation policy of the NodePool for the metrics of a
// consolidation, and empty for other reasons.
func (c *Controller) consolidationPolicy(ctx context.Context, reason karpv1.DisruptionReason, nodePool string) karpv1.ConsolidationPolicy {
	if reason == karpv1.DisruptionReasonDrifted {
		return ""
	}
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nodePool}, np); err != nil {
		return ""
	}
	return np.Spec.Disruption.ConsolidationPolicy
}

func (c *Controller) event(ctx context.Context, nodeClaim, kind, reason, msg string) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nodeClaim}, nc); err == nil {
		c.recorder.Event(nc, kind, reason, msg)
	}
}

// describe says what a decision does, for events.
func describe(d Decision) string {
	nodes := strings.Join(nodeNames(d.Originals), ", ")
	if len(d.Replacements) == 0 {
		return fmt.Sprintf("removing %s; its pods fit on other nodes", nodes)
	}
	types := make([]string, len(d.Replacements))
	for i, r := range d.Replacements {
		types[i] = r.Cheapest.CapacityType + " " + r.Cheapest.InstanceType
	}
	return fmt.Sprintf("replacing %s with %s", nodes, strings.Join(types, ", "))
}

// describeSavings says what a decision saves, or what it costs until the later decisions of
// its plan (the rest of a group whose replacements it launched ahead) make up for it.
func describeSavings(d Decision) string {
	if d.Savings < 0 {
		return fmt.Sprintf("costs $%.4f/hour more until the rest of the plan moves onto the replacements", -d.Savings)
	}
	return fmt.Sprintf("saves $%.4f/hour", d.Savings)
}

func nodeNames(cands []Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Node
	}
	sort.Strings(out)
	return out
}

// cordon taints a node for disruption and marks it CordonedAnnotationKey; uncordon lifts
// both.
func (c *Controller) cordon(ctx context.Context, name string) error {
	return c.withNode(ctx, name, func(ctx context.Context, kube client.Client, node *corev1.Node) error {
		return c.setCordon(ctx, kube, node, true)
	})
}

func (c *Controller) uncordon(ctx context.Context, name string) error {
	return c.withNode(ctx, name, func(ctx context.Context, kube client.Client, node *corev1.Node) error {
		return c.setCordon(ctx, kube, node, false)
	})
}

// setCordon puts the disruption taint and its mark on the node (on) or lifts them, in one
// patch, and only when that changes something.
func (c *Controller) setCordon(ctx context.Context, kube client.Client, node *corev1.Node, on bool) error {
	patch := client.MergeFrom(node.DeepCopy())
	changed := nodeclaim.WithTaint(node, karpv1.DisruptedNoScheduleTaint, on)
	if _, marked := node.Annotations[CordonedAnnotationKey]; marked != on {
		changed = true
		if on {
			metav1.SetMetaDataAnnotation(&node.ObjectMeta, CordonedAnnotationKey, c.clock.Now().UTC().Format(time.RFC3339))
		} else {
			delete(node.Annotations, CordonedAnnotationKey)
		}
	}
	if !changed {
		return nil
	}
	if err := kube.Patch(ctx, node, patch); client.IgnoreNotFound(err) != nil {
		verb := "cordoning"
		if !on {
			verb = "uncordoning"
		}
		return fmt.Errorf("%s node %s: %w", verb, node.Name, err)
	}
	return nil
}

func (c *Controller) withNode(ctx context.Context, name string, f func(context.Context, client.Client, *corev1.Node) error) error {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	return f(ctx, c.kube, node)
}

// releaseAbandoned lifts the cordons of decisions no longer under way: nodes marked
// CordonedAnnotationKey whose NodeClaims are not being deleted and expect no interruption.
// It runs while no decision of this leader is under way, so such a mark is a predecessor's,
// lost with it when it stopped, or this leader's own from a decision that failed half-way.
// Cordoned, those nodes would take no pods and, no longer schedulable, never be disrupted
// again. The sweep runs every pass, over the cache, and each release is confirmed on the
// API server first: after an outage a new leader's cache can show a predecessor's cordon
// tens of seconds late (found by the randomized fault trials, seed 5091: a leader cordoned
// a drifted node for its replacement and lost the lease after an API server restart; its
// successor, taking over 3 s later, looked once, did not see the cordon yet, and the node
// stayed drifted).
func (c *Controller) releaseAbandoned(ctx context.Context, nodes []packing.Node) error {
	for _, n := range nodes {
		if _, marked := n.Node.Annotations[CordonedAnnotationKey]; !marked || n.NodeClaim == nil || goingAnyway(n.NodeClaim) {
			continue
		}
		nc := &karpv1.NodeClaim{}
		if err := c.api.Get(ctx, client.ObjectKeyFromObject(n.NodeClaim), nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return fmt.Errorf("reading NodeClaim %s: %w", n.NodeClaim.Name, err)
		}
		if goingAnyway(nc) {
			continue
		}
		node := &corev1.Node{}
		if err := c.api.Get(ctx, client.ObjectKeyFromObject(n.Node), node); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return fmt.Errorf("reading node %s: %w", n.Node.Name, err)
		}
		if err := c.setCordon(ctx, c.kube, node, false); err != nil {
			return err
		}
		c.recorder.Event(nc, corev1.EventTypeWarning, ReasonDisruptionAborted, "the disruption that cordoned the node is no longer under way: the node takes pods again")
		log.FromContext(ctx).Info("released a node cordoned by a disruption no longer under way", "node", node.Name, "nodeClaim", nc.Name,
			"cordonedAt", n.Node.Annotations[CordonedAnnotationKey])
	}
	return nil
}

// goingAnyway reports whether a NodeClaim's node goes whatever disruption decides: the
// NodeClaim is being deleted, or its instance's interruption is announced.
func goingAnyway(nc *karpv1.NodeClaim) bool {
	return nc.DeletionTimestamp != nil || nc.Annotations[termination.InterruptionDeadlineAnnotationKey] != ""
}

// clusterOf is the cluster of a planner's input, without candidates.
func clusterOf(in packing.Input) Cluster {
	return Cluster{Nodes: in.Nodes, NodePools: in.NodePools, DaemonSets: in.DaemonSets, Volumes: in.Volumes, MinValuesPolicy: in.MinValuesPolicy}
}
