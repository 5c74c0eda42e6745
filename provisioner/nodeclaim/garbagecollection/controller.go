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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
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
	kube     client.Client
	cloud    CloudProvider
	recorder record.EventRecorder
	clock    clock.Clock
	opts     Options
}

var _ manager.LeaderElectionRunnable = (*Controller)(nil)

// NewController returns a Controller.
func NewController(kube client.Client, cloud CloudProvider, recorder record.EventRecorder, clk clock.Clock, opts Options) (*Controller, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.defaults()
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, cloud: cloud, recorder: recorder, clock: clk, opts: opts}, nil
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr manager.Manager) error { return mgr.Add(c) }

// NeedLeaderElection is true: one replica collects.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start collects every period until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("garbagecollection")
	ctx = log.IntoContext(ctx, logger)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.opts.Period):
		}
		if err := c.Collect(ctx); err != nil {
			logger.Error(err, "garbage collection failed; retrying next period")
		}
	}
}

// Collect runs one pass: orphaned instances, NodeClaims whose instance is gone, and NodeClaims
// past their launch or registration deadline.
func (c *Controller) Collect(ctx context.Context) error {
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	return errors.Join(c.terminateOrphans(ctx, instances, claims.Items), c.deleteStale(ctx, instances, claims.Items))
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
	for _, inst := range instances {
		if owned[inst.Status.ProviderID] || (inst.Name != "" && launching[inst.Name]) {
			continue
		}
		age := c.clock.Since(inst.CreationTimestamp.Time)
		if age < c.opts.OrphanGrace {
			continue
		}
		err := c.cloud.Delete(ctx, inst)
		if cloudprovider.IgnoreNodeClaimNotFoundError(err) != nil {
			errs = append(errs, fmt.Errorf("terminating orphaned instance %s: %w", inst.Status.ProviderID, err))
			continue
		}
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
	if !live[nc.Status.ProviderID] {
		// The list may predate the launch: only the instance itself says it is gone.
		_, err := c.cloud.Get(ctx, nc.Status.ProviderID)
		if cloudprovider.IsNodeClaimNotFoundError(err) {
			return ReasonInstanceGone, fmt.Sprintf("instance %s no longer exists: %v", nc.Status.ProviderID, err), nil
		}
		if err != nil {
			return "", "", fmt.Errorf("getting instance of NodeClaim %s: %w", nc.Name, err)
		}
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		return "", "", nil
	}
	launchedAt := nc.CreationTimestamp.Time
	if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched); cond != nil && cond.Status == metav1.ConditionTrue {
		launchedAt = cond.LastTransitionTime.Time
	}
	if age := c.clock.Since(launchedAt); age > c.opts.RegistrationTimeout {
		return ReasonRegistrationTimeout, fmt.Sprintf("instance %s launched %s ago has not registered a node (limit %s); its pods are planned again", nc.Status.ProviderID, age.Round(time.Second), c.opts.RegistrationTimeout), nil
	}
	return "", "", nil
}
