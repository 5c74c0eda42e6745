// Package operator assembles the provisioner sidecar: the Kubernetes manager and its
// caches, the AWS provider, the controllers, the provisioning loop and the gRPC server the
// scheduler plugin talks to.
package operator

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/batcher"
	"github.com/tailor-autoscaler/tailor/provisioner/capacityblock"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/measured"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/handoff"
	"github.com/tailor-autoscaler/tailor/provisioner/informers"
	"github.com/tailor-autoscaler/tailor/provisioner/interruption"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/leader"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drain"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drift"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/expiration"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/garbagecollection"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/lifecycle"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/nodetermination"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/repair"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclass"
	"github.com/tailor-autoscaler/tailor/provisioner/nodepool"
	"github.com/tailor-autoscaler/tailor/provisioner/nodepool/static"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/provisioner/quota"
)

// Options are the sidecar's settings.
type Options struct {
	// SocketPath is the unix socket of the gRPC API shared with the scheduler.
	SocketPath string
	// MaxQueuedPods bounds the pods the scheduler may queue for the next batch.
	MaxQueuedPods int
	// BatchIdle and BatchMax bound a provisioning batch.
	BatchIdle, BatchMax time.Duration
	// ClusterName, ClusterEndpoint, ClusterCABundle (base64 PEM) and ServiceCIDR describe
	// the cluster nodes join. What is empty is read from EKS DescribeCluster; outside a
	// cluster, endpoint and CA then fall back to the kubeconfig's.
	ClusterName, ClusterEndpoint, ClusterCABundle, ServiceCIDR string
	// DisruptionInterval is the time between disruption passes; DisruptionPassTime how long
	// one pass may plan consolidation before it carries the plan on in the next (0: to the
	// end); SpotToSpotSavings the least fraction of price a spot replacement of spot nodes
	// must save.
	DisruptionInterval time.Duration
	DisruptionPassTime time.Duration
	SpotToSpotSavings  float64
	// MovedPodsHold keeps consolidation off nodes holding pods it moved, for this long.
	MovedPodsHold time.Duration
	// ReplanWindow is how long after pods were planned a later batch may plan them again.
	ReplanWindow time.Duration
	// LaunchLimit bounds the launches for pods the scheduler rejects on the nodes planned
	// for them; its clock is the sidecar's and its MaxBackoff launchlimit's default.
	LaunchLimit launchlimit.Options
	// EarlyIntake plans pods as they are created, before the scheduler has tried them.
	EarlyIntake bool
	// ElasticQuotas admits pods by their namespaces' ElasticQuotas, as CapacityScheduling
	// does, before planning capacity for them.
	ElasticQuotas bool
	// IsolatedVPC means the sidecar cannot reach the Pricing and EKS APIs: on-demand prices
	// come from the embedded catalog, and endpoint, CA bundle and service CIDR must be given.
	IsolatedVPC bool
	// AWSEndpointURL overrides the endpoint of every AWS service (for a local endpoint).
	AWSEndpointURL string
	// VMMemoryOverheadPercent and ReservedENIs shape instance capacity.
	VMMemoryOverheadPercent float64
	ReservedENIs            int
	// PrefixDelegation says the VPC CNI assigns prefixes (ENABLE_PREFIX_DELEGATION).
	PrefixDelegation bool
	// UnavailableOfferingsTTL is how long an offering that ran out of capacity is avoided.
	UnavailableOfferingsTTL time.Duration
	// MetricsAddr and HealthAddr are the listen addresses of metrics and health probes.
	MetricsAddr, HealthAddr string
	// LeaderElect makes the sidecar lead while the scheduler of its replica (its pod) holds
	// the scheduler's Lease, LeaderElectionNamespace/SchedulerLeaseName: both containers of
	// one pod lead together (see package leader).
	LeaderElect bool
	// LeaderElectionNamespace holds the scheduler's Lease.
	LeaderElectionNamespace string
	// SchedulerLeaseName is the scheduler's Lease (its leaderElection.resourceName).
	SchedulerLeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod time the sidecar's elector; a sidecar
	// waits RenewDeadline+RetryPeriod after its scheduler took the Lease before it leads.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// InterruptionQueue is the SQS queue (name or URL) EventBridge sends EC2 interruption
	// events to; empty disables interruption handling.
	InterruptionQueue string
	// GarbageCollection times the orphan grace and the launch and registration timeouts.
	GarbageCollection garbagecollection.Options
	// KubeAPIQPS and KubeAPIBurst bound the sidecar's requests to the API server: its
	// caches, writes, evictions and events share one budget of KubeAPIQPS requests a second
	// with bursts of KubeAPIBurst; leader election has a budget of its own, so renewals
	// never wait behind a burst of work.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// FeatureGates are Karpenter's feature gates; Tailor builds SpotToSpotConsolidation,
	// NodeRepair and StaticCapacity.
	FeatureGates FeatureGates
	// RepairPolicies are the node conditions NodeRepair replaces nodes for.
	RepairPolicies repair.Policies
	// MinValuesPolicy says whether planning refuses (Strict) or relaxes (BestEffort) a
	// NodePool's minValues it cannot meet.
	MinValuesPolicy MinValuesPolicy
	// LogFormat (text or json) and LogLevel (Karpenter's debug, info or error) shape the
	// logger main builds.
	LogFormat string
	LogLevel  LogLevel
}

// Defaults of KubeAPIQPS and KubeAPIBurst, for clusters of up to 5,000 nodes. Tailor's
// bursts are a spot reclaim (two minutes' warning: each node is cordoned, marked, deleted
// and its pods evicted), a consolidation within budgets (10% of the nodes by default, a
// drain each) and a scale-up (about six writes per NodeClaim). At 200 a second, the 7,000
// requests of 200 nodes of 30 pods reclaimed at once take 35 s, and the 6,000 of 1,000
// NodeClaims launched take 30 s; at the 20 a second of kube-controller-manager's clients
// they would take minutes, past the reclaim. A runaway loop stays within the budget, and
// the API server's priority and fairness keeps Tailor's share in check.
const (
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 300
)

// Validate checks the options and names the flag to fix.
func (o *Options) Validate() error {
	var errs []error
	if o.SocketPath == "" {
		errs = append(errs, errors.New("--socket must be set"))
	}
	if o.ClusterName == "" {
		errs = append(errs, errors.New("--cluster-name must be set to the EKS cluster name"))
	}
	if o.DisruptionInterval <= 0 {
		errs = append(errs, fmt.Errorf("--disruption-interval (%s) must be positive", o.DisruptionInterval))
	}
	if o.DisruptionPassTime < 0 {
		errs = append(errs, fmt.Errorf("--disruption-pass-time (%s) must not be negative; 0 plans consolidation to the end in one pass", o.DisruptionPassTime))
	}
	if o.SpotToSpotSavings < 0 || o.SpotToSpotSavings >= 1 {
		errs = append(errs, fmt.Errorf("--spot-to-spot-savings (%v) must be a fraction from 0 up to, not including, 1", o.SpotToSpotSavings))
	}
	if o.ReplanWindow < 0 {
		errs = append(errs, fmt.Errorf("--replan-window (%s) must not be negative; 0 never plans pods again", o.ReplanWindow))
	}
	if o.MaxQueuedPods <= 0 {
		errs = append(errs, fmt.Errorf("--max-queued-pods (%d) must be positive", o.MaxQueuedPods))
	}
	if o.MovedPodsHold < 0 {
		errs = append(errs, fmt.Errorf("--moved-pods-hold (%s) must not be negative; 0 lets consolidation move pods again at once", o.MovedPodsHold))
	}
	if o.IsolatedVPC && (o.ClusterEndpoint == "" || o.ClusterCABundle == "" || o.ServiceCIDR == "") {
		errs = append(errs, errors.New("--isolated-vpc needs --cluster-endpoint, --cluster-ca-bundle and --service-cidr: EKS DescribeCluster cannot be called to discover them"))
	}
	if o.ServiceCIDR != "" {
		if _, err := netip.ParsePrefix(o.ServiceCIDR); err != nil {
			errs = append(errs, fmt.Errorf("--service-cidr %q must be a CIDR: %w", o.ServiceCIDR, err))
		}
	}
	if o.BatchIdle <= 0 || o.BatchMax < o.BatchIdle {
		errs = append(errs, fmt.Errorf("--batch-idle-duration (%s) must be positive and at most --batch-max-duration (%s)", o.BatchIdle, o.BatchMax))
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%v) must be positive", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst (%d) must be at least 1", o.KubeAPIBurst))
	}
	if o.MinValuesPolicy != MinValuesStrict && o.MinValuesPolicy != MinValuesBestEffort {
		errs = append(errs, fmt.Errorf("--min-values-policy (%q) must be %s or %s", o.MinValuesPolicy, MinValuesStrict, MinValuesBestEffort))
	}
	errs = append(errs, o.launchLimit(clock.RealClock{}).Validate(), o.GarbageCollection.Validate())
	return errors.Join(errs...)
}

// launchLimit is the launch limit's options, on clk: the flags set the limits and the first
// wait; the waits double up to launchlimit's cap, or the first wait when that is longer.
func (o *Options) launchLimit(clk clock.PassiveClock) launchlimit.Options {
	l := o.LaunchLimit
	l.Clock, l.MaxBackoff = clk, max(launchlimit.DefaultMaxBackoff, l.Backoff)
	return l
}

// Run starts the sidecar and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	logger := log.FromContext(ctx)
	clk := clock.RealClock{}
	cfg, leaseCfg := rateLimited(cfg, opts)
	// Shutdown waits for launches in flight to be recorded.
	shutdown := lifecycle.LaunchTimeout + 10*time.Second
	mgrOpts := ctrl.Options{
		GracefulShutdownTimeout: &shutdown,
		Scheme:                  apischeme.New(),
		Cache:                   informers.CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.HealthAddr,
	}
	if opts.LeaderElect {
		if err := followScheduler(leaseCfg, opts, &mgrOpts, clk); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := nodeclaim.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := startInformers(ctx, mgr); err != nil {
		return err
	}
	overlays := overlay.ClientLister{Reader: mgr.GetClient()}
	provider, err := newProvider(ctx, cfg, mgr, opts, clk, overlays)
	if err != nil {
		return err
	}
	if err := mgr.Add(provider); err != nil {
		return fmt.Errorf("adding the AWS provider's housekeeping: %w", err)
	}
	// Every replica reads the catalog, so that readiness says it could plan.
	if err := mgr.Add(alwaysRunnable(provider.LoadCatalog)); err != nil {
		return fmt.Errorf("adding the catalog load: %w", err)
	}
	recorder := mgr.GetEventRecorderFor("tailor-provisioner")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	tracker := nomination.NewTracker(clk)
	batches, err := batcher.New(batcher.Options{Idle: opts.BatchIdle, Max: opts.BatchMax, Clock: clk})
	if err != nil {
		return err
	}
	// Planning and consolidation read instance types through the overlays, with the gate on.
	var planned cloudprovider.CloudProvider = provider
	if opts.FeatureGates.Enabled(GateNodeOverlay) {
		if _, err := mgr.GetCache().GetInformer(ctx, &karpv1alpha1.NodeOverlay{}); err != nil {
			return fmt.Errorf("starting informer for NodeOverlays: %w", err)
		}
		planned = overlay.New(provider, overlays)
		if err := overlay.NewController(mgr.GetClient(), provider).Register(mgr); err != nil {
			return fmt.Errorf("registering controller: %w", err)
		}
	} else if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		reportIgnoredOverlays(ctx, mgr.GetAPIReader())
		return nil
	})); err != nil {
		return fmt.Errorf("adding the NodeOverlay check: %w", err)
	}
	launches, err := launchlimit.New(opts.launchLimit(clk))
	if err != nil {
		return err
	}
	prov := provisioning.New(mgr.GetClient(), measured.New(planned, metrics.ControllerProvisioner), tracker, batches, recorder, provisioning.Options{Clock: clk, Launches: launches, ReplanWindow: opts.ReplanWindow, EarlyIntake: opts.EarlyIntake, MinValuesPolicy: packing.MinValuesPolicy(opts.MinValuesPolicy),
		Gangs: gang.PodGroups{Client: mgr.GetAPIReader()}, Quotas: elasticQuotas(opts, mgr), StaticCapacity: opts.FeatureGates.Enabled(GateStaticCapacity)})
	disruptionOpts := disruption.ControllerOptions{
		Options: disruption.DefaultOptions, Interval: opts.DisruptionInterval, MinNodeAge: opts.BatchMax, ReplacementTimeout: 10 * time.Minute,
		MovedPodsHold: opts.MovedPodsHold, LeaderElection: opts.LeaderElect,
	}
	disruptionOpts.SpotToSpotSavings = opts.SpotToSpotSavings
	disruptionOpts.PassTime = opts.DisruptionPassTime
	disruptionOpts.NoSpotToSpot = !opts.FeatureGates.Enabled(GateSpotToSpotConsolidation)
	disruptionOpts.StaticCapacity = opts.FeatureGates.Enabled(GateStaticCapacity)
	if unbuilt := opts.FeatureGates.Unbuilt(); len(unbuilt) > 0 {
		logger.Info("Feature gates enabled that Tailor does not build; they change nothing", "gates", unbuilt)
	}
	disruptions := disruption.NewController(mgr.GetClient(), mgr.GetAPIReader(), prov, prov, tracker, recorder, clk, disruptionOpts)
	if err := mgr.Add(disruptions); err != nil {
		return fmt.Errorf("adding disruption: %w", err)
	}
	nominations := nomination.NewController(mgr.GetClient(), tracker, recorder)

	gc, err := garbagecollection.NewController(mgr.GetClient(), mgr.GetAPIReader(), measured.New(provider, "nodeclaim.garbagecollection"), recorder, clk, opts.GarbageCollection)
	if err != nil {
		return err
	}
	interruptions, err := newInterruptionController(ctx, mgr, opts, recorder, clk, disruptions)
	if err != nil {
		return err
	}
	for _, c := range []interface{ Register(ctrl.Manager) error }{
		gc,
		interruptions,
		lifecycle.NewController(mgr.GetClient(), measured.New(provider, "nodeclaim.lifecycle"), recorder, clk),
		termination.NewController(mgr.GetClient(), mgr.GetAPIReader(), measured.New(provider, "nodeclaim.termination"), drain.New(mgr.GetClient(), mgr.GetAPIReader(), cs), recorder, clk),
		nodetermination.NewController(mgr.GetClient(), recorder),
		expiration.NewController(mgr.GetClient(), recorder, clk),
		drift.NewController(mgr.GetClient()),
		nominations,
		nodeclass.NewController(mgr.GetClient(), provider, provider, recorder, clk),
		nodepool.NewController(mgr.GetClient(), recorder),
	} {
		if err := c.Register(mgr); err != nil {
			return fmt.Errorf("registering controller: %w", err)
		}
	}
	if opts.FeatureGates.Enabled(GateStaticCapacity) {
		if err := static.NewController(mgr.GetClient(), prov, recorder, clk).Register(mgr); err != nil {
			return fmt.Errorf("registering controller: %w", err)
		}
	}
	if opts.FeatureGates.Enabled(GateReservedCapacity) {
		if err := capacityblock.NewController(mgr.GetClient(), recorder, clk, disruptions).Register(mgr); err != nil {
			return fmt.Errorf("registering controller: %w", err)
		}
	}
	if opts.FeatureGates.Enabled(GateNodeRepair) {
		if err := repair.NewController(mgr.GetClient(), recorder, clk, opts.RepairPolicies).Register(mgr); err != nil {
			return fmt.Errorf("registering controller: %w", err)
		}
	}
	if err := prov.RegisterGangRetry(mgr); err != nil {
		return fmt.Errorf("registering controller: %w", err)
	}
	if err := replanOnNodePoolChanges(ctx, mgr, prov); err != nil {
		return err
	}
	if err := forgetBoundPods(ctx, mgr, prov, clk); err != nil {
		return err
	}
	if err := clusterMetrics(ctx, mgr, clk); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// A new leader plans nothing before it knows every plan its predecessor made, or
		// it would plan those pods again.
		if err := nominations.SyncAll(ctx); err != nil {
			return err
		}
		if err := takeInCreatedPods(ctx, mgr, prov); err != nil {
			return err
		}
		for batches.Wait(ctx) {
			if err := prov.Provision(ctx); err != nil {
				logger.Error(err, "provisioning failed; the pods will be submitted again")
			}
		}
		return nil
	})); err != nil {
		return fmt.Errorf("adding provisioning loop: %w", err)
	}
	// The API serves on every replica so the scheduler's sidecar always answers.
	if err := mgr.Add(alwaysRunnable(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches did not sync")
		}
		return handoff.Serve(ctx, opts.SocketPath, handoff.NewServer(prov, tracker, handoff.Options{MaxQueuedPods: opts.MaxQueuedPods}))
	})); err != nil {
		return fmt.Errorf("adding gRPC server: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("catalog", provider.CatalogReady); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	logger.Info("starting provisioner", "cluster", opts.ClusterName, "socket", opts.SocketPath)
	return mgr.Start(ctx)
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

// alwaysRunnable runs on every replica, leader or not.
type alwaysRunnable func(ctx context.Context) error

func (f alwaysRunnable) Start(ctx context.Context) error { return f(ctx) }
func (alwaysRunnable) NeedLeaderElection() bool          { return false }

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

// forgetBoundPods drops pods from the provisioning queue and tracker once they are bound or
// deleted.
func forgetBoundPods(ctx context.Context, mgr ctrl.Manager, prov *provisioning.Provisioner, clk clock.PassiveClock) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting pod informer: %w", err)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
				prov.Bound(pod, clk.Now())
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				prov.Forget(pod.UID)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	return nil
}

// clusterMetrics serves the NodePool, cluster-state and NodeClaim-wait metrics from the
// caches, and times pods' binding and startup from the pod informer.
func clusterMetrics(ctx context.Context, mgr ctrl.Manager, clk clock.PassiveClock) error {
	var informers []crcache.Informer
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}, &karpv1.NodeClaim{}} {
		informer, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer of %T: %w", obj, err)
		}
		informers = append(informers, informer)
	}
	synced := func() bool {
		for _, i := range informers {
			if !i.HasSynced() {
				return false
			}
		}
		return true
	}
	leading := func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}
	if _, err := informers[0].AddEventHandler(metrics.NewPodTimings(clk, leading).Handler()); err != nil {
		return fmt.Errorf("timing pods: %w", err)
	}
	for _, c := range []prometheus.Collector{
		nodepool.NewCollector(mgr.GetClient()), metrics.NewClusterCollector(mgr.GetClient(), synced, clk),
		lifecycle.NewWaitingCollector(mgr.GetClient(), clk),
	} {
		if err := crmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("registering cluster metrics: %w", err)
		}
	}
	return nil
}

// replanOnNodePoolChanges tells the provisioner when a NodePool is created or changes: pods
// held back at their launch limit may fit it now.
func replanOnNodePoolChanges(ctx context.Context, mgr ctrl.Manager, prov *provisioning.Provisioner) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &karpv1.NodePool{})
	if err != nil {
		return fmt.Errorf("getting NodePool informer: %w", err)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, isInInitialList bool) {
			if !isInInitialList {
				prov.NodePoolsChanged()
			}
		},
		UpdateFunc: func(old, obj any) {
			if o, n := old.(*karpv1.NodePool), obj.(*karpv1.NodePool); o.Generation != n.Generation || !maps.Equal(o.Labels, n.Labels) {
				prov.NodePoolsChanged()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching NodePools: %w", err)
	}
	return nil
}

// takeInCreatedPods hands pods to the provisioner as they are created (see
// provisioning.Provisioner.Intake). The pods that exist already have been or will be tried by
// the scheduler.
func takeInCreatedPods(ctx context.Context, mgr ctrl.Manager, prov *provisioning.Provisioner) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting pod informer: %w", err)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if pod, ok := obj.(*corev1.Pod); ok && !isInInitialList {
				prov.Intake(pod)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching created pods: %w", err)
	}
	return nil
}

// reportIgnoredOverlays logs, once, that NodeOverlays exist but the NodeOverlay feature gate
// is off, so they change nothing.
func reportIgnoredOverlays(ctx context.Context, reader client.Reader) {
	list := &karpv1alpha1.NodeOverlayList{}
	if err := reader.List(ctx, list, client.Limit(1)); err != nil {
		// No CRD installed or no permission: then there are no overlays to ignore either.
		log.FromContext(ctx).V(1).Info("Could not list NodeOverlays", "err", err)
		return
	}
	if len(list.Items) > 0 {
		log.FromContext(ctx).Info("NodeOverlays are ignored: the NodeOverlay feature gate is off (--feature-gates=NodeOverlay=true applies them)", "nodeOverlay", list.Items[0].Name)
	}
}

// newProvider builds the AWS provider from the SDK's default credential chain, the cluster
// settings and the API server's Kubernetes version. It reads EC2NodeClasses and NodeClaims
// from the cache: every provisioning batch and disruption pass asks it for the instance
// types of every NodePool.
func newProvider(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, opts Options, clk clock.Clock, overlays overlay.Lister) (*aws.Provider, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if opts.AWSEndpointURL != "" {
		awsCfg.BaseEndpoint = awssdk.String(opts.AWSEndpointURL)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	version, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the Kubernetes version: %w", err)
	}
	clients := aws.NewClients(awsCfg)
	cluster, err := clusterInfo(ctx, cfg, opts, clients.EKS, inCluster())
	if err != nil {
		return nil, err
	}
	var launchPrices func(context.Context, string, []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error)
	if opts.FeatureGates.Enabled(GateNodeOverlay) {
		launchPrices = overlay.LaunchPrices(overlays)
	}
	return aws.New(aws.Options{
		LaunchPrices:            launchPrices,
		Cluster:                 cluster,
		Region:                  awsCfg.Region,
		KubernetesVersion:       version.Major + "." + trimPlus(version.Minor),
		VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent,
		ReservedENIs:            opts.ReservedENIs,
		PrefixDelegation:        opts.PrefixDelegation,
		UnavailableOfferingsTTL: opts.UnavailableOfferingsTTL,
		IsolatedVPC:             opts.IsolatedVPC,
		ReservedCapacity:        opts.FeatureGates.Enabled(GateReservedCapacity),
	}, clients, mgr.GetClient(), mgr.GetClient(), clk)
}

// clusterInfo settles what nodes need to join the cluster: the flags first, then EKS
// DescribeCluster for what they leave out (never in an isolated VPC). Only outside a cluster
// do endpoint and CA come from the kubeconfig as a last resort: inside one, its host is the
// kubernetes Service's address, which nodes cannot use before they run kube-proxy.
func clusterInfo(ctx context.Context, cfg *rest.Config, opts Options, client eks.DescribeClusterAPIClient, inCluster bool) (aws.ClusterInfo, error) {
	logger := log.FromContext(ctx)
	info := aws.ClusterInfo{Name: opts.ClusterName, Endpoint: opts.ClusterEndpoint, CABundle: opts.ClusterCABundle, ServiceCIDR: opts.ServiceCIDR}
	if opts.IsolatedVPC {
		return info, nil
	}
	discovered, err := aws.DiscoverCluster(ctx, client, info)
	switch {
	case err == nil:
		info = discovered
	case aws.IsClusterNotFound(err):
		return info, err
	case inCluster:
		return info, fmt.Errorf("discovering the cluster (or set --cluster-endpoint, --cluster-ca-bundle and --service-cidr): %w", err)
	default:
		logger.Info("Could not discover the cluster from EKS; set --cluster-endpoint, --cluster-ca-bundle and --service-cidr or allow eks:DescribeCluster", "cluster", opts.ClusterName, "err", err)
	}
	if !inCluster && (info.Endpoint == "" || info.CABundle == "") {
		logger.Info("Nodes will join through the kubeconfig's API server and CA; set --cluster-endpoint and --cluster-ca-bundle for a real cluster", "host", cfg.Host)
		if info.Endpoint == "" {
			info.Endpoint = cfg.Host
		}
		if info.CABundle == "" {
			ca, err := kubeconfigCA(cfg)
			if err != nil {
				return info, err
			}
			info.CABundle = ca
		}
	}
	var errs []error
	if info.Endpoint == "" {
		errs = append(errs, fmt.Errorf("--cluster-endpoint is not set and EKS DescribeCluster of %q gave none", opts.ClusterName))
	}
	if info.CABundle == "" {
		errs = append(errs, fmt.Errorf("--cluster-ca-bundle is not set and EKS DescribeCluster of %q gave none", opts.ClusterName))
	}
	if info.ServiceCIDR == "" {
		errs = append(errs, fmt.Errorf("--service-cidr is not set and could not be discovered from EKS DescribeCluster of %q", opts.ClusterName))
	}
	return info, errors.Join(errs...)
}

// kubeconfigCA is the base64 PEM of the kubeconfig's CA, "" when it names none.
func kubeconfigCA(cfg *rest.Config) (string, error) {
	data := cfg.CAData
	if len(data) == 0 && cfg.CAFile != "" {
		var err error
		if data, err = os.ReadFile(cfg.CAFile); err != nil {
			return "", fmt.Errorf("reading the kubeconfig's CA: %w", err)
		}
	}
	if len(data) == 0 {
		return "", nil
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// inCluster reports whether the sidecar runs in a pod, where its kubeconfig is the
// kubernetes Service's address.
func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != ""
}

// trimPlus drops the "+" some distributions append to the minor version ("34+").
func trimPlus(minor string) string {
	for i, r := range minor {
		if r < '0' || r > '9' {
			return minor[:i]
		}
	}
	return minor
}

// newInterruptionController reads the interruption queue with the SDK's default
// configuration, or does nothing when no queue is set.
func newInterruptionController(ctx context.Context, mgr ctrl.Manager, opts Options, recorder record.EventRecorder, clk clock.Clock, replacer interruption.Replacer) (interface{ Register(ctrl.Manager) error }, error) {
	if opts.InterruptionQueue == "" {
		return noController{}, nil
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if opts.AWSEndpointURL != "" {
		awsCfg.BaseEndpoint = awssdk.String(opts.AWSEndpointURL)
	}
	queue, err := interruption.NewSQSQueue(sqs.NewFromConfig(awsCfg), opts.InterruptionQueue, 0)
	if err != nil {
		return nil, err
	}
	return interruption.NewController(mgr.GetClient(), queue, recorder, clk, interruption.Options{Replacer: replacer})
}

// noController stands for a disabled controller.
type noController struct{}

func (noController) Register(ctrl.Manager) error { return nil }

// elasticQuotas reads ElasticQuotas when the scheduler admits pods by them, and nothing
// otherwise.
func elasticQuotas(opts Options, mgr ctrl.Manager) quota.Reader {
	if !opts.ElasticQuotas {
		return nil
	}
	return quota.ElasticQuotas{Client: mgr.GetAPIReader()}
}
