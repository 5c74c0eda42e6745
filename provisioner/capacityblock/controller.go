// Package capacityblock drains the nodes of EC2 capacity blocks before they end. EC2
// terminates a capacity block's instances 30 minutes before the block ends; once an
// EC2NodeClass's status reports a block expiring, or its end is nearer than
// awsv1.CapacityBlockExpiryWarning (the status is resolved again only every few minutes),
// each NodeClaim launched into it is handled like an interrupted one: marked Interrupted with the termination time as its deadline,
// its node cordoned, replacement capacity launched for its pods, and the NodeClaim deleted
// so that the termination controller drains the node while the instance still runs.
package capacityblock

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/interruption"
	tailormetrics "github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
)

// ReasonCapacityBlockExpiring is the Interrupted condition's and the events' reason.
const ReasonCapacityBlockExpiring = "CapacityBlockExpiring"

// TerminationLead is how long before a capacity block's end EC2 terminates its instances.
const TerminationLead = 30 * time.Minute

// recheck is how often a class with capacity blocks is looked at again, for NodeClaims
// launched into a block while it turned expiring; sooner when a block turns expiring sooner.
const recheck = time.Minute

// Controller drains the NodeClaims of expiring capacity blocks, per EC2NodeClass.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder
	clock    clock.Clock
	replacer interruption.Replacer
}

// NewController returns a Controller; replacer, when not nil, launches capacity for the
// pods of a node before it drains.
func NewController(kube client.Client, recorder record.EventRecorder, clk clock.Clock, replacer interruption.Replacer) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, recorder: recorder, clock: clk, replacer: replacer}
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("capacityblock").
		For(&awsv1.EC2NodeClass{}).
		Complete(c)
}

// Reconcile drains the NodeClaims of the class's expiring capacity blocks.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var result reconcile.Result
	now := c.clock.Now()
	for _, r := range class.Status.CapacityReservations {
		if r.ReservationType != awsv1.CapacityReservationTypeCapacityBlock || r.EndTime == nil {
			continue
		}
		wait := recheck
		if expiring := r.EndTime.Add(-awsv1.CapacityBlockExpiryWarning); r.State == awsv1.CapacityReservationStateExpiring || !now.Before(expiring) {
			if err := c.drainBlock(ctx, r); err != nil {
				return reconcile.Result{}, err
			}
		} else {
			wait = min(wait, expiring.Sub(now))
		}
		if result.RequeueAfter == 0 || wait < result.RequeueAfter {
			result.RequeueAfter = wait
		}
	}
	return result, nil
}

// drainBlock hands each NodeClaim of the block, not yet deleted, to the drain.
func (c *Controller) drainBlock(ctx context.Context, r awsv1.CapacityReservation) error {
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{karpv1.CapacityReservationIDLabelKey: r.ID}); err != nil {
		return fmt.Errorf("listing NodeClaims of capacity block %s: %w", r.ID, err)
	}
	deadline := r.EndTime.Add(-TerminationLead).UTC()
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if err := c.interrupt(ctx, nc, r.ID, deadline); err != nil {
			return err
		}
	}
	return nil
}

// interrupt does what an interruption does to the NodeClaim, with the block's termination
// as deadline.
func (c *Controller) interrupt(ctx context.Context, nc *karpv1.NodeClaim, block string, deadline time.Time) error {
	logger := log.FromContext(ctx).WithValues("nodeClaim", klog.KObj(nc), "capacityReservation", block)
	message := fmt.Sprintf("capacity block %s ends; EC2 terminates its instances at %s", block, deadline.Format(time.RFC3339))
	if nc.Annotations[interruption.DeadlineAnnotationKey] == "" {
		patch := client.MergeFrom(nc.DeepCopy())
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[interruption.DeadlineAnnotationKey] = deadline.Format(time.RFC3339)
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("annotating NodeClaim %s: %w", nc.Name, err))
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	nodeclaim.SetCondition(nc, interruption.ConditionTypeInterrupted, metav1.ConditionTrue, ReasonCapacityBlockExpiring, message)
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("marking NodeClaim %s interrupted: %w", nc.Name, err))
	}
	node, err := nodeclaim.NodeOf(ctx, c.kube, nc)
	if err != nil {
		return err
	}
	c.recorder.Event(nc, corev1.EventTypeWarning, ReasonCapacityBlockExpiring, message)
	if node != nil {
		c.recorder.Event(node, corev1.EventTypeWarning, ReasonCapacityBlockExpiring, message)
		if err := nodeclaim.Cordon(ctx, c.kube, node); err != nil {
			return err
		}
	}
	if c.replacer != nil {
		// The instance goes whatever happens: a failed pre-launch only means the pods wait
		// for the provisioner once evicted.
		if err := c.replacer.Prelaunch(ctx, nc.Name); err != nil {
			logger.Error(err, "failed to launch replacement capacity ahead of the drain")
		}
	}
	if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeClaim %s: %w", nc.Name, err)
	}
	tailormetrics.NodeClaimDisrupted(nc, ReasonCapacityBlockExpiring, "")
	logger.Info("deleting the NodeClaim of an expiring capacity block", "deadline", deadline)
	return nil
}
