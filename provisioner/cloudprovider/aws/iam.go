package aws

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// instanceProfileName is the instance profile Tailor manages for a node role: stable per
// cluster and role, within IAM's 128-character limit.
func (p *Provider) instanceProfileName(role string) string {
	sum := sha256.Sum256([]byte(p.opts.Cluster.Name + "/" + role))
	return fmt.Sprintf("tailor_%s_%x", truncate(p.opts.Cluster.Name, 64), sum[:8])
}

// ensureInstanceProfile returns the name of an instance profile holding role, creating the
// profile (tagged as this cluster's) the first time.
func (p *Provider) ensureInstanceProfile(ctx context.Context, role string) (string, error) {
	name := p.instanceProfileName(role)
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var notFound *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &notFound):
		_, err = p.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name),
			Tags: []iamtypes.Tag{
				{Key: aws.String(clusterTagKey(p.opts.Cluster.Name)), Value: aws.String("owned")},
				{Key: aws.String(tagNodeClassRole), Value: aws.String(role)},
			},
		})
		var exists *iamtypes.EntityAlreadyExistsException
		if err != nil && !errors.As(err, &exists) {
			return "", fmt.Errorf("creating instance profile %s: %w", name, err)
		}
	case err != nil:
		return "", fmt.Errorf("getting instance profile %s: %w", name, err)
	default:
		for _, r := range out.InstanceProfile.Roles {
			if aws.ToString(r.RoleName) == role {
				return name, nil
			}
		}
	}
	if _, err := p.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: aws.String(name), RoleName: aws.String(role),
	}); err != nil {
		var limit *iamtypes.LimitExceededException
		if !errors.As(err, &limit) {
			return "", fmt.Errorf("adding role %s to instance profile %s: %w", role, name, err)
		}
	}
	return name, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// deleteInstanceProfile removes the role from the instance profile Tailor created for it and
// deletes the profile; a profile already gone is no error.
func (p *Provider) deleteInstanceProfile(ctx context.Context, role string) error {
	name := p.instanceProfileName(role)
	var notFound *iamtypes.NoSuchEntityException
	_, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	if err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("removing role %s from instance profile %s: %w", role, name, err)
	}
	if _, err := p.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	return nil
}
