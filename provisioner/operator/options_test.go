package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		{name: "a negative saving per pod", change: func(o *Options) { o.MinSavingsPerPod = -0.01 },
			want: "--consolidation-min-savings-per-pod (-0.01) must not be negative; 0 takes any saving"},
		{name: "deletion cost steering without a patch rate", change: func(o *Options) { o.DeletionCostSchedulers = NameList{"tailor-scheduler"} },
			want: "--pod-deletion-cost-qps (0) must be positive; an empty --pod-deletion-cost-schedulers turns the steering off"},
		{name: "no deletion cost steering, no patch rate needed", change: func(o *Options) { o.DeletionCostSchedulers = nil }},
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
