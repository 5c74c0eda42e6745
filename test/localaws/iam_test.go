package localaws

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// profileSummary is the part of an InstanceProfile the tests check.
type profileSummary struct {
	Name, Path, Arn string
	Roles           []string
	Tags            map[string]string
}

func summarizeProfile(p *iamtypes.InstanceProfile) profileSummary {
	s := profileSummary{Name: aws.ToString(p.InstanceProfileName), Path: aws.ToString(p.Path), Arn: aws.ToString(p.Arn), Tags: map[string]string{}}
	for _, r := range p.Roles {
		s.Roles = append(s.Roles, aws.ToString(r.RoleName))
	}
	for _, t := range p.Tags {
		s.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return s
}

func TestInstanceProfiles(t *testing.T) {
	h := newHarness(t, Options{})
	name := aws.String("tailor_tailor-local_0123456789abcdef")

	_, err := h.iam.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name})
	var notFound *iamtypes.NoSuchEntityException
	require.True(t, errors.As(err, &notFound), "got %v", err)

	created, err := h.iam.CreateInstanceProfile(h.ctx, &iam.CreateInstanceProfileInput{
		InstanceProfileName: name,
		Tags:                []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/tailor-local"), Value: aws.String("owned")}},
	})
	require.NoError(t, err)
	require.Equal(t, testStart, aws.ToTime(created.InstanceProfile.CreateDate))
	require.Regexp(t, `^AIPA[0-9A-F]{17}$`, aws.ToString(created.InstanceProfile.InstanceProfileId))

	_, err = h.iam.CreateInstanceProfile(h.ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: name})
	var exists *iamtypes.EntityAlreadyExistsException
	require.True(t, errors.As(err, &exists), "got %v", err)

	_, err = h.iam.AddRoleToInstanceProfile(h.ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("KarpenterNodeRole-tailor-local")})
	require.NoError(t, err)
	_, err = h.iam.AddRoleToInstanceProfile(h.ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("another")})
	var limit *iamtypes.LimitExceededException
	require.True(t, errors.As(err, &limit), "got %v", err)

	got, err := h.iam.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name})
	require.NoError(t, err)
	want := profileSummary{
		Name:  *name,
		Path:  "/",
		Arn:   "arn:aws:iam::123456789012:instance-profile/" + *name,
		Roles: []string{"KarpenterNodeRole-tailor-local"},
		Tags:  map[string]string{"kubernetes.io/cluster/tailor-local": "owned"},
	}
	if diff := cmp.Diff(want, summarizeProfile(got.InstanceProfile)); diff != "" {
		t.Errorf("instance profile (-want +got):\n%s", diff)
	}

	_, err = h.iam.DeleteInstanceProfile(h.ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: name})
	var conflict *iamtypes.DeleteConflictException
	require.True(t, errors.As(err, &conflict), "got %v", err)
	_, err = h.iam.RemoveRoleFromInstanceProfile(h.ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("KarpenterNodeRole-tailor-local")})
	require.NoError(t, err)
	_, err = h.iam.DeleteInstanceProfile(h.ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: name})
	require.NoError(t, err)
	_, err = h.iam.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name})
	require.True(t, errors.As(err, &notFound), "got %v", err)
}
