package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidateNamesTheFlagToFix(t *testing.T) {
	valid := Options{
		SocketPath: "/var/run/tailor/provisioner.sock", ClusterName: "prod", BatchIdle: time.Second, BatchMax: 10 * time.Second,
		DisruptionInterval: 10 * time.Second, SpotToSpotSavings: 0.2,
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
