// Package instanceprofile manages the IAM instance profiles Tailor creates for the roles of
// EC2NodeClasses.
package instanceprofile

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
)

// Provider creates, names and deletes the instance profiles of one cluster.
type Provider struct {
	iam     *iam.Client
	cluster string
}

// New returns the provider of the cluster's instance profiles.
func New(client *iam.Client, cluster string) *Provider {
	return &Provider{iam: client, cluster: cluster}
}

// Name is the instance profile Tailor manages for a node role: stable per
// cluster and role, within IAM's 128-character limit.
func (p *Provider) Name(role string) string {
	sum := sha256.Sum256([]byte(p.cluster + "/" + role))
	return fmt.Sprintf("tailor_%s_%x", truncate(p.cluster, 64), sum[:8])
}

// Ensure returns the name of an instance profile holding role, creating the
// profile (tagged as this cluster's) the first time.
func (p *Provider) Ensure(ctx context.Context, role string) (string, error) {
	name := p.Name(role)
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var notFound *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &notFound):
		_, err = p.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name),
			Tags: []iamtypes.Tag{
				{Key: aws.String(tags.ClusterKey(p.cluster)), Value: aws.String("owned")},
				{Key: aws.String(tags.NodeClassRole), Value: aws.String(role)},
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

// Delete removes the role from the instance profile Tailor created for it and
// deletes the profile; a profile already gone is no error.
func (p *Provider) Delete(ctx context.Context, role string) error {
	name := p.Name(role)
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
