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

// The EKS-optimized Windows AMIs are found through their latest-release SSM parameters and
// described as Windows images, x86_64 only.
func TestWindowsSSMParametersAndImages(t *testing.T) {
	h := newHarness(t, Options{})
	type image struct {
		Name, Arch, Platform, PlatformDetails, UsageOperation, RootDevice string
	}
	tests := []struct {
		parameter string
		want      image
	}{
		{
			parameter: "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "/image_id",
			want:      image{"Windows_Server-2022-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "-2026.11.12", "x86_64", "windows", "Windows", "RunInstances:0002", "/dev/sda1"},
		},
		{
			parameter: "/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "/image_id",
			want:      image{"Windows_Server-2019-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "-2026.11.12", "x86_64", "windows", "Windows", "RunInstances:0002", "/dev/sda1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.parameter, func(t *testing.T) {
			out, err := h.ssm.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String(tt.parameter)})
			require.NoError(t, err)
			images, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(out.Parameter.Value)}})
			require.NoError(t, err)
			require.Len(t, images.Images, 1)
			img := images.Images[0]
			got := image{aws.ToString(img.Name), string(img.Architecture), string(img.Platform), aws.ToString(img.PlatformDetails), aws.ToString(img.UsageOperation), aws.ToString(img.RootDeviceName)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("image (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the platform filter lists the Windows images", func(t *testing.T) {
		out, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("platform"), Values: []string{"windows"}}}})
		require.NoError(t, err)
		var got []string
		for _, img := range out.Images {
			got = append(got, aws.ToString(img.Name))
		}
		want := []string{
			"Windows_Server-2019-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "-2026.10.15", "Windows_Server-2019-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "-2026.11.12",
			"Windows_Server-2022-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "-2026.10.15", "Windows_Server-2022-English-Core-EKS_Optimized-" + DefaultKubernetesVersion + "-2026.11.12",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Windows images (-want +got):\n%s", diff)
		}
	})
}
