package aws

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

func TestAMIAliasesResolveThroughSSM(t *testing.T) {
	h := newHarness(t)
	// Bottlerocket names end in a build hash.
	buildHash := regexp.MustCompile(`-[0-9a-f]{8}$`)
	tests := []struct {
		name    string
		alias   string
		want    map[string]string
		wantErr string
	}{
		{
			name: "al2023 pinned to a release", alias: "al2023@v20261001",
			want: map[string]string{"amd64": "amazon-eks-node-al2023-x86_64-standard-" + localaws.DefaultKubernetesVersion + "-v20261001", "arm64": "amazon-eks-node-al2023-arm64-standard-" + localaws.DefaultKubernetesVersion + "-v20261001"},
		},
		{
			name: "al2023 latest is the recommended release", alias: "al2023@latest",
			want: map[string]string{"amd64": "amazon-eks-node-al2023-x86_64-standard-" + localaws.DefaultKubernetesVersion + "-v20261101", "arm64": "amazon-eks-node-al2023-arm64-standard-" + localaws.DefaultKubernetesVersion + "-v20261101"},
		},
		{
			name: "al2 pinned to a release", alias: "al2@v20260901",
			want: map[string]string{"amd64": "amazon-eks-node-" + localaws.DefaultKubernetesVersion + "-v20260901", "arm64": "amazon-eks-arm64-node-" + localaws.DefaultKubernetesVersion + "-v20260901"},
		},
		{
			name: "al2 latest", alias: "al2@latest",
			want: map[string]string{"amd64": "amazon-eks-node-" + localaws.DefaultKubernetesVersion + "-v20261101", "arm64": "amazon-eks-arm64-node-" + localaws.DefaultKubernetesVersion + "-v20261101"},
		},
		{
			name: "bottlerocket pinned to a release", alias: "bottlerocket@1.49.0",
			want: map[string]string{"amd64": "bottlerocket-aws-k8s-" + localaws.DefaultKubernetesVersion + "-x86_64-v1.49.0", "arm64": "bottlerocket-aws-k8s-" + localaws.DefaultKubernetesVersion + "-aarch64-v1.49.0"},
		},
		{
			name: "bottlerocket pinned with the v of its tags", alias: "bottlerocket@v1.48.0",
			want: map[string]string{"amd64": "bottlerocket-aws-k8s-" + localaws.DefaultKubernetesVersion + "-x86_64-v1.48.0", "arm64": "bottlerocket-aws-k8s-" + localaws.DefaultKubernetesVersion + "-aarch64-v1.48.0"},
		},
		{
			name: "bottlerocket latest", alias: "bottlerocket@latest",
			want: map[string]string{"amd64": "bottlerocket-aws-k8s-" + localaws.DefaultKubernetesVersion + "-x86_64-v1.50.0", "arm64": "bottlerocket-aws-k8s-" + localaws.DefaultKubernetesVersion + "-aarch64-v1.50.0"},
		},
		{
			name: "a release that does not exist names the alias and the fix", alias: "al2023@v20200101",
			wantErr: `resolving amiSelectorTerms: alias "al2023@v20200101": no al2023 release v20200101 for Kubernetes ` + localaws.DefaultKubernetesVersion + ` (SSM parameters ` +
				`/aws/service/eks/optimized-ami/` + localaws.DefaultKubernetesVersion + `/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-` + localaws.DefaultKubernetesVersion + `-v20200101/image_id, ` +
				`/aws/service/eks/optimized-ami/` + localaws.DefaultKubernetesVersion + `/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-` + localaws.DefaultKubernetesVersion + `-v20200101/image_id not found): ` +
				`pin a published release or use al2023@latest`,
		},
		{
			name: "a bottlerocket release that does not exist", alias: "bottlerocket@9.9.9",
			wantErr: `resolving amiSelectorTerms: alias "bottlerocket@9.9.9": no bottlerocket release 9.9.9 for Kubernetes ` + localaws.DefaultKubernetesVersion + ` (SSM parameters ` +
				`/aws/service/bottlerocket/aws-k8s-` + localaws.DefaultKubernetesVersion + `/arm64/9.9.9/image_id, /aws/service/bottlerocket/aws-k8s-` + localaws.DefaultKubernetesVersion + `/x86_64/9.9.9/image_id not found): ` +
				`pin a published release or use bottlerocket@latest`,
		},
		{
			name: "an alias without a version", alias: "al2@",
			wantErr: `resolving amiSelectorTerms: alias "al2@" has no version: write al2@latest or al2@<version>`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{
				Role:                       "NodeRole",
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: tt.alias}},
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			}}
			status, err := h.provider.ResolveNodeClass(context.Background(), class)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ResolveNodeClass() resolved %v, want error %q", status.AMIs, tt.wantErr)
				}
				if diff := cmp.Diff(tt.wantErr, err.Error()); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, ami := range status.AMIs {
				got[ami.Requirements[0].Values[0]] = buildHash.ReplaceAllString(ami.Name, "")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AMI names by architecture (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAMINameWithoutOwnerMatchesOnlyOwnAndAmazonImages(t *testing.T) {
	h := newHarness(t)
	// The local endpoint shares a newer look-alike of the EKS AL2023 image from another account.
	lookalikes := "amazon-eks-node-al2023-x86_64-standard-" + localaws.DefaultKubernetesVersion + "-*"
	tests := []struct {
		name string
		term awsv1.AMISelectorTerm
		want string
	}{
		{name: "a name alone defaults the owner to self and amazon", term: awsv1.AMISelectorTerm{Name: lookalikes}, want: "amazon-eks-node-al2023-x86_64-standard-" + localaws.DefaultKubernetesVersion + "-v20261101"},
		{name: "an owner set is the owner searched", term: awsv1.AMISelectorTerm{Name: lookalikes, Owner: "210987654321"}, want: "amazon-eks-node-al2023-x86_64-standard-" + localaws.DefaultKubernetesVersion + "-v20261201-community"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{
				Role:                       "NodeRole",
				AMIFamily:                  ptr.To("AL2023"),
				AMISelectorTerms:           []awsv1.AMISelectorTerm{tt.term},
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			}}
			status, err := h.provider.ResolveNodeClass(context.Background(), class)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ami := range status.AMIs {
				got = append(got, ami.Name)
			}
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("AMIs (-want +got):\n%s", diff)
			}
		})
	}
}

// Karpenter ignores the kubelet settings Bottlerocket has no setting for; Tailor refuses the
// EC2NodeClass, naming the field and the fix.
func TestBottlerocketRefusesKubeletSettingsItCannotCarry(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name    string
		kubelet awsv1.KubeletConfiguration
		wantErr string
	}{
		{name: "podsPerCore", kubelet: awsv1.KubeletConfiguration{PodsPerCore: ptr.To[int32](2)},
			wantErr: "spec.kubelet.podsPerCore has no Bottlerocket setting: remove it, or set maxPods, or use AL2023"},
		{name: "evictionSoft", kubelet: awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "500Mi"}},
			wantErr: "spec.kubelet.evictionSoft has no Bottlerocket setting: remove it, or use evictionHard, or use AL2023"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{
				Role:                       "NodeRole",
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
				Kubelet:                    &tt.kubelet,
			}}
			_, err := h.provider.ResolveNodeClass(context.Background(), class)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ResolveNodeClass() error = %v, want it to say %q", err, tt.wantErr)
			}
		})
	}
}
