package aws

import (
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestAL2023UserData(t *testing.T) {
	tests := []struct {
		name   string
		golden string
		b      bootstrap
	}{
		{
			name:   "labels, taints and kubelet settings reach nodeadm",
			golden: "al2023-nodeconfig.golden",
			b: bootstrap{
				cluster: ClusterInfo{Name: "prod", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
				labels:  map[string]string{karpv1.NodePoolLabelKey: "general", "team": "payments", karpv1.CapacityTypeLabelKey: "spot"},
				taints:  []corev1.Taint{karpv1.UnregisteredNoExecuteTaint, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
				kubelet: &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](110), ClusterDNS: []string{"10.100.0.10"}, SystemReserved: map[string]string{"cpu": "100m"}},
			},
		},
		{
			name:   "the node class's own script runs before nodeadm's configuration",
			golden: "al2023-custom-script.golden",
			b: bootstrap{
				cluster: ClusterInfo{Name: "prod", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
				labels:  map[string]string{karpv1.NodePoolLabelKey: "general"},
				custom:  "#!/bin/bash\necho hello > /etc/motd\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := al2023UserData(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := base64.StdEncoding.DecodeString(encoded)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden file (run go test -update): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("user data (-want +got):\n%s", diff)
			}
		})
	}
}
