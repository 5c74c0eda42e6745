// Package nodeclass keeps EC2NodeClass status current: the subnets, security groups, AMIs
// and instance profile its selectors resolve to, and whether it can be used (Ready). It holds
// every class with a finalizer, so that a deleted class waits for its NodeClaims to go and
// then has what Tailor created in AWS for it deleted.
package nodeclass

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// resyncInterval is how often selectors are resolved again, to notice new subnets or AMIs.
const resyncInterval = 5 * time.Minute

// TerminationFinalizer holds a deleted EC2NodeClass until its NodeClaims are gone and its
// AWS resources deleted; Karpenter's name, so classes it finalized carry over.
const TerminationFinalizer = awsv1.Group + "/termination"

// nodeClaimsPollInterval is how often a deleted class looks again for its NodeClaims.
const nodeClaimsPollInterval = 10 * time.Second

// Event reasons on a deleted EC2NodeClass.
const (
	// ReasonWaitingOnNodeClaims: NodeClaims still use the class.
	ReasonWaitingOnNodeClaims = "WaitingOnNodeClaimTermination"
	// ReasonCleanupFailed: deleting the class's AWS resources failed; it is tried again.
	ReasonCleanupFailed = "CleanupFailed"
)

// ReasonResolutionFailed is the reason of the Ready condition of a class whose selectors
// could not be resolved.
const ReasonResolutionFailed = "ResolutionFailed"

// Resolver resolves a node class's selectors.
type Resolver interface {
	ResolveNodeClass(ctx context.Context, class *awsv1.EC2NodeClass) (awsv1.EC2NodeClassStatus, error)
}

// Cleaner deletes what the cloud provider created for a node class.
type Cleaner interface {
	DeleteNodeClassResources(ctx context.Context, class *awsv1.EC2NodeClass) error
}

// Controller writes EC2NodeClass status and finalizes deleted classes.
type Controller struct {
	kube     client.Client
	resolver Resolver
	cleaner  Cleaner
	recorder record.EventRecorder
	clock    clock.WithTicker
	// failures space out the resolutions of a class that keeps failing.
	failures *backoff.Failures
}

// NewController returns a Controller.
func NewController(kube client.Client, resolver Resolver, cleaner Cleaner, recorder record.EventRecorder, clk clock.WithTicker) *Controller {
	return &Controller{kube: kube, resolver: resolver, cleaner: cleaner, recorder: recorder, clock: clk, failures: backoff.New(clk, backoff.DefaultInitial, backoff.DefaultMax)}
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
	if !class.DeletionTimestamp.IsZero() {
		return c.finalize(ctx, class)
	}
	if !controllerutil.ContainsFinalizer(class, TerminationFinalizer) {
		patch := client.MergeFromWithOptions(class.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(class, TerminationFinalizer)
		if err := c.kube.Patch(ctx, class, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("adding the finalizer: %w", err))
		}
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
		log.FromContext(ctx).Error(err, "failed to resolve EC2NodeClass", "retryIn", result.RequeueAfter.String())
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
		// The resolver's own conditions report what is optional, such as a capacity
		// reservation term that matches nothing; they leave Ready alone.
		for _, cond := range resolved.Conditions {
			cond.ObservedGeneration = class.Generation
			meta.SetStatusCondition(&class.Status.Conditions, cond)
		}
	}
	if !equality.Semantic.DeepEqual(before.Status, class.Status) {
		if err := c.kube.Status().Patch(ctx, class, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, fmt.Errorf("updating EC2NodeClass status: %w", err)
		}
	}
	return result, nil
}

// finalize deletes what Tailor created in AWS for a deleted class once no NodeClaim uses it,
// then lets the class go. While NodeClaims use it, it says which and looks again later.
func (c *Controller) finalize(ctx context.Context, class *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(class, TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeClaims: %w", err)
	}
	var using []string
	for _, nc := range claims.Items {
		if ref := nc.Spec.NodeClassRef; ref != nil && ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass" && ref.Name == class.Name {
			using = append(using, nc.Name)
		}
	}
	if len(using) > 0 {
		sort.Strings(using)
		c.recorder.Eventf(class, corev1.EventTypeNormal, ReasonWaitingOnNodeClaims, "Waiting on NodeClaim termination for %s", namesMessage(using))
		return reconcile.Result{RequeueAfter: nodeClaimsPollInterval}, nil
	}
	if err := c.cleaner.DeleteNodeClassResources(ctx, class); err != nil {
		c.recorder.Event(class, corev1.EventTypeWarning, ReasonCleanupFailed, cloudprovider.Message(err))
		return reconcile.Result{}, fmt.Errorf("deleting the AWS resources of EC2NodeClass %s: %w", class.Name, err)
	}
	patch := client.MergeFromWithOptions(class.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(class, TerminationFinalizer)
	if err := c.kube.Patch(ctx, class, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("removing the finalizer: %w", err))
	}
	c.failures.Forget(class.Name)
	return reconcile.Result{}, nil
}

// maxNamesInMessage bounds the NodeClaims an event names.
const maxNamesInMessage = 5

// namesMessage lists the first names and how many more there are.
func namesMessage(names []string) string {
	if len(names) <= maxNamesInMessage {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamesInMessage], ", "), len(names)-maxNamesInMessage)
}
