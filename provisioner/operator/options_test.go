package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestValidateNamesTheFlagToFix(t *testing.T) {
	valid := Options{
		SocketPath: "/var/run/tailor/provisioner.sock", ClusterName: "prod", BatchIdle: time.Second, BatchMax: 10 * time.Second,
		DisruptionInterval: 10 * time.Second, SpotToSpotSavings: 0.2, KubeAPIQPS: DefaultKubeAPIQPS, KubeAPIBurst: DefaultKubeAPIBurst,
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
		{name: "no API request rate", change: func(o *Options) { o.KubeAPIQPS = 0 }, want: "--kube-api-qps (0) must be positive"},
		{name: "a fractional API request rate", change: func(o *Options) { o.KubeAPIQPS, o.KubeAPIBurst = 0.5, 1 }},
		{name: "no API burst", change: func(o *Options) { o.KubeAPIBurst = 0 }, want: "--kube-api-burst (0) must be at least 1"},
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
