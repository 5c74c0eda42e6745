package localaws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestDescribeImages(t *testing.T) {
	h := newHarness(t, Options{})
	al2023 := h.imageID(t, al2023X86Parameter)
	tests := []struct {
		name     string
		input    ec2.DescribeImagesInput
		want     []string
		wantCode string
	}{
		{
			name: "amazon AL2023 x86_64 by name wildcard",
			input: ec2.DescribeImagesInput{
				Owners:  []string{"amazon"},
				Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-" + DefaultKubernetesVersion + "-*"}}},
			},
			want: []string{
				"amazon-eks-node-al2023-x86_64-standard-" + DefaultKubernetesVersion + "-v20260901",
				"amazon-eks-node-al2023-x86_64-standard-" + DefaultKubernetesVersion + "-v20261001",
				"amazon-eks-node-al2023-x86_64-standard-" + DefaultKubernetesVersion + "-v20261101",
			},
		},
		{
			name: "bottlerocket arm64 by architecture",
			input: ec2.DescribeImagesInput{
				Filters: []ec2types.Filter{
					{Name: aws.String("name"), Values: []string{"bottlerocket-aws-k8s-" + DefaultKubernetesVersion + "-*"}},
					{Name: aws.String("architecture"), Values: []string{"arm64"}},
				},
			},
			want: []string{
				"bottlerocket-aws-k8s-" + DefaultKubernetesVersion + "-aarch64-v1.48.0-" + hexDigits(8, "bottlerocket", "1.48.0"),
				"bottlerocket-aws-k8s-" + DefaultKubernetesVersion + "-aarch64-v1.49.0-" + hexDigits(8, "bottlerocket", "1.49.0"),
				"bottlerocket-aws-k8s-" + DefaultKubernetesVersion + "-aarch64-v1.50.0-" + hexDigits(8, "bottlerocket", "1.50.0"),
			},
		},
		{
			name:  "AL2 by name with a single-character wildcard",
			input: ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-" + DefaultKubernetesVersion + "-v20261?01"}}}},
			want:  []string{"amazon-eks-node-" + DefaultKubernetesVersion + "-v20261001", "amazon-eks-node-" + DefaultKubernetesVersion + "-v20261101"},
		},
		{
			name:  "by id",
			input: ec2.DescribeImagesInput{ImageIds: []string{al2023}},
			want:  []string{"amazon-eks-node-al2023-x86_64-standard-" + DefaultKubernetesVersion + "-v20261101"},
		},
		{
			name:  "own images by discovery tag",
			input: ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"tailor-local"}}}},
			want:  []string{"tailor-local-custom-node-x86_64-v1"},
		},
		{
			name:  "own images by owner self",
			input: ec2.DescribeImagesInput{Owners: []string{"self"}, Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{"available"}}}},
			want:  []string{"tailor-local-custom-node-x86_64-v1"},
		},
		{
			name:     "unknown id",
			input:    ec2.DescribeImagesInput{ImageIds: []string{"ami-00000000000000000"}},
			wantCode: "InvalidAMIID.NotFound",
		},
		{
			name:     "malformed id",
			input:    ec2.DescribeImagesInput{ImageIds: []string{"image-1"}},
			wantCode: "InvalidAMIID.Malformed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.ec2.DescribeImages(h.ctx, &tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
			if err != nil {
				return
			}
			var got []string
			for _, img := range out.Images {
				require.Equal(t, ec2types.ImageStateAvailable, img.State)
				require.NotEmpty(t, img.BlockDeviceMappings)
				got = append(got, aws.ToString(img.Name))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSSMParametersPointAtTheNewestImages(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		parameter string
		wantName  string
		wantArch  ec2types.ArchitectureValues
	}{
		{al2023X86Parameter, "amazon-eks-node-al2023-x86_64-standard-" + DefaultKubernetesVersion + "-v20261101", ec2types.ArchitectureValuesX8664},
		{al2023ARMParameter, "amazon-eks-node-al2023-arm64-standard-" + DefaultKubernetesVersion + "-v20261101", ec2types.ArchitectureValuesArm64},
		{"/aws/service/eks/optimized-ami/" + DefaultKubernetesVersion + "/amazon-linux-2/recommended/image_id", "amazon-eks-node-" + DefaultKubernetesVersion + "-v20261101", ec2types.ArchitectureValuesX8664},
		{"/aws/service/eks/optimized-ami/" + DefaultKubernetesVersion + "/amazon-linux-2-arm64/recommended/image_id", "amazon-eks-arm64-node-" + DefaultKubernetesVersion + "-v20261101", ec2types.ArchitectureValuesArm64},
		{"/aws/service/bottlerocket/aws-k8s-" + DefaultKubernetesVersion + "/x86_64/latest/image_id", "bottlerocket-aws-k8s-" + DefaultKubernetesVersion + "-x86_64-v1.50.0-" + hexDigits(8, "bottlerocket", "1.50.0"), ec2types.ArchitectureValuesX8664},
		{"/aws/service/bottlerocket/aws-k8s-" + DefaultKubernetesVersion + "/arm64/latest/image_id", "bottlerocket-aws-k8s-" + DefaultKubernetesVersion + "-aarch64-v1.50.0-" + hexDigits(8, "bottlerocket", "1.50.0"), ec2types.ArchitectureValuesArm64},
	}
	for _, tt := range tests {
		t.Run(tt.parameter, func(t *testing.T) {
			out, err := h.ssm.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String(tt.parameter)})
			require.NoError(t, err)
			require.Equal(t, "aws:ec2:image", aws.ToString(out.Parameter.DataType))
			require.Equal(t, int64(1), out.Parameter.Version)
			require.False(t, aws.ToTime(out.Parameter.LastModifiedDate).IsZero())
			images, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(out.Parameter.Value)}})
			require.NoError(t, err)
			require.Len(t, images.Images, 1)
			require.Equal(t, tt.wantName, aws.ToString(images.Images[0].Name))
			require.Equal(t, tt.wantArch, images.Images[0].Architecture)
		})
	}
}

func TestSSMGetParameters(t *testing.T) {
	h := newHarness(t, Options{})
	out, err := h.ssm.GetParameters(h.ctx, &ssm.GetParametersInput{Names: []string{al2023X86Parameter, "/no/such/parameter", al2023ARMParameter}})
	require.NoError(t, err)
	var names []string
	for _, p := range out.Parameters {
		names = append(names, aws.ToString(p.Name))
	}
	if diff := cmp.Diff([]string{al2023ARMParameter, al2023X86Parameter}, names); diff != "" {
		t.Errorf("parameters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/no/such/parameter"}, out.InvalidParameters); diff != "" {
		t.Errorf("invalid parameters (-want +got):\n%s", diff)
	}
}

func TestSSMErrors(t *testing.T) {
	h := newHarness(t, Options{})
	_, err := h.ssm.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.99/amazon-linux-2/recommended/image_id")})
	require.Equal(t, "ParameterNotFound", errorCode(t, err))
	_, err = h.ssm.GetParameters(h.ctx, &ssm.GetParametersInput{Names: make([]string, 11)})
	require.Equal(t, "ValidationException", errorCode(t, err))
}
