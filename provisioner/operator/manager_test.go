package operator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

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
