package disruption

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Event reasons.
const (
	// ReasonDisrupting: the NodeClaim is being taken away, and why.
	ReasonDisrupting = "Disrupting"
	// ReasonDisruptionAborted: a replacement failed, the NodeClaim stays.
	ReasonDisruptionAborted = "DisruptionAborted"
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
	// DeletionCosts, when set, is given each pass's ranking of the nodes, so that Deployment
	// scale-downs delete the pods of the nodes consolidation would empty first.
	DeletionCosts DeletionCosts
	// ReplacementReadyTimeout, when positive, bounds how long a copy of a pod replaced
	// before its eviction has to be Ready, in place of its Deployment's
	// progressDeadlineSeconds.
	ReplacementReadyTimeout time.Duration
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

// NeedLeaderElection returns true: only the leader disrupts.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("disruption")
	ctx = log.IntoContext(ctx, logger)
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
	if err := c.sweepCopies(ctx); err != nil {
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
	if c.opts.DeletionCosts != nil {
		c.opts.DeletionCosts.Steer(deletionCosts(cluster))
	}
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
