package aws

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// eksEndpoint starts a local endpoint whose cluster testCluster DescribeCluster reports as
// configured, and returns the provider's clients for it and its URL.
func eksEndpoint(t *testing.T, cluster localaws.EKSCluster) (Clients, string) {
	t.Helper()
	endpoint, err := localaws.New(localaws.Options{ClusterName: testCluster, EKS: cluster})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(endpoint)
	t.Cleanup(srv.Close)
	return NewClients(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL),
	}), srv.URL
}

// requestCounts reads the endpoint's request counts by action from its admin API.
func requestCounts(t *testing.T, url string) map[string]int {
	t.Helper()
	resp, err := http.Get(url + "/_admin/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	counts := map[string]int{}
	if err := json.NewDecoder(resp.Body).Decode(&counts); err != nil {
		t.Fatal(err)
	}
	return counts
}

func TestDiscoverCluster(t *testing.T) {
	eksCluster := localaws.EKSCluster{Endpoint: "https://eks.example", CertificateAuthority: "ZWtzLWNh", ServiceIPv4CIDR: "172.20.0.0/16"}
	tests := []struct {
		name    string
		cluster localaws.EKSCluster
		given   ClusterInfo
		want    ClusterInfo
		// wantCalls is how many DescribeCluster requests EKS receives.
		wantCalls int
	}{
		{
			name:      "EKS fills what the flags leave out",
			cluster:   eksCluster,
			given:     ClusterInfo{Name: testCluster},
			want:      ClusterInfo{Name: testCluster, Endpoint: "https://eks.example", CABundle: "ZWtzLWNh", ServiceCIDR: "172.20.0.0/16"},
			wantCalls: 1,
		},
		{
			name:      "flags win over EKS",
			cluster:   eksCluster,
			given:     ClusterInfo{Name: testCluster, Endpoint: "https://flag.example", ServiceCIDR: "10.100.0.0/16"},
			want:      ClusterInfo{Name: testCluster, Endpoint: "https://flag.example", CABundle: "ZWtzLWNh", ServiceCIDR: "10.100.0.0/16"},
			wantCalls: 1,
		},
		{
			name:    "complete flags: EKS is not asked",
			cluster: eksCluster,
			given:   ClusterInfo{Name: testCluster, Endpoint: "https://flag.example", CABundle: "ZmxhZy1jYQ==", ServiceCIDR: "10.100.0.0/16"},
			want:    ClusterInfo{Name: testCluster, Endpoint: "https://flag.example", CABundle: "ZmxhZy1jYQ==", ServiceCIDR: "10.100.0.0/16"},
		},
		{
			name:      "an IPv6 cluster's service CIDR is its IPv6 range",
			cluster:   localaws.EKSCluster{Endpoint: "https://eks.example", CertificateAuthority: "ZWtzLWNh", ServiceIPv6CIDR: "fd00:10::/108"},
			given:     ClusterInfo{Name: testCluster},
			want:      ClusterInfo{Name: testCluster, Endpoint: "https://eks.example", CABundle: "ZWtzLWNh", ServiceCIDR: "fd00:10::/108"},
			wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clients, url := eksEndpoint(t, tt.cluster)
			got, err := DiscoverCluster(context.Background(), clients.EKS, tt.given)
			if err != nil {
				t.Fatalf("DiscoverCluster() = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cluster (-want +got):\n%s", diff)
			}
			if got := requestCounts(t, url)["DescribeCluster"]; got != tt.wantCalls {
				t.Errorf("%d DescribeCluster requests, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestDiscoverClusterThatDoesNotExistNamesTheFlag(t *testing.T) {
	clients, _ := eksEndpoint(t, localaws.EKSCluster{})
	_, err := DiscoverCluster(context.Background(), clients.EKS, ClusterInfo{Name: "no-such-cluster"})
	if err == nil {
		t.Fatal("DiscoverCluster() succeeded for a cluster that does not exist")
	}
	if !IsClusterNotFound(err) {
		t.Errorf("IsClusterNotFound(%v) = false", err)
	}
	for _, want := range []string{`"no-such-cluster"`, "--cluster-name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %s", err, want)
		}
	}
}

func TestIsolatedVPCCallsNeitherPricingNorEKS(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// An isolated sidecar is given every cluster setting, so discovery has nothing to ask.
	given := ClusterInfo{Name: testCluster, Endpoint: "https://127.0.0.1:6443", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"}
	cluster, err := DiscoverCluster(ctx, NewClients(h.cfg).EKS, given)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Cluster: cluster, Region: "us-east-1", KubernetesVersion: localaws.DefaultKubernetesVersion, IsolatedVPC: true}, NewClients(h.cfg), h.kube, h.kube, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	its, err := p.InstanceTypes(ctx, nodePool())
	if err != nil {
		t.Fatal(err)
	}
	want := pricing.Embedded().OnDemand["m5.large"]
	if want == 0 {
		t.Fatal("the embedded catalog has no on-demand price for m5.large")
	}
	onDemand := 0
	for _, it := range its {
		if it.Name != "m5.large" {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == karpv1.CapacityTypeOnDemand {
				onDemand++
				if o.Price != want {
					t.Errorf("on-demand price of m5.large in %s = %v, want the embedded %v", o.Zone, o.Price, want)
				}
			}
		}
	}
	if onDemand != len(zones) {
		t.Errorf("m5.large has %d on-demand offerings, want one per zone (%d)", onDemand, len(zones))
	}
	counts := requestCounts(t, h.url)
	for _, action := range []string{"GetProducts", "DescribeCluster"} {
		if counts[action] != 0 {
			t.Errorf("%d %s requests in an isolated VPC, want none", counts[action], action)
		}
	}
	if diff := cmp.Diff(PriceSources{OnDemand: PriceSourceEmbedded, Spot: PriceSourceAPI}, p.PriceSources()); diff != "" {
		t.Errorf("price sources (-want +got):\n%s", diff)
	}
	if got := metricValue(t, "tailor_cloudprovider_price_source", map[string]string{"kind": pricing.KindOnDemand, "source": PriceSourceEmbedded}); got != 1 {
		t.Errorf("tailor_cloudprovider_price_source{kind=on-demand,source=embedded} = %v, want 1", got)
	}
}
