// Package operator assembles the provisioner sidecar: the Kubernetes manager and its
// caches, the AWS provider, the controllers, the provisioning loop and the gRPC server the
// scheduler plugin talks to.
//
// Its settings are in options.go and flags.go; manager.go builds the manager (caches, leader
// election, health), provider.go the cloud provider, controllers.go lists the controllers,
// runnables.go what else the manager runs, and watches.go and metrics.go what the
// informers feed.
package operator

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/tailor-autoscaler/tailor/provisioner/batcher"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/measured"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/provisioner/quota"
)

// Run starts the sidecar and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	clk := clock.RealClock{}
	cfg, leaseCfg := rateLimited(cfg, opts)
	mgr, err := newManager(ctx, cfg, leaseCfg, opts, clk)
	if err != nil {
		return err
	}
	s, err := newSidecar(ctx, cfg, mgr, opts, clk)
	if err != nil {
		return err
	}
	if unbuilt := opts.FeatureGates.Unbuilt(); len(unbuilt) > 0 {
		logger.Info("feature gates enabled that Tailor does not build; they change nothing", "gates", unbuilt)
	}
	if err := registerControllers(mgr, s.controllers()); err != nil {
		return err
	}
	if err := replanOnNodePoolChanges(ctx, mgr, s.prov); err != nil {
		return err
	}
	if err := forgetBoundPods(ctx, mgr, s.prov, clk); err != nil {
		return err
	}
	if err := clusterMetrics(ctx, mgr, clk); err != nil {
		return err
	}
	if err := addRunnables(mgr, s.runnables()); err != nil {
		return err
	}
	if err := addHealthChecks(mgr, s.provider.CatalogReady); err != nil {
		return err
	}
	logger.Info("starting provisioner", "cluster", opts.ClusterName, "socket", opts.SocketPath)
	return mgr.Start(ctx)
}

// sidecar is what Run composes: the manager and the parts its controllers and runnables
// share.
type sidecar struct {
	opts     Options
	mgr      ctrl.Manager
	clk      clock.WithTickerAndDelayedExecution
	recorder record.EventRecorder
	// kube is the clientset drains evict with.
	kube kubernetes.Interface
	// provider is the AWS provider; sqs, of its SDK configuration, reads the interruption
	// queue.
	provider *aws.Provider
	sqs      *sqs.Client
	tracker  *nomination.Tracker
	batches  *batcher.Batcher
	// prov plans and launches capacity for the pods the scheduler hands off.
	prov        *provisioning.Provisioner
	disruptions *disruption.Controller
	nominations *nomination.Controller
	// deletionCosts steers scale-downs by the disruption controller's ranking; nil when
	// --pod-deletion-cost-schedulers is empty.
	deletionCosts *deletioncost.Steerer
}

// newSidecar builds the provider, the provisioner and the controllers others depend on.
func newSidecar(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, opts Options, clk clock.WithTickerAndDelayedExecution) (*sidecar, error) {
	overlays := overlay.ClientLister{Reader: mgr.GetClient()}
	provider, sqsClient, err := newProvider(ctx, cfg, mgr, opts, clk, overlays)
	if err != nil {
		return nil, err
	}
	s := &sidecar{opts: opts, mgr: mgr, clk: clk, recorder: mgr.GetEventRecorderFor("tailor-provisioner"), provider: provider, sqs: sqsClient, tracker: nomination.NewTracker(clk)}
	if s.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	if s.batches, err = batcher.New(batcher.Options{Idle: opts.BatchIdle, Max: opts.BatchMax, Clock: clk}); err != nil {
		return nil, err
	}
	planned, err := plannedProvider(ctx, mgr, provider, overlays, opts)
	if err != nil {
		return nil, err
	}
	launches, err := launchlimit.New(opts.launchLimit(clk))
	if err != nil {
		return nil, err
	}
	s.prov = provisioning.New(mgr.GetClient(), measured.New(planned, metrics.ControllerProvisioner), s.tracker, s.batches, s.recorder, provisioning.Options{
		Clock: clk, Launches: launches, ReplanWindow: opts.ReplanWindow, EarlyIntake: opts.EarlyIntake, MinValuesPolicy: packing.MinValuesPolicy(opts.MinValuesPolicy),
		Gangs: gang.PodGroups{Client: mgr.GetAPIReader()}, Quotas: elasticQuotas(opts, mgr), StaticCapacity: opts.FeatureGates.Enabled(GateStaticCapacity),
	})
	disruptionOpts := opts.disruption()
	if len(opts.DeletionCostSchedulers) > 0 {
		s.deletionCosts = deletioncost.New(mgr.GetClient(), deletioncost.Options{Schedulers: opts.DeletionCostSchedulers, QPS: float32(opts.DeletionCostQPS), Clock: clk})
		disruptionOpts.DeletionCosts = s.deletionCosts
	}
	s.disruptions = disruption.NewController(mgr.GetClient(), mgr.GetAPIReader(), s.prov, s.prov, s.tracker, s.recorder, clk, disruptionOpts)
	s.nominations = nomination.NewController(mgr.GetClient(), s.tracker, s.recorder)
	return s, nil
}

// elasticQuotas reads ElasticQuotas when the scheduler admits pods by them, and nothing
// otherwise.
func elasticQuotas(opts Options, mgr ctrl.Manager) quota.Reader {
	if !opts.ElasticQuotas {
		return nil
	}
	return quota.ElasticQuotas{Client: mgr.GetAPIReader()}
}
