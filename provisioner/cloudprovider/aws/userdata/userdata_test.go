package userdata

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

// claimBootstrap is what a NodeClaim with labels, taints, startup taints and a node class
// with kubelet settings asks of a node; Create adds karpenter.sh/unregistered:NoExecute.
func claimBootstrap() Bootstrap {
	return Bootstrap{
		Cluster: ClusterInfo{Name: "prod", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
		Labels:  map[string]string{karpv1.NodePoolLabelKey: "general", "team": "payments", karpv1.CapacityTypeLabelKey: "spot"},
		Taints: []corev1.Taint{
			karpv1.UnregisteredNoExecuteTaint,
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/warming", Effect: corev1.TaintEffectNoExecute},
		},
		Kubelet: &awsv1.KubeletConfiguration{
			MaxPods: ptr.To[int32](110), ClusterDNS: []string{"10.100.0.10"},
			SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
			KubeReserved:   map[string]string{"memory": "512Mi"},
			EvictionHard:   map[string]string{"memory.available": "5%", "nodefs.available": "10%"},
		},
	}
}

func TestUserData(t *testing.T) {
	with := func(change func(*Bootstrap)) Bootstrap {
		b := claimBootstrap()
		change(&b)
		return b
	}
	tests := []struct {
		name   string
		family string
		golden string
		b      Bootstrap
	}{
		{
			name:   "AL2023: labels, taints and kubelet settings reach nodeadm",
			family: awsv1.AMIFamilyAL2023, golden: "al2023-nodeconfig.golden",
			b: Bootstrap{
				Cluster: ClusterInfo{Name: "prod", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
				Labels:  map[string]string{karpv1.NodePoolLabelKey: "general", "team": "payments", karpv1.CapacityTypeLabelKey: "spot"},
				Taints:  []corev1.Taint{karpv1.UnregisteredNoExecuteTaint, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
				Kubelet: &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](110), ClusterDNS: []string{"10.100.0.10"}, SystemReserved: map[string]string{"cpu": "100m"}},
			},
		},
		{
			name:   "AL2023: the node class's own script runs before nodeadm's configuration",
			family: awsv1.AMIFamilyAL2023, golden: "al2023-custom-script.golden",
			b: Bootstrap{
				Cluster: ClusterInfo{Name: "prod", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
				Labels:  map[string]string{karpv1.NodePoolLabelKey: "general"},
				Custom:  "#!/bin/bash\necho hello > /etc/motd\n",
			},
		},
		{
			name:   "AL2023: a NodeClaim's labels, taints and startup taints with RAID0 instance storage",
			family: awsv1.AMIFamilyAL2023, golden: "al2023-raid0.golden",
			b: with(func(b *Bootstrap) { b.RAID0 = true }),
		},
		{
			name:   "AL2023: the parts of a MIME userData come first, in order",
			family: awsv1.AMIFamilyAL2023, golden: "al2023-custom-mime.golden",
			b: with(func(b *Bootstrap) {
				b.Custom = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho one\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n--BOUNDARY--\n"
			}),
		},
		{
			name:   "AL2: the node class's script, then bootstrap.sh with the NodeClaim and kubelet settings",
			family: awsv1.AMIFamilyAL2, golden: "al2-bootstrap.golden",
			b: with(func(b *Bootstrap) { b.Custom = "#!/bin/bash\necho hello > /etc/motd\n" }),
		},
		{
			name:   "AL2: RAID0 instance storage, cluster DNS from the service CIDR and max pods left to bootstrap.sh",
			family: awsv1.AMIFamilyAL2, golden: "al2-raid0.golden",
			b: with(func(b *Bootstrap) {
				b.RAID0 = true
				b.Kubelet = nil
				b.Cluster.ServiceCIDR = "172.20.0.0/16"
			}),
		},
		{
			name:   "Bottlerocket: the node class's TOML with Tailor's cluster, labels, taints and kubelet settings over it",
			family: awsv1.AMIFamilyBottlerocket, golden: "bottlerocket-settings.golden",
			b: with(func(b *Bootstrap) {
				b.Custom = `[settings.kubernetes]
cluster-name = "not-this-one"
api-server = "https://wrong.example.com"
image-gc-high-threshold-percent = 80

[settings.kubernetes.node-labels]
team = "overridden-by-the-nodeclaim"
"example.com/os" = "bottlerocket"

[settings.kubernetes.node-taints]
"example.com/special" = ["true:NoSchedule"]

[settings.host-containers.admin]
enabled = true
`
			}),
		},
		{
			name:   "Bottlerocket: RAID0 instance storage through bootstrap commands",
			family: awsv1.AMIFamilyBottlerocket, golden: "bottlerocket-raid0.golden",
			b: with(func(b *Bootstrap) {
				b.RAID0 = true
				b.Kubelet = nil
			}),
		},
		{
			name:   "Windows2022: the node class's PowerShell, then Start-EKSBootstrap.ps1 with the NodeClaim and kubelet settings",
			family: awsv1.AMIFamilyWindows2022, golden: "windows2022-bootstrap.golden",
			b: with(func(b *Bootstrap) {
				b.Custom = "<powershell>\nSet-TimeZone -Id 'UTC'\n</powershell>\n"
				b.Cluster.Name = "prod's"
			}),
		},
		{
			name:   "Windows2019: 2Gi system-reserved memory, cluster DNS from the service CIDR and max pods left to the bootstrap",
			family: awsv1.AMIFamilyWindows2019, golden: "windows2019-defaults.golden",
			b: with(func(b *Bootstrap) {
				b.Kubelet = nil
				b.Cluster.ServiceCIDR = "172.20.0.0/16"
			}),
		},
		{
			name:   "Custom: the node class's user data alone, unchanged",
			family: awsv1.AMIFamilyCustom, golden: "custom.golden",
			b: with(func(b *Bootstrap) { b.Custom = "#!/bin/bash\n/opt/bootstrap --cluster prod\n" }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := Render(tt.family, tt.b)
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

func TestUserDataErrors(t *testing.T) {
	tests := []struct {
		name    string
		family  string
		custom  string
		wantErr string
	}{
		{
			name: "Bottlerocket userData that is not TOML", family: awsv1.AMIFamilyBottlerocket, custom: "#!/bin/bash\necho hi\n",
			wantErr: "reading userData as Bottlerocket TOML: toml: line 2: expected '.' or '=', but got 'h' instead",
		},
		{
			name: "Bottlerocket userData whose kubernetes settings are not a table", family: awsv1.AMIFamilyBottlerocket, custom: "[settings]\nkubernetes = 1\n",
			wantErr: "reading userData as Bottlerocket TOML: kubernetes is a int64, not a table",
		},
		{
			name: "an unknown family", family: "Windows2025",
			wantErr: `unknown AMI family "Windows2025": use AL2023, AL2, Bottlerocket, Windows2019, Windows2022 or Custom`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := claimBootstrap()
			b.Custom = tt.custom
			_, err := Render(tt.family, b)
			if err == nil {
				t.Fatalf("Render() succeeded, want error %q", tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantErr, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
