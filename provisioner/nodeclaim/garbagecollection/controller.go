// Package garbagecollection keeps instances and NodeClaims in step: it terminates instances
// of this cluster that no NodeClaim owns, deletes NodeClaims whose instance is gone, and
// deletes NodeClaims that were not launched or not registered in time, so that their pods
// are planned again on capacity that works.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
)

// Event reasons on NodeClaims the controller deletes.
const (
	ReasonInstanceGone        = "InstanceGone"
	ReasonLaunchTimeout       = "LaunchTimeout"
	ReasonRegistrationTimeout = "RegistrationTimeout"
)

// Defaults of Options.
const (
	DefaultPeriod              = 30 * time.Second
	DefaultOrphanGrace         = 30 * time.Second
	DefaultLaunchTimeout       = 5 * time.Minute
	DefaultRegistrationTimeout = 15 * time.Minute
)

var (
	// orphanedInstances is how many instances of this cluster the last pass found without a
	// NodeClaim, those still in their grace included: something launches behind Tailor's
	// back, or NodeClaims were lost.
	orphanedInstances = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tailor_garbagecollection_orphaned_instances",
		Help: "Instances tagged for this cluster that no NodeClaim owns, as the last garbage collection pass found them (those still within the orphan grace included).",
	})
	// orphansTerminated counts the orphaned instances garbage collection terminated.
	orphansTerminated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tailor_garbagecollection_orphaned_instances_terminated_total",
		Help: "Instances tagged for this cluster that no NodeClaim owned, terminated by garbage collection once past the orphan grace.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics garbage collection registers: what init registers, and what
// the metrics reference lists.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{orphanedInstances, orphansTerminated}
}

// CloudProvider is what garbage collection asks of the cloud.
type CloudProvider interface {
	// List returns the live instances of this cluster as NodeClaims, with their launch time as
	// creation timestamp and their owning NodeClaim's name, when tagged, as name.
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
	// Get returns a NodeClaimNotFoundError when the instance is gone or terminated.
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
	// Delete terminates the instance of status.providerID.
	Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error
}

// Options configure the controller. Zero values mean the defaults.
type Options struct {
	// Period is how often the controller looks.
	Period time.Duration
	// OrphanGrace is how long an instance may run with no NodeClaim before it is terminated;
	// it covers the moment between a launch and the NodeClaim recording its instance.
	OrphanGrace time.Duration
	// LaunchTimeout is how long a NodeClaim may stay unlaunched.
	LaunchTimeout time.Duration
	// RegistrationTimeout is how long a launched NodeClaim may wait for its node.
	RegistrationTimeout time.Duration
}

func (o *Options) defaults() {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.Period, DefaultPeriod}, {&o.OrphanGrace, DefaultOrphanGrace}, {&o.LaunchTimeout, DefaultLaunchTimeout}, {&o.RegistrationTimeout, DefaultRegistrationTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"period": o.Period, "orphan grace": o.OrphanGrace, "launch timeout": o.LaunchTimeout, "registration timeout": o.RegistrationTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("garbage collection %s must not be negative, got %s", name, d))
		}
	}
	return errors.Join(errs...)
}

// Controller collects orphaned instances and NodeClaims. It runs on the elected leader only.
type Controller struct {
	kube client.Client
	// api reads the API server itself, for what the cache may not show yet.
	api      client.Reader
	cloud    CloudProvider
	recorder record.EventRecorder
	clock    clock.Clock
	opts     Options
	// passes space out the passes while the NodeClaims or instances cannot be listed.
	passes *backoff.Failures
	// failures space out the attempts on an instance that cannot be terminated or a
	// NodeClaim whose instance cannot be looked up, by instanceKey and claimKey.
	failures *backoff.Failures
}

var _ manager.LeaderElectionRunnable = (*Controller)(nil)

// NewController returns a Controller. kube reads through the cache; api reads the API
// server without one (a manager's APIReader).
func NewController(kube client.Client, api client.Reader, cloud CloudProvider, recorder record.EventRecorder, clk clock.Clock, opts Options) (*Controller, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.defaults()
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{
		kube: kube, api: api, cloud: cloud, recorder: recorder, clock: clk, opts: opts,
		passes:   backoff.New(clk, opts.Period, max(opts.Period, backoff.DefaultMax)),
		failures: backoff.New(clk, backoff.DefaultInitial, backoff.DefaultMax),
	}, nil
}

// Keys of Controller.failures.
func instanceKey(providerID string) string { return "instance/" + providerID }
func claimKey(name string) string          { return "nodeclaim/" + name }

// Register adds the controller to the manager.
func (c *Controller) Register(mgr manager.Manager) error { return mgr.Add(c) }

// NeedLeaderElection is true: one replica collects.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start collects every period until ctx ends. While NodeClaims or instances cannot be
// listed, the wait before the next pass doubles, up to five minutes.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("garbagecollection")
	ctx = log.IntoContext(ctx, logger)
	wait := c.opts.Period
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(wait):
		}
		wait = c.opts.Period
		listed, err := c.collect(ctx)
		if !listed {
			wait = c.passes.Failed("", "")
		} else {
			c.passes.Forget("")
		}
		if err != nil {
			logger.Error(err, "garbage collection failed", "retryIn", wait.String())
		}
	}
}

// Collect runs one pass: orphaned instances, NodeClaims whose instance is gone, and NodeClaims
// past their launch or registration deadline. An instance or NodeClaim whose handling failed
// is left out of the passes until its wait (5 s doubling to 5 min) has passed.
func (c *Controller) Collect(ctx context.Context) error {
	_, err := c.collect(ctx)
	return err
}

// collect runs one pass and reports whether it could list NodeClaims and instances.
func (c *Controller) collect(ctx context.Context) (bool, error) {
	claims := &karpv1.NodeClaimList{}
	// The cache's own objects, not copies of every NodeClaim at each pass: a pass reads them
	// and deletes some, which does not change them.
	if err := c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing NodeClaims: %w", err)
	}
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return false, fmt.Errorf("listing instances: %w", err)
	}
	known := map[string]bool{}
	for _, inst := range instances {
		known[instanceKey(inst.Status.ProviderID)] = true
	}
	for i := range claims.Items {
		known[claimKey(claims.Items[i].Name)] = true
	}
	c.failures.Retain(func(key string) bool { return known[key] })
	return true, errors.Join(c.terminateOrphans(ctx, instances, claims.Items), c.deleteStale(ctx, instances, claims.Items))
}

// terminateOrphans terminates instances no NodeClaim owns that are older than the grace.
// An instance whose tagged NodeClaim exists but has not recorded an instance yet is being
// launched, and is left to it.
func (c *Controller) terminateOrphans(ctx context.Context, instances []*karpv1.NodeClaim, claims []karpv1.NodeClaim) error {
	logger := log.FromContext(ctx)
	owned := map[string]bool{}
	launching := map[string]bool{}
	for i := range claims {
		if id := claims[i].Status.ProviderID; id != "" {
			owned[id] = true
		} else {
			launching[claims[i].Name] = true
		}
	}
	var errs []error
	orphans := 0
	defer func() { orphanedInstances.Set(float64(orphans)) }()
	for _, inst := range instances {
		if owned[inst.Status.ProviderID] || (inst.Name != "" && launching[inst.Name]) {
			continue
		}
		orphans++
		age := c.clock.Since(inst.CreationTimestamp.Time)
		key := instanceKey(inst.Status.ProviderID)
		if age < c.opts.OrphanGrace || c.failures.Wait(key, "") > 0 {
			continue
		}
		err := c.cloud.Delete(ctx, inst)
		if cloudprovider.IgnoreNodeClaimNotFoundError(err) != nil {
			wait := c.failures.Failed(key, "")
			errs = append(errs, fmt.Errorf("terminating orphaned instance %s (next attempt in %s): %w", inst.Status.ProviderID, wait, err))
			continue
		}
		c.failures.Forget(key)
		orphansTerminated.Inc()
		logger.Info("terminated instance without a NodeClaim", "providerID", inst.Status.ProviderID, "nodeClaim", inst.Name, "age", age.Round(time.Second).String())
	}
	return errors.Join(errs...)
}

// deleteStale deletes NodeClaims whose instance is gone and those past their launch or
// registration deadline. Their termination releases them and withdraws their pods' plans.
func (c *Controller) deleteStale(ctx context.Context, instances []*karpv1.NodeClaim, claims []karpv1.NodeClaim) error {
	live := map[string]bool{}
	for _, inst := range instances {
		live[inst.Status.ProviderID] = true
	}
	var errs []error
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		reason, message, err := c.staleness(ctx, nc, live)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if reason == "" {
			continue
		}
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting NodeClaim %s: %w", nc.Name, err))
			continue
		}
		c.recorder.Event(nc, corev1.EventTypeWarning, reason, message)
		log.FromContext(ctx).Info("deleted NodeClaim", "nodeClaim", klog.KObj(nc), "reason", reason, "message", message)
	}
	return errors.Join(errs...)
}

// staleness returns why the NodeClaim must go, or "" when it may stay.
func (c *Controller) staleness(ctx context.Context, nc *karpv1.NodeClaim, live map[string]bool) (reason, message string, err error) {
	if nc.Status.ProviderID == "" {
		if age := c.clock.Since(nc.CreationTimestamp.Time); age > c.opts.LaunchTimeout {
			return ReasonLaunchTimeout, fmt.Sprintf("not launched %s after creation (limit %s); its pods are planned again", age.Round(time.Second), c.opts.LaunchTimeout), nil
		}
		return "", "", nil
	}
	if key := claimKey(nc.Name); !live[nc.Status.ProviderID] && c.failures.Wait(key, string(nc.UID)) == 0 {
		// The list may predate the launch: only the instance itself says it is gone.
		_, err := c.cloud.Get(ctx, nc.Status.ProviderID)
		if cloudprovider.IsNodeClaimNotFoundError(err) {
			c.failures.Forget(key)
			return ReasonInstanceGone, fmt.Sprintf("instance %s no longer exists: %s", nc.Status.ProviderID, cloudprovider.Message(err)), nil
		}
		if err != nil {
			wait := c.failures.Failed(key, string(nc.UID))
			return "", "", fmt.Errorf("getting instance of NodeClaim %s (next attempt in %s): %w", nc.Name, wait, err)
		}
		c.failures.Forget(key)
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		return "", "", nil
	}
	launchedAt := nc.CreationTimestamp.Time
	if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched); cond != nil && cond.Status == metav1.ConditionTrue {
		launchedAt = cond.LastTransitionTime.Time
	}
	if age := c.clock.Since(launchedAt); age > c.opts.RegistrationTimeout {
		// The node may have joined while the cache lagged the API server (after an
		// outage), with its registration not recorded yet: a node that joined is no
		// registration failure, and its pods may already run there.
		node, err := nodeclaim.LiveNodeOf(ctx, c.kube, c.api, nc)
		if err != nil {
			return "", "", fmt.Errorf("looking for the node of NodeClaim %s: %w", nc.Name, err)
		}
		if node != nil {
			log.FromContext(ctx).V(1).Info("node joined, its registration not recorded yet", "nodeClaim", klog.KObj(nc), "node", node.Name)
			return "", "", nil
		}
		return ReasonRegistrationTimeout, fmt.Sprintf("instance %s launched %s ago has not registered a node (limit %s); its pods are planned again", nc.Status.ProviderID, age.Round(time.Second), c.opts.RegistrationTimeout), nil
	}
	return "", "", nil
}
