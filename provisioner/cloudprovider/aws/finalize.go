package aws

import (
	"context"
	"fmt"

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
	deleted, err := p.launcher.DeleteClassTemplates(ctx, class.Name)
	if err != nil {
		return err
	}
	if len(deleted) > 0 {
		logger.Info("deleted the launch templates of the EC2NodeClass", "ec2NodeClass", klog.KObj(class), "launchTemplates", deleted)
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
			logger.Info("keeping the instance profile of the role: another EC2NodeClass uses it", "ec2NodeClass", klog.KObj(class), "role", class.Spec.Role, "other", other.Name)
			return nil
		}
	}
	if err := p.profiles.Delete(ctx, class.Spec.Role); err != nil {
		return err
	}
	logger.Info("deleted the instance profile of the EC2NodeClass", "ec2NodeClass", klog.KObj(class), "instanceProfile", p.profiles.Name(class.Spec.Role))
	return nil
}
