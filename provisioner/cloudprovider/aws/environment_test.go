package aws

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

// describeCluster is an EKS DescribeCluster that answers out, or fails with err; it counts
// its calls.
type describeCluster struct {
	out   *ekstypes.Cluster
	err   error
	calls int
}

func (d *describeCluster) DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	d.calls++
	if d.err != nil {
		return nil, d.err
	}
	return &eks.DescribeClusterOutput{Cluster: d.out}, nil
}

func TestSettleCluster(t *testing.T) {
	kubeconfig := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("kube-ca")}}
	eksCluster := &ekstypes.Cluster{Endpoint: aws.String("https://eks.example"), CertificateAuthority: &ekstypes.Certificate{Data: aws.String("ZWtzLWNh")},
		KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{ServiceIpv4Cidr: aws.String("172.20.0.0/16")}}
	denied := errors.New("AccessDeniedException: not authorized to perform eks:DescribeCluster")
	tests := []struct {
		name        string
		given       ClusterInfo
		isolatedVPC bool
		inCluster   bool
		eks         describeCluster
		want        ClusterInfo
		wantErr     string
		wantCalls   int
	}{
		{
			name: "EKS fills what the flags leave out", given: ClusterInfo{Name: testCluster}, inCluster: true, eks: describeCluster{out: eksCluster},
			want: ClusterInfo{Name: testCluster, Endpoint: "https://eks.example", CABundle: "ZWtzLWNh", ServiceCIDR: "172.20.0.0/16"}, wantCalls: 1,
		},
		{
			name: "an isolated VPC takes the flags without asking EKS", given: ClusterInfo{Name: testCluster, Endpoint: "https://flag.example"}, isolatedVPC: true,
			eks: describeCluster{out: eksCluster}, want: ClusterInfo{Name: testCluster, Endpoint: "https://flag.example"},
		},
		{
			name: "outside a cluster the kubeconfig's host and CA are the last resort", given: ClusterInfo{Name: testCluster, ServiceCIDR: "10.100.0.0/16"},
			eks:  describeCluster{err: denied},
			want: ClusterInfo{Name: testCluster, Endpoint: "https://127.0.0.1:6443", CABundle: "a3ViZS1jYQ==", ServiceCIDR: "10.100.0.0/16"}, wantCalls: 1,
		},
		{
			name: "inside a cluster a failed discovery names the flags", given: ClusterInfo{Name: testCluster}, inCluster: true, eks: describeCluster{err: denied},
			want:    ClusterInfo{Name: testCluster},
			wantErr: "discovering the cluster (or set --cluster-endpoint, --cluster-ca-bundle and --service-cidr): describing EKS cluster \"test-cluster\": " + denied.Error(), wantCalls: 1,
		},
		{
			name: "what neither flags nor EKS give is named", given: ClusterInfo{Name: testCluster}, inCluster: true, eks: describeCluster{out: &ekstypes.Cluster{}},
			want: ClusterInfo{Name: testCluster},
			wantErr: "--cluster-endpoint is not set and EKS DescribeCluster of \"test-cluster\" gave none\n" +
				"--cluster-ca-bundle is not set and EKS DescribeCluster of \"test-cluster\" gave none\n" +
				"--service-cidr is not set and could not be discovered from EKS DescribeCluster of \"test-cluster\"", wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := settleCluster(context.Background(), kubeconfig, tt.given, tt.isolatedVPC, &tt.eks, tt.inCluster)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cluster (-want +got):\n%s", diff)
			}
			if tt.eks.calls != tt.wantCalls {
				t.Errorf("%d DescribeCluster calls, want %d", tt.eks.calls, tt.wantCalls)
			}
		})
	}
}

func TestSettleClusterThatDoesNotExistIsAnErrorEvenOutsideACluster(t *testing.T) {
	d := &describeCluster{err: &ekstypes.ResourceNotFoundException{Message: aws.String("No cluster found for name: no-such-cluster.")}}
	_, err := settleCluster(context.Background(), &rest.Config{Host: "https://127.0.0.1:6443"}, ClusterInfo{Name: "no-such-cluster"}, false, d, false)
	if !IsClusterNotFound(err) {
		t.Errorf("settleCluster() = %v, want a cluster-not-found error", err)
	}
}

func TestTrimPlusKeepsTheMinorVersionsDigits(t *testing.T) {
	for minor, want := range map[string]string{"34": "34", "34+": "34", "30-eks": "30", "": ""} {
		if got := trimPlus(minor); got != want {
			t.Errorf("trimPlus(%q) = %q, want %q", minor, got, want)
		}
	}
}
