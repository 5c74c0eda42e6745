// Package drift marks NodeClaims whose node no longer matches what would be launched today,
// as Karpenter v1 defines it. Static drift compares hashes: a static field of the NodePool
// template changed since the NodeClaim was made from it (NodePoolDrifted), or one of the
// EC2NodeClass since its instance was launched (NodeClassDrifted). Dynamic drift compares
// what the node is with what would be chosen now: its labels no longer satisfy the
// NodePool's requirements (RequirementsDrifted), or the EC2NodeClass no longer resolves to
// the AMI the instance booted (AMIDrifted), to its subnet (SubnetDrifted) or to its security
// groups (SecurityGroupDrifted), as the launch recorded them on the NodeClaim.
//
// A hash is only compared with one of the same version: a NodeClaim stamped with another
// version of a hash (or none, made before hashes had versions) is stamped again with the
// current hash instead, so that a Tailor upgrade that changes how a hash is computed never
// replaces nodes by itself. The controller only sets the NodeClaim's Drifted condition, and
// clears it once the node is back in line; the disruption controller replaces drifted nodes
// within the NodePool's budgets.
package drift

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// Reasons of the Drifted condition.
const (
	// ReasonNodePoolDrifted: the static hash of the NodePool's template differs from the
	// NodeClaim's.
	ReasonNodePoolDrifted = "NodePoolDrifted"
	// ReasonRequirementsDrifted: the NodeClaim's labels no longer satisfy the NodePool's
	// requirements.
	ReasonRequirementsDrifted = "RequirementsDrifted"
	// ReasonNodeClassDrifted: the static hash of the EC2NodeClass differs from the one the
	// instance was launched with.
	ReasonNodeClassDrifted = "NodeClassDrifted"
	// ReasonAMIDrifted: the instance's AMI is not among those the EC2NodeClass resolves to.
	ReasonAMIDrifted = "AMIDrifted"
	// ReasonSubnetDrifted: the instance's subnet is not among those the EC2NodeClass resolves to.
	ReasonSubnetDrifted = "SubnetDrifted"
	// ReasonSecurityGroupDrifted: the instance's security groups are not those the
	// EC2NodeClass resolves to.
	ReasonSecurityGroupDrifted = "SecurityGroupDrifted"
	// ReasonNotDrifted: the node matches its NodePool and EC2NodeClass again.
	ReasonNotDrifted = "NotDrifted"
)

// Controller keeps the Drifted condition of NodeClaims current.
type Controller struct {
	kube client.Client
}

// NewController returns a Controller.
func NewController(kube client.Client) *Controller {
	return &Controller{kube: kube}
}

// Register adds the controller to the manager: it watches NodeClaims, NodePools mapped to
// their NodeClaims, and EC2NodeClasses mapped to the NodeClaims of the NodePools using them.
// Only a NodePool's spec (a new generation) can drift its NodeClaims: its status changes
// with every NodeClaim launched or gone, and each change would otherwise reconcile every
// NodeClaim of the NodePool.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeclaim.drift").
		For(&karpv1.NodeClaim{}).
		Watches(&karpv1.NodePool{}, handler.EnqueueRequestsFromMapFunc(c.nodePoolToNodeClaims), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(c.nodeClassToNodeClaims)).
		Complete(c)
}

func (c *Controller) nodePoolToNodeClaims(ctx context.Context, o client.Object) []reconcile.Request {
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeClaims of NodePool", "nodePool", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims.Items))
	for i := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
	}
	return out
}

func (c *Controller) nodeClassToNodeClaims(ctx context.Context, o client.Object) []reconcile.Request {
	pools := &karpv1.NodePoolList{}
	if err := c.kube.List(ctx, pools); err != nil {
		log.FromContext(ctx).Error(err, "listing NodePools", "ec2NodeClass", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range pools.Items {
		if ref := pools.Items[i].Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, c.nodePoolToNodeClaims(ctx, &pools.Items[i])...)
		}
	}
	return out
}

// Reconcile stamps the NodeClaim with current hashes where its own are of another version,
// then sets its Drifted condition from its NodePool and EC2NodeClass.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// A NodeClaim not launched yet has no instance to compare; one being deleted is going.
	if nc.DeletionTimestamp != nil || nc.Status.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	np, class, err := c.owners(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if stamps := restamps(nc, np, class); len(stamps) > 0 {
		before := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		maps.Copy(nc.Annotations, stamps)
		if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("stamping hashes on NodeClaim %s: %w", nc.Name, err))
		}
		log.FromContext(ctx).Info("stamped NodeClaim with current hashes", "nodeClaim", nc.Name, "annotations", stamps)
	}
	reason, message := drift(nc, np, class)
	before := nc.DeepCopy()
	switch {
	case reason != "":
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeDrifted, metav1.ConditionTrue, reason, message)
	case meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted) != nil:
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeDrifted, metav1.ConditionFalse, ReasonNotDrifted, "")
	}
	if equality.Semantic.DeepEqual(before.Status, nc.Status) {
		return reconcile.Result{}, nil
	}
	// Against the version read: conditions are patched as a whole list, and a stale copy
	// must not undo what the lifecycle controller recorded since.
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("recording drift of NodeClaim %s: %w", nc.Name, err))
	}
	log.FromContext(ctx).Info("drift changed", "nodeClaim", nc.Name, "drifted", reason != "", "reason", reason, "message", message)
	return reconcile.Result{}, nil
}

// owners returns the NodeClaim's NodePool and EC2NodeClass, each nil when it is gone (or,
// for the class, not referenced).
func (c *Controller) owners(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodePool, *awsv1.EC2NodeClass, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Labels[karpv1.NodePoolLabelKey]}, np); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("getting NodePool of NodeClaim %s: %w", nc.Name, err)
		}
		np = nil
	}
	if nc.Spec.NodeClassRef == nil {
		return np, nil, nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Spec.NodeClassRef.Name}, class); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("getting EC2NodeClass of NodeClaim %s: %w", nc.Name, err)
		}
		class = nil
	}
	return np, class, nil
}

// restamps returns the hash annotations to write on the NodeClaim: the current hash and
// version of its NodePool, and of its EC2NodeClass, where the NodeClaim's version differs.
func restamps(nc *karpv1.NodeClaim, np *karpv1.NodePool, class *awsv1.EC2NodeClass) map[string]string {
	out := map[string]string{}
	if np != nil && nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
		out[karpv1.NodePoolHashAnnotationKey] = np.Hash()
		out[karpv1.NodePoolHashVersionAnnotationKey] = karpv1.NodePoolHashVersion
	}
	if class != nil && nc.Annotations[awsv1.EC2NodeClassHashVersionAnnotationKey] != awsv1.EC2NodeClassHashVersion {
		out[awsv1.EC2NodeClassHashAnnotationKey] = class.Hash()
		out[awsv1.EC2NodeClassHashVersionAnnotationKey] = awsv1.EC2NodeClassHashVersion
	}
	return out
}

// drift returns why the NodeClaim drifted, or "" when it has not or cannot tell: static
// drift first, then the NodePool's requirements, then what the EC2NodeClass resolves to.
func drift(nc *karpv1.NodeClaim, np *karpv1.NodePool, class *awsv1.EC2NodeClass) (reason, message string) {
	// Without its NodePool the NodeClaim has nothing to drift from.
	if np == nil {
		return "", ""
	}
	if have, ok := nc.Annotations[karpv1.NodePoolHashAnnotationKey]; ok && nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] == karpv1.NodePoolHashVersion {
		if want := np.Hash(); have != want {
			return ReasonNodePoolDrifted, fmt.Sprintf("NodePool %s template changed (hash %s, NodeClaim made from %s)", np.Name, want, have)
		}
	}
	if r, ok := unsatisfied(np.Spec.Template.Spec.Requirements, nc.Labels); !ok {
		return ReasonRequirementsDrifted, fmt.Sprintf("labels no longer satisfy NodePool %s requirement %s", np.Name, requirements.Describe(r))
	}
	if class == nil {
		return "", ""
	}
	if have, ok := nc.Annotations[awsv1.EC2NodeClassHashAnnotationKey]; ok && nc.Annotations[awsv1.EC2NodeClassHashVersionAnnotationKey] == awsv1.EC2NodeClassHashVersion {
		if want := class.Hash(); have != want {
			return ReasonNodeClassDrifted, fmt.Sprintf("EC2NodeClass %s changed (hash %s, instance launched with %s)", class.Name, want, have)
		}
	}
	// Until the class resolves AMIs there is nothing to compare with.
	amis := amisFor(class.Status.AMIs, nc.Labels)
	if nc.Status.ImageID != "" && len(class.Status.AMIs) > 0 && !slices.Contains(amis, nc.Status.ImageID) {
		return ReasonAMIDrifted, fmt.Sprintf("AMI %s is not among the AMIs EC2NodeClass %s resolves to for this node %v", nc.Status.ImageID, class.Name, amis)
	}
	var subnets, groups []string
	for _, s := range class.Status.Subnets {
		subnets = append(subnets, s.ID)
	}
	for _, g := range class.Status.SecurityGroups {
		groups = append(groups, g.ID)
	}
	if subnet := nc.Annotations[awsv1.SubnetAnnotationKey]; subnet != "" && len(subnets) > 0 && !slices.Contains(subnets, subnet) {
		return ReasonSubnetDrifted, fmt.Sprintf("subnet %s is not among the subnets EC2NodeClass %s resolves to %v", subnet, class.Name, subnets)
	}
	if have := nc.Annotations[awsv1.SecurityGroupsAnnotationKey]; have != "" && len(groups) > 0 {
		slices.Sort(groups)
		if want := strings.Join(groups, ","); have != want {
			return ReasonSecurityGroupDrifted, fmt.Sprintf("security groups %s are not those EC2NodeClass %s resolves to (%s)", have, class.Name, want)
		}
	}
	return "", ""
}

// unsatisfied returns the first requirement the NodeClaim's labels do not satisfy, and
// false; true when they satisfy them all. A requirement on a well-known label the NodeClaim
// does not carry (the region, say, which the launch does not record) is taken as satisfied:
// the labels cannot tell, and guessing would replace every node of the NodePool. Any other
// label a requirement needs was put on the NodeClaim when it was made, from the template.
func unsatisfied(reqs []karpv1.NodeSelectorRequirementWithMinValues, labels map[string]string) (karpv1.NodeSelectorRequirementWithMinValues, bool) {
	for _, r := range reqs {
		if _, ok := labels[r.Key]; !ok && karpv1.WellKnownLabels[r.Key] {
			continue
		}
		if !requirements.MatchesOne(r.Key, r.Operator, r.Values, labels) {
			return r, false
		}
	}
	return karpv1.NodeSelectorRequirementWithMinValues{}, true
}

// amisFor returns the ids of the AMIs whose requirements (architecture, say) the node's
// labels satisfy.
func amisFor(amis []awsv1.AMI, labels map[string]string) []string {
	var out []string
	for _, ami := range amis {
		serves := true
		for _, r := range ami.Requirements {
			serves = serves && requirements.MatchesOne(r.Key, r.Operator, r.Values, labels)
		}
		if serves {
			out = append(out, ami.ID)
		}
	}
	return out
}
