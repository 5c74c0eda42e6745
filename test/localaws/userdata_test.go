package localaws

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// nodeadmConfig is a NodeConfig like the ones a provisioner writes for AL2023.
const nodeadmConfig = `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: tailor-local
    apiServerEndpoint: https://127.0.0.1:6443
    certificateAuthority: Y2E=
    cidr: 10.100.0.0/16
  kubelet:
    config:
      maxPods: 58
      clusterDNS: [10.100.0.10]
      kubeReserved: {cpu: 70m, memory: 574Mi, ephemeral-storage: 1Gi}
      systemReserved: {cpu: 100m, memory: 100Mi}
      evictionHard: {memory.available: 100Mi, nodefs.available: 10%}
    flags:
      - --node-labels=karpenter.sh/nodepool=general,team=a
      - --register-with-taints=karpenter.sh/unregistered:NoExecute,dedicated=gpu:NoSchedule
`

// mimeUserData encodes parts, each "content type\n\nbody", as base64 MIME multipart user data
// in the layout nodeadm reads.
func mimeUserData(parts ...string) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n")
	for _, p := range parts {
		contentType, body, _ := strings.Cut(p, "\n\n")
		b.WriteString("--//\nContent-Type: " + contentType + "\n\n" + body + "\n")
	}
	b.WriteString("--//--\n")
	return base64.StdEncoding.EncodeToString([]byte(b.String()))
}

func TestParseUserData(t *testing.T) {
	tests := []struct {
		name     string
		userData string
		want     settingsSummary
		wantErr  string
	}{
		{
			name:     "nodeadm MIME document with a shell script part",
			userData: mimeUserData("text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hello", "application/node.eks.aws\n\n---\n"+nodeadmConfig),
			want: settingsSummary{
				Labels:         map[string]string{"karpenter.sh/nodepool": "general", "team": "a"},
				Taints:         []string{"karpenter.sh/unregistered:NoExecute", "dedicated=gpu:NoSchedule"},
				MaxPods:        58,
				KubeReserved:   map[string]string{"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"},
				SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
				MemoryEviction: "100Mi",
				NodefsEviction: "10%",

				DefaultKubeReserved: true,
			},
		},
		{
			name:     "bare NodeConfig",
			userData: base64.StdEncoding.EncodeToString([]byte(nodeadmConfig)),
			want: settingsSummary{
				Labels:         map[string]string{"karpenter.sh/nodepool": "general", "team": "a"},
				Taints:         []string{"karpenter.sh/unregistered:NoExecute", "dedicated=gpu:NoSchedule"},
				MaxPods:        58,
				KubeReserved:   map[string]string{"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"},
				SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
				MemoryEviction: "100Mi",
				NodefsEviction: "10%",

				DefaultKubeReserved: true,
			},
		},
		{
			name: "later parts override and flags win over the configuration",
			userData: mimeUserData(
				"application/node.eks.aws\n\n"+nodeadmConfig,
				"application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 110\n      evictionHard: {memory.available: 5%}\n    flags: [--max-pods=20, --node-labels=team=b]",
			),
			want: settingsSummary{
				Labels:         map[string]string{"karpenter.sh/nodepool": "general", "team": "b"},
				Taints:         []string{"karpenter.sh/unregistered:NoExecute", "dedicated=gpu:NoSchedule"},
				MaxPods:        20,
				KubeReserved:   map[string]string{"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"},
				SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
				MemoryEviction: "5%",
				NodefsEviction: "10%",

				DefaultKubeReserved: true,
			},
		},
		{name: "empty", wantErr: "user data holds no NodeConfig"},
		{
			name:     "AL2 bootstrap.sh without kubelet arguments leaves kube-reserved to it",
			userData: mimeUserData("text/x-shellscript\n\n#!/bin/bash\n/etc/eks/bootstrap.sh demo"),
			want:     settingsSummary{Labels: map[string]string{}, DefaultKubeReserved: true},
		},
		{
			name:     "Bottlerocket TOML without kubelet settings leaves kube-reserved to it",
			userData: base64.StdEncoding.EncodeToString([]byte("[settings.kubernetes]\ncluster-name = \"demo\"\n")),
			want:     settingsSummary{Labels: map[string]string{}, DefaultKubeReserved: true},
		},
		{name: "only a shell script", userData: mimeUserData("text/x-shellscript\n\n#!/bin/bash\necho hello"), wantErr: "user data holds no NodeConfig"},
		{
			name:     "AL2 --max-pods without --use-max-pods false",
			userData: mimeUserData("text/x-shellscript\n\n#!/bin/bash\n/etc/eks/bootstrap.sh demo --kubelet-extra-args '--max-pods=20'"),
			wantErr:  "--max-pods in --kubelet-extra-args needs --use-max-pods false",
		},
		{
			name:     "AL2 unterminated quote",
			userData: mimeUserData("text/x-shellscript\n\n#!/bin/bash\n/etc/eks/bootstrap.sh demo --kubelet-extra-args '--max-pods=20"),
			wantErr:  "reading /etc/eks/bootstrap.sh arguments: unterminated single quote",
		},
		{
			name:     "Bottlerocket taint without an effect",
			userData: base64.StdEncoding.EncodeToString([]byte("[settings.kubernetes.node-taints]\ndedicated = [\"gpu\"]\n")),
			wantErr:  `reading Bottlerocket node-taints: taint "dedicated=gpu:" has effect ""`,
		},
		{name: "not base64", userData: "%%%", wantErr: "decoding base64 user data"},
		{
			name:     "taint without effect",
			userData: mimeUserData("application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [--register-with-taints=dedicated=gpu]"),
			wantErr:  `taint "dedicated=gpu" has no effect`,
		},
		{
			name:     "wrong kind",
			userData: mimeUserData("application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: ClusterConfig\n"),
			wantErr:  `got kind "ClusterConfig"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseUserData(tt.userData)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, summarizeSettings(got)); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

// settingsSummary is kubeletSettings in comparable form.
type settingsSummary struct {
	Labels         map[string]string
	Taints         []string
	MaxPods        int32
	KubeReserved   map[string]string
	SystemReserved map[string]string
	MemoryEviction string
	NodefsEviction string
	// DefaultKubeReserved and RAID0 say what the bootstrap fills in and sets up.
	DefaultKubeReserved bool
	RAID0               bool
}

func summarizeSettings(s kubeletSettings) settingsSummary {
	out := settingsSummary{
		Labels:         s.labels,
		KubeReserved:   quantities(s.kubeReserved),
		SystemReserved: quantities(s.systemReserved),
		MemoryEviction: s.memoryEviction,
		NodefsEviction: s.nodefsEviction,

		DefaultKubeReserved: s.defaultKubeReserved,
		RAID0:               s.raid0,
	}
	if s.maxPods != nil {
		out.MaxPods = *s.maxPods
	}
	for _, taint := range s.taints {
		out.Taints = append(out.Taints, taint.ToString())
	}
	return out
}

// quantities renders a resource list as strings, which compare without cmp options.
func quantities(list corev1.ResourceList) map[string]string {
	if len(list) == 0 {
		return nil
	}
	out := map[string]string{}
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}

// TestParseUserDataOfEachFamily reads the user data the provider's golden files hold for
// each AMI family, so that the simulated kubelet reads what the provider writes.
func TestParseUserDataOfEachFamily(t *testing.T) {
	claimLabels := map[string]string{"karpenter.sh/capacity-type": "spot", "karpenter.sh/nodepool": "general", "team": "payments"}
	claimTaints := []string{"karpenter.sh/unregistered:NoExecute", "dedicated=gpu:NoSchedule", "example.com/warming:NoExecute"}
	tests := []struct {
		golden string
		want   settingsSummary
	}{
		{
			golden: "al2023-raid0.golden",
			want: settingsSummary{
				Labels: claimLabels, Taints: claimTaints, MaxPods: 110,
				KubeReserved: map[string]string{"memory": "512Mi"}, SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
				MemoryEviction: "5%", NodefsEviction: "10%", DefaultKubeReserved: true, RAID0: true,
			},
		},
		{
			golden: "al2-bootstrap.golden",
			want: settingsSummary{
				Labels: claimLabels, Taints: claimTaints, MaxPods: 110,
				KubeReserved: map[string]string{"memory": "512Mi"}, SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
				MemoryEviction: "5%", NodefsEviction: "10%",
			},
		},
		{
			golden: "al2-raid0.golden",
			want:   settingsSummary{Labels: claimLabels, Taints: claimTaints, DefaultKubeReserved: true, RAID0: true},
		},
		{
			golden: "bottlerocket-settings.golden",
			want: settingsSummary{
				Labels: map[string]string{"example.com/os": "bottlerocket", "karpenter.sh/capacity-type": "spot", "karpenter.sh/nodepool": "general", "team": "payments"},
				// Sorted by key, as TOML tables have no order.
				Taints:       []string{"dedicated=gpu:NoSchedule", "example.com/special=true:NoSchedule", "example.com/warming:NoExecute", "karpenter.sh/unregistered:NoExecute"},
				MaxPods:      110,
				KubeReserved: map[string]string{"memory": "512Mi"}, SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
				MemoryEviction: "5%", NodefsEviction: "10%", DefaultKubeReserved: true,
			},
		},
		{
			golden: "windows2022-bootstrap.golden",
			want: settingsSummary{
				Labels: claimLabels, Taints: claimTaints, MaxPods: 110,
				KubeReserved: map[string]string{"memory": "512Mi"}, SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
				MemoryEviction: "5%", NodefsEviction: "10%",
			},
		},
		{
			golden: "windows2019-defaults.golden",
			want: settingsSummary{
				Labels: claimLabels, Taints: claimTaints,
				SystemReserved: map[string]string{"memory": "2Gi"}, DefaultKubeReserved: true,
			},
		},
		{
			golden: "bottlerocket-raid0.golden",
			want: settingsSummary{
				Labels:              claimLabels,
				Taints:              []string{"dedicated=gpu:NoSchedule", "example.com/warming:NoExecute", "karpenter.sh/unregistered:NoExecute"},
				DefaultKubeReserved: true, RAID0: true,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "..", "provisioner", "cloudprovider", "aws", "userdata", "testdata", tt.golden))
			require.NoError(t, err)
			got, err := parseUserData(base64.StdEncoding.EncodeToString(raw))
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, summarizeSettings(got)); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}
