// Package nodeclass keeps EC2NodeClass status current: the subnets, security groups, AMIs
// and instance profile its selectors resolve to, and whether it can be used (Ready).
package nodeclass

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// resyncInterval is how often selectors are resolved again, to notice new subnets or AMIs.
const resyncInterval = 5 * time.Minute

// ReasonResolutionFailed is the reason of the Ready condition of a class whose selectors
// could not be resolved.
const ReasonResolutionFailed = "ResolutionFailed"

// Resolver resolves a node class's selectors.
type Resolver interface {
	ResolveNodeClass(ctx context.Context, class *awsv1.EC2NodeClass) (awsv1.EC2NodeClassStatus, error)
}

// Controller writes EC2NodeClass status.
type Controller struct {
	kube     client.Client
	resolver Resolver
	clock    clock.WithTicker
	// failures space out the resolutions of a class that keeps failing.
	failures *backoff.Failures
}

// NewController returns a Controller.
func NewController(kube client.Client, resolver Resolver, clk clock.WithTicker) *Controller {
	return &Controller{kube: kube, resolver: resolver, clock: clk, failures: backoff.New(clk, backoff.DefaultInitial, backoff.DefaultMax)}
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclass.status").
		For(&awsv1.EC2NodeClass{}).
		WithOptions(controller.Options{NewQueue: backoff.NewQueue(c.clock)}).
		Complete(c)
}

// Reconcile resolves the class and records the outcome. A class that fails to resolve is
// tried again after a wait that doubles with each failure, up to five minutes, until its spec
// changes; its Ready condition carries the error without per-response details, so that it
// is written once rather than on every attempt.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, class); err != nil {
		if apierrors.IsNotFound(err) {
			c.failures.Forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	version := string(class.UID) + "/" + strconv.FormatInt(class.Generation, 10)
	if wait := c.failures.Wait(req.Name, version); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	before := class.DeepCopy()
	result := reconcile.Result{RequeueAfter: resyncInterval}
	resolved, err := c.resolver.ResolveNodeClass(ctx, class)
	if err != nil {
		result.RequeueAfter = c.failures.Failed(req.Name, version)
		log.FromContext(ctx).Error(err, "Failed to resolve EC2NodeClass", "retryIn", result.RequeueAfter.String())
		meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{
			Type: awsv1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: ReasonResolutionFailed,
			Message: cloudprovider.Message(err), ObservedGeneration: class.Generation,
		})
	} else {
		c.failures.Forget(req.Name)
		conditions := class.Status.Conditions
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
	return result, nil
}
