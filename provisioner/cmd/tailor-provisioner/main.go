// Command tailor-provisioner is Tailor's provisioner sidecar: it plans and launches capacity
// for pods the tailor-scheduler cannot place, and owns the lifecycle of the nodes it launches.
// `tailor-provisioner simulate` plans offline, from manifests and an EC2 catalog.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/operator"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "simulate" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err := simulate.Run(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "tailor-provisioner simulate:", err)
			os.Exit(1)
		}
		return
	}
	opts, logFormat := bindFlags(flag.CommandLine)
	klog.InitFlags(flag.CommandLine)
	flag.Parse()

	logger, err := newLogger(*logFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailor-provisioner:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		logger.Error(err, "loading kubeconfig")
		os.Exit(1)
	}
	if err := operator.Run(ctx, cfg, *opts); err != nil {
		logger.Error(err, "provisioner stopped")
		os.Exit(1)
	}
}

// bindFlags defines the sidecar's flags on fs: they set the returned options and log format.
func bindFlags(fs *flag.FlagSet) (*operator.Options, *string) {
	opts := &operator.Options{}
	fs.StringVar(&opts.SocketPath, "socket", "/var/run/tailor/provisioner.sock", "Unix socket of the gRPC API the scheduler plugin uses.")
	fs.DurationVar(&opts.BatchIdle, "batch-idle-duration", time.Second, "A provisioning batch closes after this long without new pods.")
	fs.DurationVar(&opts.BatchMax, "batch-max-duration", 10*time.Second, "A provisioning batch closes this long after it opened.")
	fs.StringVar(&opts.ClusterName, "cluster-name", os.Getenv("CLUSTER_NAME"), "Name of the EKS cluster (env CLUSTER_NAME).")
	fs.StringVar(&opts.ClusterEndpoint, "cluster-endpoint", os.Getenv("CLUSTER_ENDPOINT"), "API server endpoint nodes join; discovered with EKS DescribeCluster when empty (env CLUSTER_ENDPOINT).")
	fs.StringVar(&opts.ClusterCABundle, "cluster-ca-bundle", os.Getenv("CLUSTER_CA_BUNDLE"), "Base64 PEM CA bundle of the cluster; discovered with EKS DescribeCluster when empty (env CLUSTER_CA_BUNDLE).")
	fs.StringVar(&opts.ServiceCIDR, "service-cidr", os.Getenv("SERVICE_CIDR"), "Service CIDR of the cluster, for node bootstrap (cluster DNS address); discovered with EKS DescribeCluster when empty (env SERVICE_CIDR).")
	fs.BoolVar(&opts.IsolatedVPC, "isolated-vpc", false, "The VPC has no route to the Pricing and EKS APIs: use the embedded on-demand prices and require --cluster-endpoint, --cluster-ca-bundle and --service-cidr.")
	fs.StringVar(&opts.AWSEndpointURL, "aws-endpoint-url", "", "Endpoint of every AWS service (for a local EC2-compatible endpoint); AWS_ENDPOINT_URL_<SERVICE> also works.")
	fs.Float64Var(&opts.VMMemoryOverheadPercent, "vm-memory-overhead-percent", 0.075, "Fraction of an instance's memory the kubelet does not see.")
	fs.IntVar(&opts.ReservedENIs, "reserved-enis", 0, "Network interfaces per node kept from pods.")
	fs.DurationVar(&opts.UnavailableOfferingsTTL, "unavailable-offerings-ttl", aws.DefaultUnavailableOfferingsTTL, "How long an offering (instance type, zone, capacity type) that reported a capacity error is kept from planning and launches.")
	fs.DurationVar(&opts.DisruptionInterval, "disruption-interval", 10*time.Second, "Time between passes that look for nodes to replace (drift), remove (empty) or consolidate.")
	fs.Float64Var(&opts.SpotToSpotSavings, "spot-to-spot-savings", disruption.DefaultOptions.SpotToSpotSavings, "Least fraction of price a spot replacement of spot nodes must save, so consolidation does not churn spot capacity for pennies.")
	fs.BoolVar(&opts.EarlyIntake, "early-intake", true, "Plan pods of a scheduler profile as soon as they are created, before the scheduler has tried them (it may take minutes to reach the last pods of a burst); pods that fit the existing nodes are left to the scheduler. The profile's NodePools are learnt from the scheduler's first submission.")
	fs.DurationVar(&opts.ReplanWindow, "replan-window", provisioning.DefaultReplanWindow, "How long after a NodeClaim was created a later batch may take it back, while its node has not registered, and plan its pods again with its own onto cheaper capacity; a pod is planned again for ten such windows at most. 0 never does.")
	fs.DurationVar(&opts.MovedPodsHold, "moved-pods-hold", time.Hour, "How long consolidation leaves the pods it moved where they landed: nodes holding them are not consolidated meanwhile, so no pod moves twice in a row. 0 disables the hold.")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Listen address of the metrics endpoint; 0 disables it.")
	fs.StringVar(&opts.HealthAddr, "health-probe-bind-address", ":8081", "Listen address of /healthz and /readyz.")
	fs.BoolVar(&opts.LeaderElect, "leader-elect", false, "Lead while the scheduler in this pod holds its Lease, so that one replica's scheduler and sidecar act together. The replica is named by $TAILOR_REPLICA, or the host name.")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the scheduler's Lease (leaderElection.resourceNamespace).")
	fs.StringVar(&opts.InterruptionQueue, "interruption-queue", os.Getenv("INTERRUPTION_QUEUE"), "SQS queue (name or URL) that EventBridge sends EC2 spot interruption, rebalance, scheduled change and state change events to; empty disables interruption handling (env INTERRUPTION_QUEUE).")
	fs.DurationVar(&opts.GarbageCollection.OrphanGrace, "orphan-instance-grace", 30*time.Second, "An instance tagged for this cluster with no NodeClaim is terminated after this long.")
	fs.DurationVar(&opts.GarbageCollection.LaunchTimeout, "nodeclaim-launch-timeout", 5*time.Minute, "A NodeClaim not launched this long after its creation is deleted and its pods planned again.")
	fs.DurationVar(&opts.GarbageCollection.RegistrationTimeout, "nodeclaim-registration-timeout", 15*time.Minute, "A launched NodeClaim whose node has not registered this long after launch is deleted and its pods planned again.")
	fs.StringVar(&opts.SchedulerLeaseName, "scheduler-lease-name", "tailor-scheduler", "Name of the scheduler's Lease (leaderElection.resourceName).")
	fs.DurationVar(&opts.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a sidecar waits before it takes over from one that stopped renewing.")
	fs.DurationVar(&opts.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leading sidecar keeps trying to renew before it stops.")
	fs.DurationVar(&opts.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often leadership is checked.")
	logFormat := fs.String("log-format", "text", "Log format: text (klog's) or json (one JSON object per line). -v sets the verbosity of both.")
	fs.Float64Var(&opts.KubeAPIQPS, "kube-api-qps", operator.DefaultKubeAPIQPS, "Requests a second the sidecar may send the API server (caches, writes, evictions and events share them; leader election has as many of its own).")
	fs.IntVar(&opts.KubeAPIBurst, "kube-api-burst", operator.DefaultKubeAPIBurst, "Requests the sidecar may send the API server at once, before --kube-api-qps paces them.")
	return opts, logFormat
}

// newLogger returns the logger of the format asked for, at klog's -v verbosity.
func newLogger(format string) (logr.Logger, error) {
	verbosity, err := strconv.Atoi(flag.Lookup("v").Value.String())
	if err != nil {
		return logr.Logger{}, fmt.Errorf("-v: %w", err)
	}
	switch format {
	case "text":
		return textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(verbosity))), nil
	case "json":
		return crzap.New(crzap.Level(zapcore.Level(-verbosity))), nil
	}
	return logr.Logger{}, fmt.Errorf("--log-format %q: use text or json", format)
}
