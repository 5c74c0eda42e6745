package operator

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/garbagecollection"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/repair"
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
	// MinSavingsPerPod is the least hourly saving per pod a consolidation evicts.
	MinSavingsPerPod float64
	// ReplacementReadyTimeout bounds the wait for a copy of a pod replaced before its
	// eviction to be Ready; 0 takes the Deployment's progressDeadlineSeconds.
	ReplacementReadyTimeout time.Duration
	// MovedPodsHold keeps consolidation off nodes holding pods it moved, for this long.
	MovedPodsHold time.Duration
	// DeletionCostSchedulers are the schedulers whose ReplicaSet pods get a pod deletion
	// cost that steers scale-downs onto the nodes consolidation would empty first (none:
	// no steering); DeletionCostQPS bounds the pod patches a second.
	DeletionCostSchedulers NameList
	DeletionCostQPS        float64
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
	if o.MinSavingsPerPod < 0 {
		errs = append(errs, fmt.Errorf("--consolidation-min-savings-per-pod (%v) must not be negative; 0 takes any saving", o.MinSavingsPerPod))
	}
	if o.ReplacementReadyTimeout < 0 {
		errs = append(errs, fmt.Errorf("--replacement-ready-timeout (%s) must not be negative; 0 takes each Deployment's progressDeadlineSeconds", o.ReplacementReadyTimeout))
	}
	if len(o.DeletionCostSchedulers) > 0 && o.DeletionCostQPS <= 0 {
		errs = append(errs, fmt.Errorf("--pod-deletion-cost-qps (%v) must be positive; an empty --pod-deletion-cost-schedulers turns the steering off", o.DeletionCostQPS))
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

// disruption is the disruption controller's options: Karpenter's defaults, with the flags'
// interval, pass time, hold and savings, and nodes younger than a batch left alone.
func (o *Options) disruption() disruption.ControllerOptions {
	d := disruption.ControllerOptions{
		Options: disruption.DefaultOptions, Interval: o.DisruptionInterval, MinNodeAge: o.BatchMax, ReplacementTimeout: 10 * time.Minute,
		MovedPodsHold: o.MovedPodsHold, LeaderElection: o.LeaderElect,
	}
	d.SpotToSpotSavings = o.SpotToSpotSavings
	d.MinSavingsPerPod = o.MinSavingsPerPod
	d.ReplacementReadyTimeout = o.ReplacementReadyTimeout
	d.PassTime = o.DisruptionPassTime
	d.NoSpotToSpot = !o.FeatureGates.Enabled(GateSpotToSpotConsolidation)
	d.StaticCapacity = o.FeatureGates.Enabled(GateStaticCapacity)
	return d
}
