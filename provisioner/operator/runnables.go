package operator

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/handoff"
)

// runnable is something else the manager runs: its name, for errors, whether it runs, and
// the runnable.
type runnable struct {
	name     string
	enabled  bool
	runnable manager.Runnable
}

// runnables are what the manager runs beside the controllers.
func (s *sidecar) runnables() []runnable {
	return []runnable{
		{"AWS provider's housekeeping", true, s.provider},
		// Every replica reads the catalog, so that readiness says it could plan.
		{"catalog load", true, alwaysRunnable(s.provider.LoadCatalog)},
		{"NodeOverlay check", !s.opts.FeatureGates.Enabled(GateNodeOverlay), manager.RunnableFunc(s.checkOverlays)},
		{"provisioning loop", true, manager.RunnableFunc(s.provision)},
		{"pod deletion cost steering", s.deletionCosts != nil, s.deletionCosts},
		// The API serves on every replica so the scheduler's sidecar always answers.
		{"gRPC server", true, alwaysRunnable(s.serve)},
	}
}

// addRunnables adds the enabled runnables to mgr; an error names the runnable.
func addRunnables(mgr ctrl.Manager, runnables []runnable) error {
	for _, r := range runnables {
		if !r.enabled {
			continue
		}
		if err := mgr.Add(r.runnable); err != nil {
			return fmt.Errorf("adding the %s: %w", r.name, err)
		}
	}
	return nil
}

// alwaysRunnable runs on every replica, leader or not.
type alwaysRunnable func(ctx context.Context) error

func (f alwaysRunnable) Start(ctx context.Context) error { return f(ctx) }
func (alwaysRunnable) NeedLeaderElection() bool          { return false }

// provision runs a provisioning pass per batch of pods until ctx ends.
func (s *sidecar) provision(ctx context.Context) error {
	// A new leader plans nothing before it knows every plan its predecessor made, or it
	// would plan those pods again.
	if err := s.nominations.SyncAll(ctx); err != nil {
		return err
	}
	if err := takeInCreatedPods(ctx, s.mgr, s.prov); err != nil {
		return err
	}
	for s.batches.Wait(ctx) {
		if err := s.prov.Provision(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "provisioning failed; the pods will be submitted again")
		}
	}
	return nil
}

// serve serves the gRPC API the scheduler plugin hands pods off through, once the caches
// have synced.
func (s *sidecar) serve(ctx context.Context) error {
	if !s.mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("caches did not sync")
	}
	return handoff.Serve(ctx, s.opts.SocketPath, handoff.NewServer(s.prov, s.tracker, handoff.Options{MaxQueuedPods: s.opts.MaxQueuedPods}))
}

// checkOverlays reports NodeOverlays the NodeOverlay feature gate being off ignores.
func (s *sidecar) checkOverlays(ctx context.Context) error {
	reportIgnoredOverlays(ctx, s.mgr.GetAPIReader())
	return nil
}

// reportIgnoredOverlays logs, once, that NodeOverlays exist but the NodeOverlay feature gate
// is off, so they change nothing.
func reportIgnoredOverlays(ctx context.Context, reader client.Reader) {
	logger := klog.FromContext(ctx)
	list := &karpv1alpha1.NodeOverlayList{}
	if err := reader.List(ctx, list, client.Limit(1)); err != nil {
		// No CRD installed or no permission: then there are no overlays to ignore either.
		logger.V(1).Info("could not list NodeOverlays", "err", err)
		return
	}
	if len(list.Items) > 0 {
		logger.Info("ignoring NodeOverlays: the NodeOverlay feature gate is off (--feature-gates=NodeOverlay=true applies them)", "nodeOverlay", list.Items[0].Name)
	}
}
