package aws

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// DeleteNodeClassResources deletes what Tailor created in AWS for an EC2NodeClass being
// deleted, once no NodeClaim uses it: its launch templates and, when the class names a role
// rather than an instanceProfile, the instance profile made for that role, unless another
// EC2NodeClass of the cluster still uses the same role (the profile is per role). An
// instanceProfile the class names is the user's and is kept. What is already gone is no error.
func (p *Provider) DeleteNodeClassResources(ctx context.Context, class *awsv1.EC2NodeClass) error {
	logger := klog.FromContext(ctx)
	deleted, err := p.deleteClassTemplates(ctx, class.Name)
	if err != nil {
		return err
	}
	if len(deleted) > 0 {
		logger.Info("Deleted the launch templates of the EC2NodeClass", "ec2NodeClass", klog.KObj(class), "launchTemplates", deleted)
	}
	if class.Spec.InstanceProfile != nil || class.Spec.Role == "" {
		return nil
	}
	classes := &awsv1.EC2NodeClassList{}
	if err := p.kube.List(ctx, classes); err != nil {
		return fmt.Errorf("listing EC2NodeClasses: %w", err)
	}
	for _, other := range classes.Items {
		if other.UID != class.UID && other.DeletionTimestamp.IsZero() && other.Spec.InstanceProfile == nil && other.Spec.Role == class.Spec.Role {
			logger.Info("Keeping the instance profile of the role: another EC2NodeClass uses it", "ec2NodeClass", klog.KObj(class), "role", class.Spec.Role, "other", other.Name)
			return nil
		}
	}
	if err := p.deleteInstanceProfile(ctx, class.Spec.Role); err != nil {
		return err
	}
	logger.Info("Deleted the instance profile of the EC2NodeClass", "ec2NodeClass", klog.KObj(class), "instanceProfile", p.instanceProfileName(class.Spec.Role))
	return nil
}

// deleteClassTemplates deletes this cluster's launch templates tagged for the class and
// returns their names.
func (p *Provider) deleteClassTemplates(ctx context.Context, className string) ([]string, error) {
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + clusterTagKey(p.opts.Cluster.Name)), Values: []string{"owned"}},
			{Name: aws.String("tag:" + tagNodeClass), Values: []string{className}},
		},
	})
	var names []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			names = append(names, aws.ToString(lt.LaunchTemplateName))
		}
	}
	sort.Strings(names)
	for _, name := range names {
		p.mu.Lock()
		delete(p.templates, name)
		p.mu.Unlock()
		_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && !isAPIError(err, "InvalidLaunchTemplateName.NotFoundException") {
			return nil, fmt.Errorf("deleting launch template %s: %w", name, err)
		}
	}
	return names, nil
}
