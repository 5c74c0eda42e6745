package localaws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestLaunchTemplates(t *testing.T) {
	h := newHarness(t, Options{})
	image := h.imageID(t, al2023X86Parameter)
	created, err := h.ec2.CreateLaunchTemplate(h.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("tailor/general/abc"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:  aws.String(image),
			UserData: aws.String("IyEvYmluL2Jhc2gK"),
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
				HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
			},
			SecurityGroupIds:   []string{"sg-1"},
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("nodes")},
		},
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags:         []ec2types.Tag{{Key: aws.String("tailor.sh/cluster"), Value: aws.String("tailor-local")}},
		}},
	})
	require.NoError(t, err)
	id := aws.ToString(created.LaunchTemplate.LaunchTemplateId)
	require.Regexp(t, `^lt-[0-9a-f]{17}$`, id)
	require.Equal(t, testStart, aws.ToTime(created.LaunchTemplate.CreateTime))
	require.Equal(t, int64(1), aws.ToInt64(created.LaunchTemplate.LatestVersionNumber))
	other := h.launchTemplate(t, "other", image, "")

	t.Run("create", func(t *testing.T) {
		tests := []struct {
			name     string
			input    ec2.CreateLaunchTemplateInput
			wantCode string
		}{
			{
				name:     "duplicate name",
				input:    ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("other"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)}},
				wantCode: "InvalidLaunchTemplateName.AlreadyExistsException",
			},
			{
				name:     "malformed name",
				input:    ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("a b"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)}},
				wantCode: "InvalidLaunchTemplateName.MalformedException",
			},
			{
				name:     "user data not base64",
				input:    ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad-user-data"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String("not base64!")}},
				wantCode: "InvalidUserData.Malformed",
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := h.ec2.CreateLaunchTemplate(h.ctx, &tt.input)
				require.Equal(t, tt.wantCode, errorCode(t, err))
			})
		}
	})

	t.Run("describe", func(t *testing.T) {
		tests := []struct {
			name     string
			input    ec2.DescribeLaunchTemplatesInput
			want     []string
			wantCode string
		}{
			{name: "all", want: []string{"tailor/general/abc", "other"}},
			{name: "by name", input: ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"other"}}, want: []string{"other"}},
			{name: "by id", input: ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}}, want: []string{"tailor/general/abc"}},
			{name: "by tag", input: ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:tailor.sh/cluster"), Values: []string{"tailor-local"}}}}, want: []string{"tailor/general/abc"}},
			{name: "by name wildcard", input: ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("launch-template-name"), Values: []string{"tailor/*"}}}}, want: []string{"tailor/general/abc"}},
			{name: "unknown name", input: ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"missing"}}, wantCode: "InvalidLaunchTemplateName.NotFoundException"},
			{name: "unknown id", input: ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{"lt-00000000000000000"}}, wantCode: "InvalidLaunchTemplateId.NotFound"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out, err := h.ec2.DescribeLaunchTemplates(h.ctx, &tt.input)
				require.Equal(t, tt.wantCode, errorCode(t, err))
				if err != nil {
					return
				}
				var got []string
				for _, lt := range out.LaunchTemplates {
					got = append(got, aws.ToString(lt.LaunchTemplateName))
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("launch templates (-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("delete", func(t *testing.T) {
		deleted, err := h.ec2.DeleteLaunchTemplate(h.ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(other)})
		require.NoError(t, err)
		require.Equal(t, "other", aws.ToString(deleted.LaunchTemplate.LaunchTemplateName))
		_, err = h.ec2.DeleteLaunchTemplate(h.ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("other")})
		require.Equal(t, "InvalidLaunchTemplateName.NotFoundException", errorCode(t, err))
		_, err = h.ec2.DeleteLaunchTemplate(h.ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(other)})
		require.Equal(t, "InvalidLaunchTemplateId.NotFound", errorCode(t, err))
	})
}

func TestCreateLaunchTemplateClientTokenReturnsTheSameTemplate(t *testing.T) {
	h := newHarness(t, Options{})
	input := &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("idempotent"),
		ClientToken:        aws.String("token-1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(h.imageID(t, al2023X86Parameter))},
	}
	first, err := h.ec2.CreateLaunchTemplate(h.ctx, input)
	require.NoError(t, err)
	second, err := h.ec2.CreateLaunchTemplate(h.ctx, input)
	require.NoError(t, err)
	require.Equal(t, aws.ToString(first.LaunchTemplate.LaunchTemplateId), aws.ToString(second.LaunchTemplate.LaunchTemplateId))
}
