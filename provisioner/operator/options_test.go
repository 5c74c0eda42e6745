package operator

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
)

func TestValidateNamesTheFlagToFix(t *testing.T) {
	valid := Options{
		SocketPath: "/var/run/tailor/provisioner.sock", ClusterName: "prod", BatchIdle: time.Second, BatchMax: 10 * time.Second,
		DisruptionInterval: 10 * time.Second, SpotToSpotSavings: 0.2, KubeAPIQPS: DefaultKubeAPIQPS, KubeAPIBurst: DefaultKubeAPIBurst,
		MinValuesPolicy: MinValuesStrict, MaxQueuedPods: 50000,
		LaunchLimit: launchlimit.Options{PerPod: launchlimit.DefaultPerPod, PerGroup: launchlimit.DefaultPerGroup, Backoff: launchlimit.DefaultBackoff},
	}
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{name: "the defaults", change: func(*Options) {}},
		{name: "no cluster name", change: func(o *Options) { o.ClusterName = "" }, want: "--cluster-name must be set to the EKS cluster name"},
		{name: "a batch window upside down", change: func(o *Options) { o.BatchMax = time.Millisecond },
			want: "--batch-idle-duration (1s) must be positive and at most --batch-max-duration (1ms)"},
		{name: "no disruption interval", change: func(o *Options) { o.DisruptionInterval = 0 }, want: "--disruption-interval (0s) must be positive"},
		{name: "spot savings of 100%", change: func(o *Options) { o.SpotToSpotSavings = 1 },
			want: "--spot-to-spot-savings (1) must be a fraction from 0 up to, not including, 1"},
		{name: "a negative moved-pods hold", change: func(o *Options) { o.MovedPodsHold = -time.Minute },
			want: "--moved-pods-hold (-1m0s) must not be negative; 0 lets consolidation move pods again at once"},
		{name: "no queue for submitted pods", change: func(o *Options) { o.MaxQueuedPods = 0 }, want: "--max-queued-pods (0) must be positive"},
		{name: "no API request rate", change: func(o *Options) { o.KubeAPIQPS = 0 }, want: "--kube-api-qps (0) must be positive"},
		{name: "a fractional API request rate", change: func(o *Options) { o.KubeAPIQPS, o.KubeAPIBurst = 0.5, 1 }},
		{name: "no API burst", change: func(o *Options) { o.KubeAPIBurst = 0 }, want: "--kube-api-burst (0) must be at least 1"},
		{name: "no min values policy", change: func(o *Options) { o.MinValuesPolicy = "" }, want: `--min-values-policy ("") must be Strict or BestEffort`},
		{name: "no launch for a pod its node rejected", change: func(o *Options) { o.LaunchLimit.PerPod = 0 }, want: "--launch-limit-per-pod is 0: it must be at least 1"},
		{name: "a launch backoff longer than the default cap", change: func(o *Options) { o.LaunchLimit.Backoff = time.Hour }},
		{name: "no launch backoff", change: func(o *Options) { o.LaunchLimit.Backoff = 0 }, want: "--launch-backoff is 0s: it must be positive"},
		{name: "an isolated VPC without cluster settings", change: func(o *Options) { o.IsolatedVPC = true },
			want: "--isolated-vpc needs --cluster-endpoint, --cluster-ca-bundle and --service-cidr: EKS DescribeCluster cannot be called to discover them"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			got := ""
			if err := o.Validate(); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClientsShareOneRateLimitAndTheLeaseClientHasItsOwn(t *testing.T) {
	clients, lease := rateLimited(&rest.Config{Host: "https://127.0.0.1:6443"}, Options{KubeAPIQPS: 50, KubeAPIBurst: 80})
	type limits struct {
		QPS   float32
		Burst int
	}
	if diff := cmp.Diff(limits{50, 80}, limits{clients.QPS, clients.Burst}); diff != "" {
		t.Errorf("clients' limits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(limits{50, 80}, limits{lease.QPS, lease.Burst}); diff != "" {
		t.Errorf("Lease client's limits (-want +got):\n%s", diff)
	}
	work, err := kubernetes.NewForConfig(clients)
	if err != nil {
		t.Fatal(err)
	}
	events, err := kubernetes.NewForConfig(clients)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := kubernetes.NewForConfig(lease)
	if err != nil {
		t.Fatal(err)
	}
	shared := clients.RateLimiter
	if shared == nil || shared.QPS() != 50 {
		t.Fatalf("clients' rate limiter %v, want one of 50 requests a second", shared)
	}
	for name, got := range map[string]flowcontrol.RateLimiter{
		"pods":      work.CoreV1().RESTClient().GetRateLimiter(),
		"evictions": work.PolicyV1().RESTClient().GetRateLimiter(),
		"events":    events.CoreV1().RESTClient().GetRateLimiter(),
	} {
		if got != shared {
			t.Errorf("the %s client has a rate limiter of its own, want the shared one", name)
		}
	}
	if got := leases.CoordinationV1().RESTClient().GetRateLimiter(); got == shared || got == nil || got.QPS() != 50 {
		t.Errorf("the Lease client's rate limiter %v, want one of 50 requests a second of its own", got)
	}
}

func TestKarpenterEnvironmentSetsFlagsNotGiven(t *testing.T) {
	type settings struct {
		ClusterName, ClusterEndpoint, InterruptionQueue string
		IsolatedVPC, PrefixDelegation                   bool
		ReservedENIs                                    int
		VMMemoryOverheadPercent                         float64
		BatchIdle, BatchMax                             time.Duration
		SpotToSpot, NodeRepair                          bool
		Unbuilt                                         []string
		LogLevel                                        LogLevel
		MinValuesPolicy                                 MinValuesPolicy
	}
	defaults := settings{VMMemoryOverheadPercent: 0.075, BatchIdle: time.Second, BatchMax: 10 * time.Second,
		MinValuesPolicy: MinValuesStrict}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want func(*settings)
		err  string
	}{
		{name: "no environment keeps the flags' defaults", want: func(*settings) {}},
		{name: "every Karpenter setting from the environment", env: map[string]string{
			"CLUSTER_NAME": "prod", "CLUSTER_ENDPOINT": "https://api.prod", "INTERRUPTION_QUEUE": "prod-queue",
			"ISOLATED_VPC": "true", "RESERVED_ENIS": "1", "ENABLE_PREFIX_DELEGATION": "true", "VM_MEMORY_OVERHEAD_PERCENT": "0.05",
			"BATCH_IDLE_DURATION": "2s", "BATCH_MAX_DURATION": "20s",
			"FEATURE_GATES": "SpotToSpotConsolidation=true,NodeRepair=true,NodeOverlay=true,ReservedCapacity=false,CapacityBuffer=true",
			"LOG_LEVEL":     "debug", "MIN_VALUES_POLICY": "BestEffort",
		}, want: func(s *settings) {
			*s = settings{ClusterName: "prod", ClusterEndpoint: "https://api.prod", InterruptionQueue: "prod-queue",
				IsolatedVPC: true, PrefixDelegation: true, ReservedENIs: 1, VMMemoryOverheadPercent: 0.05, BatchIdle: 2 * time.Second, BatchMax: 20 * time.Second,
				SpotToSpot: true, NodeRepair: true, Unbuilt: []string{GateCapacityBuffer}, LogLevel: LogDebug, MinValuesPolicy: MinValuesBestEffort}
		}},
		{name: "flags win over the environment",
			env:  map[string]string{"CLUSTER_NAME": "from-env", "BATCH_IDLE_DURATION": "5s", "FEATURE_GATES": "SpotToSpotConsolidation=true", "MIN_VALUES_POLICY": "BestEffort"},
			args: []string{"--cluster-name=from-flag", "--batch-idle-duration=3s", "--feature-gates=SpotToSpotConsolidation=false", "--min-values-policy=Strict"},
			want: func(s *settings) { s.ClusterName, s.BatchIdle = "from-flag", 3*time.Second }},
		{name: "the prefix delegation flag wins over the VPC CNI's variable",
			env:  map[string]string{"ENABLE_PREFIX_DELEGATION": "true"},
			args: []string{"--vpc-prefix-delegation=false"},
			want: func(*settings) {}},
		{name: "the environment fills what the flags leave out",
			env:  map[string]string{"CLUSTER_NAME": "from-env", "BATCH_IDLE_DURATION": "5s"},
			args: []string{"--cluster-name=from-flag"},
			want: func(s *settings) { s.ClusterName, s.BatchIdle = "from-flag", 5*time.Second }},
		{name: "a bad duration names the variable and the fix", env: map[string]string{"BATCH_MAX_DURATION": "ten"},
			// The flag package zeroes a duration it cannot parse; the error stops the sidecar.
			want: func(s *settings) { s.BatchMax = 0 },
			err:  `environment variable BATCH_MAX_DURATION="ten" (--batch-max-duration) is not a duration such as 10s: parse error`},
		{name: "a bad boolean names the variable and the fix", env: map[string]string{"ISOLATED_VPC": "yes please"},
			want: func(*settings) {},
			err:  `environment variable ISOLATED_VPC="yes please" (--isolated-vpc) is not true or false: parse error`},
		{name: "an unknown feature gate is named", env: map[string]string{"FEATURE_GATES": "SpotToSpotConsolidation=true,Drift=true"},
			want: func(s *settings) { s.SpotToSpot = true },
			err:  `environment variable FEATURE_GATES="SpotToSpotConsolidation=true,Drift=true" (--feature-gates) is not Name=true,Other=false with the gates of --feature-gates: unknown feature gate "Drift": known gates are CapacityBuffer, NodeOverlay, NodeRepair, ReservedCapacity, SpotToSpotConsolidation, StaticCapacity`},
		{name: "a feature gate without a value", args: []string{"--feature-gates=NodeRepair"},
			want: func(*settings) {},
			err:  `invalid value "NodeRepair" for flag -feature-gates: feature gate "NodeRepair" has no value: write NodeRepair=true or NodeRepair=false`},
		{name: "a bad min values policy", env: map[string]string{"MIN_VALUES_POLICY": "Loose"},
			want: func(*settings) {},
			err:  `environment variable MIN_VALUES_POLICY="Loose" (--min-values-policy) is not Strict or BestEffort: min values policy "Loose": want Strict or BestEffort`},
		{name: "a bad log level", env: map[string]string{"LOG_LEVEL": "verbose"},
			want: func(*settings) {},
			err:  `environment variable LOG_LEVEL="verbose" (--log-level) is not debug, info or error: log level "verbose": want debug, info or error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("tailor-provisioner", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			opts := BindFlags(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				err = ApplyEnvironment(fs, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.err, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			want := defaults
			tt.want(&want)
			gotSettings := settings{
				ClusterName: opts.ClusterName, ClusterEndpoint: opts.ClusterEndpoint, InterruptionQueue: opts.InterruptionQueue,
				IsolatedVPC: opts.IsolatedVPC, PrefixDelegation: opts.PrefixDelegation, ReservedENIs: opts.ReservedENIs, VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent,
				BatchIdle: opts.BatchIdle, BatchMax: opts.BatchMax,
				SpotToSpot: opts.FeatureGates.Enabled(GateSpotToSpotConsolidation), NodeRepair: opts.FeatureGates.Enabled(GateNodeRepair),
				Unbuilt: opts.FeatureGates.Unbuilt(), LogLevel: opts.LogLevel, MinValuesPolicy: opts.MinValuesPolicy,
			}
			if diff := cmp.Diff(want, gotSettings); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}
