package operator

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/handoff"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/repair"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
)

// BindFlags defines the sidecar's flags on fs; they set the returned options.
func BindFlags(fs *flag.FlagSet) *Options {
	opts := &Options{FeatureGates: DefaultFeatureGates(), MinValuesPolicy: MinValuesStrict, RepairPolicies: repair.DefaultPolicies(),
		DeletionCostSchedulers: NameList{"tailor-scheduler"}}
	fs.StringVar(&opts.SocketPath, "socket", "/var/run/tailor/provisioner.sock", "Unix socket of the gRPC API the scheduler plugin uses.")
	fs.IntVar(&opts.MaxQueuedPods, "max-queued-pods", handoff.DefaultMaxQueuedPods, "Pods the scheduler may queue for the next batch; a submission past it is refused with ResourceExhausted and sent again later.")
	fs.DurationVar(&opts.BatchIdle, "batch-idle-duration", time.Second, "A provisioning batch closes after this long without new pods (env BATCH_IDLE_DURATION).")
	fs.DurationVar(&opts.BatchMax, "batch-max-duration", 10*time.Second, "A provisioning batch closes this long after it opened (env BATCH_MAX_DURATION).")
	fs.StringVar(&opts.ClusterName, "cluster-name", "", "Name of the EKS cluster (env CLUSTER_NAME).")
	fs.StringVar(&opts.ClusterEndpoint, "cluster-endpoint", "", "API server endpoint nodes join; discovered with EKS DescribeCluster when empty (env CLUSTER_ENDPOINT).")
	fs.StringVar(&opts.ClusterCABundle, "cluster-ca-bundle", "", "Base64 PEM CA bundle of the cluster; discovered with EKS DescribeCluster when empty (env CLUSTER_CA_BUNDLE).")
	fs.StringVar(&opts.ServiceCIDR, "service-cidr", "", "Service CIDR of the cluster, for node bootstrap (cluster DNS address); discovered with EKS DescribeCluster when empty (env SERVICE_CIDR).")
	fs.BoolVar(&opts.IsolatedVPC, "isolated-vpc", false, "The VPC has no route to the Pricing and EKS APIs: use the embedded on-demand prices and require --cluster-endpoint, --cluster-ca-bundle and --service-cidr (env ISOLATED_VPC).")
	fs.StringVar(&opts.AWSEndpointURL, "aws-endpoint-url", "", "Endpoint of every AWS service (for a local EC2-compatible endpoint); AWS_ENDPOINT_URL_<SERVICE> also works.")
	fs.Float64Var(&opts.VMMemoryOverheadPercent, "vm-memory-overhead-percent", 0.075, "Fraction of an instance's memory the kubelet does not see (env VM_MEMORY_OVERHEAD_PERCENT).")
	fs.IntVar(&opts.ReservedENIs, "reserved-enis", 0, "Network interfaces per node kept from pods (env RESERVED_ENIS).")
	fs.BoolVar(&opts.PrefixDelegation, "vpc-prefix-delegation", false, "The VPC CNI assigns /28 prefixes to ENIs: Nitro types hold ENIs × (IPv4 per ENI − 1) × 16 + 2 pods, at most 110 below 30 vCPUs and 250 from there, and nodes are launched with that max pods (env ENABLE_PREFIX_DELEGATION, as the VPC CNI names it).")
	fs.DurationVar(&opts.UnavailableOfferingsTTL, "unavailable-offerings-ttl", aws.DefaultUnavailableOfferingsTTL, "How long an offering (instance type, zone, capacity type) that reported a capacity error is kept from planning and launches.")
	fs.DurationVar(&opts.DisruptionInterval, "disruption-interval", 10*time.Second, "Time between passes that look for nodes to replace (drift), remove (empty) or consolidate.")
	fs.DurationVar(&opts.DisruptionPassTime, "disruption-pass-time", disruption.DefaultOptions.PassTime, "How long one disruption pass may weigh a consolidation plan (the pass, which also prepares the cluster, then takes about a second at most): a plan that takes longer (hundreds of candidates in a large cluster) is carried on in passes 0.1 s apart, so capacity launched ahead of an interruption never waits for it longer. 0 plans to the end in one pass.")
	fs.Float64Var(&opts.SpotToSpotSavings, "spot-to-spot-savings", disruption.DefaultOptions.SpotToSpotSavings, "Least fraction of price a spot replacement of spot nodes must save, so consolidation does not churn spot capacity for pennies (with the SpotToSpotConsolidation feature gate).")
	fs.DurationVar(&opts.ReplacementReadyTimeout, "replacement-ready-timeout", 0, "How long the copy of a pod replaced before its eviction (tailor.sh/replace-before-evict) has to be Ready before the disruption is abandoned and the copy deleted. 0 takes each Deployment's progressDeadlineSeconds (600s when unset).")
	fs.Float64Var(&opts.MinSavingsPerPod, "consolidation-min-savings-per-pod", 0, "Least hourly saving, in dollars, per pod a consolidation evicts: a consolidation that saves less for the pods it moves is not made, so that a few cents do not cost many evictions. 0 takes any saving, as Karpenter does; empty nodes and drift are not weighed by it.")
	fs.BoolVar(&opts.ElasticQuotas, "elastic-quotas", false, "The scheduler profile enables CapacityScheduling: launch nothing for a pod its namespace's ElasticQuota (scheduling.x-k8s.io/v1alpha1) would not admit, and say so in an OverQuota event.")
	fs.BoolVar(&opts.EarlyIntake, "early-intake", true, "Plan pods of a scheduler profile as soon as they are created, before the scheduler has tried them (it may take minutes to reach the last pods of a burst); pods that fit the existing nodes are left to the scheduler. The profile's NodePools are learnt from the scheduler's first submission.")
	fs.DurationVar(&opts.ReplanWindow, "replan-window", provisioning.DefaultReplanWindow, "How long after a NodeClaim was created a later batch may take it back, while its node has not registered, and plan its pods again with its own onto cheaper capacity; a pod is planned again for ten such windows at most. 0 never does.")
	fs.IntVar(&opts.LaunchLimit.PerPod, "launch-limit-per-pod", launchlimit.DefaultPerPod, "Launches a pod may get whose node the scheduler then rejected it on (a filter the planner does not model, a device never published): past it nothing more is launched for the pod until it, its NodePools or its claims change.")
	fs.IntVar(&opts.LaunchLimit.PerGroup, "launch-limit-per-group", launchlimit.DefaultPerGroup, "The same for a group of identical pods (one controller, the same constraints), whose pods share their launches, so that a controller that keeps creating pods does not start afresh; a pod of the group landing on capacity planned for it resets the count.")
	fs.DurationVar(&opts.LaunchLimit.Backoff, "launch-backoff", launchlimit.DefaultBackoff, "How long a pod the scheduler rejected on the node planned for it waits before it is planned again; doubled after each next rejection, up to 10m.")
	fs.DurationVar(&opts.MovedPodsHold, "moved-pods-hold", time.Hour, "How long consolidation leaves the pods it moved where they landed: nodes holding them are not consolidated meanwhile, so no pod moves twice in a row. 0 disables the hold.")
	fs.Var(&opts.DeletionCostSchedulers, "pod-deletion-cost-schedulers", "Comma-separated scheduler names whose pods owned by a ReplicaSet get a controller.kubernetes.io/pod-deletion-cost on Tailor's nodes, so that a Deployment that scales down deletes first the pods of the nodes consolidation would empty first; a pod with a deletion cost someone else set is left alone. Empty turns it off.")
	fs.Float64Var(&opts.DeletionCostQPS, "pod-deletion-cost-qps", 10, "Pod patches a second that --pod-deletion-cost-schedulers may make.")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Listen address of the metrics endpoint; 0 disables it.")
	fs.StringVar(&opts.HealthAddr, "health-probe-bind-address", ":8081", "Listen address of /healthz and /readyz.")
	fs.BoolVar(&opts.LeaderElect, "leader-elect", false, "Lead while the scheduler in this pod holds its Lease, so that one replica's scheduler and sidecar act together. The replica is named by $TAILOR_REPLICA, or the host name.")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the scheduler's Lease (leaderElection.resourceNamespace).")
	fs.StringVar(&opts.InterruptionQueue, "interruption-queue", "", "SQS queue (name or URL) that EventBridge sends EC2 spot interruption, rebalance, scheduled change and state change events to; empty disables interruption handling (env INTERRUPTION_QUEUE).")
	fs.DurationVar(&opts.GarbageCollection.OrphanGrace, "orphan-instance-grace", 30*time.Second, "An instance tagged for this cluster with no NodeClaim is terminated after this long.")
	fs.DurationVar(&opts.GarbageCollection.LaunchTimeout, "nodeclaim-launch-timeout", 5*time.Minute, "A NodeClaim not launched this long after its creation is deleted and its pods planned again.")
	fs.DurationVar(&opts.GarbageCollection.RegistrationTimeout, "nodeclaim-registration-timeout", 15*time.Minute, "A launched NodeClaim whose node has not registered this long after launch is deleted and its pods planned again.")
	fs.StringVar(&opts.SchedulerLeaseName, "scheduler-lease-name", "tailor-scheduler", "Name of the scheduler's Lease (leaderElection.resourceName).")
	fs.DurationVar(&opts.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a sidecar waits before it takes over from one that stopped renewing.")
	fs.DurationVar(&opts.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leading sidecar keeps trying to renew before it stops.")
	fs.DurationVar(&opts.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often leadership is checked.")
	fs.StringVar(&opts.LogFormat, "log-format", "text", "Log format: text (klog's) or json (one JSON object per line). -v sets the verbosity of both.")
	fs.Var(&opts.LogLevel, "log-level", "Karpenter's log level: debug (-v=2), info, or error (errors only); empty leaves -v alone (env LOG_LEVEL).")
	fs.Float64Var(&opts.KubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "Requests a second the sidecar may send the API server (caches, writes, evictions and events share them; leader election has as many of its own) (env KUBE_CLIENT_QPS).")
	fs.IntVar(&opts.KubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "Requests the sidecar may send the API server at once, before --kube-api-qps paces them (env KUBE_CLIENT_BURST).")
	fs.Var(&opts.FeatureGates, "feature-gates", "Karpenter's feature gates, as Name=true,Other=false: SpotToSpotConsolidation (default false) lets consolidation replace spot nodes with cheaper spot; NodeRepair (default false) replaces nodes whose conditions stay unhealthy (--node-repair-policies); StaticCapacity (default false) keeps NodePools with spec.replicas at that many nodes; NodeOverlay (default false) applies NodeOverlays' prices and capacities to planning; ReservedCapacity (default true) plans and launches into the EC2NodeClasses' capacity reservations as capacity type reserved; CapacityBuffer is accepted but not built in Tailor (env FEATURE_GATES).")
	fs.Var(&opts.RepairPolicies, "node-repair-policies", "With the NodeRepair feature gate, the node conditions that get a node replaced once they have held this long, as Type=Status:toleration, comma separated (Karpenter's AWS defaults).")
	fs.Var(&opts.MinValuesPolicy, "min-values-policy", "What planning does when a NodePool's minValues cannot be met: Strict refuses the NodeClaim, BestEffort relaxes minValues and says so on it (env MIN_VALUES_POLICY).")
	return opts
}

// EnvSetting maps an environment variable, Karpenter's or Tailor's, to the flag it sets.
type EnvSetting struct {
	// Env is the environment variable.
	Env string
	// Flag is the flag it stands for; the flag wins when both are given.
	Flag string
	// Form says what a valid value looks like, for the error of a bad one.
	Form string
}

// Environment lists the environment variables the sidecar reads: Karpenter's settings, under
// the names of Tailor's flags that do the same, and Tailor's own.
var Environment = []EnvSetting{
	{Env: "CLUSTER_NAME", Flag: "cluster-name", Form: "the EKS cluster's name"},
	{Env: "CLUSTER_ENDPOINT", Flag: "cluster-endpoint", Form: "the API server's URL"},
	{Env: "CLUSTER_CA_BUNDLE", Flag: "cluster-ca-bundle", Form: "a base64 PEM bundle"},
	{Env: "SERVICE_CIDR", Flag: "service-cidr", Form: "a CIDR such as 10.100.0.0/16"},
	{Env: "ISOLATED_VPC", Flag: "isolated-vpc", Form: "true or false"},
	{Env: "INTERRUPTION_QUEUE", Flag: "interruption-queue", Form: "an SQS queue name or URL"},
	{Env: "RESERVED_ENIS", Flag: "reserved-enis", Form: "a whole number such as 1"},
	{Env: "ENABLE_PREFIX_DELEGATION", Flag: "vpc-prefix-delegation", Form: "true or false"},
	{Env: "VM_MEMORY_OVERHEAD_PERCENT", Flag: "vm-memory-overhead-percent", Form: "a fraction such as 0.075"},
	{Env: "BATCH_IDLE_DURATION", Flag: "batch-idle-duration", Form: "a duration such as 1s"},
	{Env: "BATCH_MAX_DURATION", Flag: "batch-max-duration", Form: "a duration such as 10s"},
	{Env: "FEATURE_GATES", Flag: "feature-gates", Form: "Name=true,Other=false with the gates of --feature-gates"},
	{Env: "LOG_LEVEL", Flag: "log-level", Form: "debug, info or error"},
	{Env: "MIN_VALUES_POLICY", Flag: "min-values-policy", Form: "Strict or BestEffort"},
	{Env: "KUBE_CLIENT_QPS", Flag: "kube-api-qps", Form: "a positive number of requests a second such as 200"},
	{Env: "KUBE_CLIENT_BURST", Flag: "kube-api-burst", Form: "a positive whole number such as 300"},
}

// ApplyEnvironment sets, from the environment read by lookup, every flag of Environment
// that was not given on the command line: flags win. A bad value is an error naming the
// variable and what it should look like.
func ApplyEnvironment(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	for _, s := range Environment {
		v, ok := lookup(s.Env)
		if !ok || given[s.Flag] {
			continue
		}
		if err := fs.Set(s.Flag, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q (--%s) is not %s: %w", s.Env, v, s.Flag, s.Form, err))
		}
	}
	return errors.Join(errs...)
}

// ParseFlags parses args into fs's flags, then applies the environment (see
// ApplyEnvironment).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return ApplyEnvironment(fs, os.LookupEnv)
}
