package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/informers"
	"github.com/tailor-autoscaler/tailor/provisioner/leader"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
)

// newManager builds the controller-runtime manager on cfg: its scheme and caches, its
// metrics and health endpoints and, with --leader-elect, leadership that follows the
// scheduler's Lease through leaseCfg. It registers the NodeClaim indexes and starts the
// informers of every kind planning reads.
func newManager(ctx context.Context, cfg, leaseCfg *rest.Config, opts Options, clk clock.PassiveClock) (ctrl.Manager, error) {
	// Shutdown waits for launches in flight to be recorded.
	shutdown := nodeclaim.LaunchTimeout + 10*time.Second
	mgrOpts := ctrl.Options{
		GracefulShutdownTimeout: &shutdown,
		Scheme:                  apischeme.New(),
		Cache:                   informers.CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.HealthAddr,
	}
	if opts.LeaderElect {
		if err := followScheduler(leaseCfg, opts, &mgrOpts, clk); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := nodeclaim.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := startInformers(ctx, mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// rateLimited returns the configuration of every client the sidecar builds, all sharing one
// limit of KubeAPIQPS requests a second and bursts of KubeAPIBurst, and that of its Lease
// client, with a limit of the same size of its own.
func rateLimited(cfg *rest.Config, opts Options) (clients, lease *rest.Config) {
	clients = rest.CopyConfig(cfg)
	clients.QPS, clients.Burst = float32(opts.KubeAPIQPS), opts.KubeAPIBurst
	lease = rest.CopyConfig(clients)
	lease.RateLimiter = nil
	clients.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(clients.QPS, clients.Burst)
	return clients, lease
}

// followScheduler makes the manager lead while the scheduler of this replica holds its Lease.
func followScheduler(cfg *rest.Config, opts Options, mgrOpts *ctrl.Options, clk clock.PassiveClock) error {
	if opts.LeaderElectionNamespace == "" || opts.SchedulerLeaseName == "" {
		return errors.New("--leader-elect needs --leader-election-namespace and --scheduler-lease-name: the namespace and name of the scheduler's Lease (leaderElection.resourceNamespace and resourceName of its configuration)")
	}
	replica, err := leader.Replica()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the Lease client: %w", err)
	}
	mgrOpts.LeaderElection = true
	mgrOpts.LeaderElectionResourceLockInterface = leader.NewLock(cs.CoordinationV1(), opts.LeaderElectionNamespace, opts.SchedulerLeaseName, replica, opts.RenewDeadline+opts.RetryPeriod, clk)
	mgrOpts.LeaseDuration, mgrOpts.RenewDeadline, mgrOpts.RetryPeriod = &opts.LeaseDuration, &opts.RenewDeadline, &opts.RetryPeriod
	// Leadership ends with the process: a sidecar that lost it restarts and follows again.
	mgrOpts.LeaderElectionReleaseOnCancel = false
	return nil
}

// startInformers starts the informers of every kind the provisioner plans with, so that
// the cache syncs them before the gRPC server accepts pods.
func startInformers(ctx context.Context, mgr ctrl.Manager) error {
	for _, obj := range provisioning.ReadKinds() {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting informer for %T: %w", obj, err)
		}
	}
	return nil
}

// addHealthChecks serves /healthz, and /readyz once ready (the catalog can be planned with).
func addHealthChecks(mgr ctrl.Manager, ready healthz.Checker) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("catalog", ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	return nil
}
