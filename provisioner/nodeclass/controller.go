// Package nodeclass keeps EC2NodeClass status current: the subnets, security groups, AMIs
// and instance profile its selectors resolve to, and whether it can be used (Ready).
package nodeclass

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// resyncInterval is how often selectors are resolved again, to notice new subnets or AMIs.
const resyncInterval = 5 * time.Minute

// Resolver resolves a node class's selectors.
type Resolver interface {
	ResolveNodeClass(ctx context.Context, class *awsv1.EC2NodeClass) (awsv1.EC2NodeClassStatus, error)
}

// Controller writes EC2NodeClass status.
type Controller struct {
	kube     client.Client
	resolver Resolver
}

// NewController returns a Controller.
func NewController(kube client.Client, resolver Resolver) *Controller {
	return &Controller{kube: kube, resolver: resolver}
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclass.status").For(&awsv1.EC2NodeClass{}).Complete(c)
}

// Reconcile resolves the class and records the outcome.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := class.DeepCopy()
	resolved, err := c.resolver.ResolveNodeClass(ctx, class)
	conditions := class.Status.Conditions
	if err != nil {
		class.Status.Conditions = conditions
		meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{
			Type: awsv1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "ResolutionFailed",
			Message: err.Error(), ObservedGeneration: class.Generation,
		})
	} else {
		class.Status = resolved
		class.Status.Conditions = conditions
		for _, t := range []string{awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady, awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeReady} {
			meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{
				Type: t, Status: metav1.ConditionTrue, Reason: "Resolved", ObservedGeneration: class.Generation,
			})
		}
	}
	if !equality.Semantic.DeepEqual(before.Status, class.Status) {
		if err := c.kube.Status().Patch(ctx, class, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, fmt.Errorf("updating EC2NodeClass status: %w", err)
		}
	}
	return reconcile.Result{RequeueAfter: resyncInterval}, nil
}
