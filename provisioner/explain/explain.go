// Package explain says why a pod is pending or where it is headed, from what the cluster
// records: the pod's status, the scheduler's last FailedScheduling event (its per-reason
// node counts), the provisioner's FailedProvisioning events (its per-NodePool reasons),
// and the NodeClaim whose planned-pods annotation lists the pod, with the NodeOverlays that
// select its offering. It serves `tailorctl explain`.
package explain

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// Event reasons explain reads.
const (
	// ReasonFailedScheduling is the scheduler's event for a pod no node can take.
	ReasonFailedScheduling = "FailedScheduling"
	// ReasonFailedProvisioning is the provisioner's event for a pod no NodePool can take
	// (provisioning.ReasonFailedProvisioning).
	ReasonFailedProvisioning = "FailedProvisioning"
	// ReasonGangNotProvisioned is the provisioner's event for a pod whose gang does not fit
	// whole (provisioning.ReasonGangNotProvisioned).
	ReasonGangNotProvisioned = "GangNotProvisioned"
	// ReasonOverQuota is the provisioner's event for a pod its namespace's ElasticQuota
	// would not admit (provisioning.ReasonOverQuota).
	ReasonOverQuota = "OverQuota"
)

// Explanation is what the cluster records about a pod's way to a node.
type Explanation struct {
	// Pod is namespace/name.
	Pod               string
	SchedulerName     string
	Phase             corev1.PodPhase
	NodeName          string
	NominatedNodeName string
	// Scheduling is the scheduler's latest FailedScheduling event, if any.
	Scheduling *SchedulingFailure
	// Provisioning are the provisioner's FailedProvisioning events, latest first.
	Provisioning []ProvisioningFailure
	// Withheld is the provisioner's latest event saying it launches nothing for the pod
	// although a NodePool could take it: its gang does not fit whole, or its quota would
	// not admit it.
	Withheld *Withheld
	// CapacityRejected is the launch limit's condition on the pod, if any: the scheduler
	// rejected the pod on capacity planned for it.
	CapacityRejected *CapacityRejected
	// Resize is the pod's in-place resize the kubelet has not carried out, if any.
	Resize *Resize
	// NodeClaim is the NodeClaim the pod is planned onto, if any.
	NodeClaim *NodeClaim
	// Replacement is a replacement before eviction the pod takes part in, if any: a copy
	// of it starts before it goes, or it is such a copy.
	Replacement *Replacement
}

// Replacement is a copy of a pod started before the pod is evicted (package surge), seen
// from either pod.
type Replacement struct {
	// IsCopy says the pod explained is the copy; Other is then the pod it replaces, and
	// otherwise its copy.
	IsCopy bool
	Other  string
	// CopyNode is the copy's node once bound, and CopyReady whether it serves.
	CopyNode  string
	CopyReady bool
	// Deadline is when the copy must be Ready, or the disruption is abandoned.
	Deadline time.Time
}

// Resize is a pod's pending in-place resize: its PodResizePending condition.
type Resize struct {
	// Reason is Deferred (the node may make room later) or Infeasible (the node cannot).
	Reason  string
	Message string
}

// CapacityRejected is the launch limit's pod condition (launchlimit.PodCondition).
type CapacityRejected struct {
	// Held is true while no capacity is launched for the pod: it backs off (Reason
	// BackingOff) or reached its limit (LaunchLimitReached).
	Held bool
	// Reason and Message are the condition's; the message opens with "planned capacity did
	// not fit: <plugin>: <reason>".
	Reason, Message string
	// Since is when the condition last changed.
	Since time.Time
}

// Cause is what rejected the pod on its planned capacity: the message's opening clause.
func (c *CapacityRejected) Cause() string {
	cause := c.Message
	for _, sep := range []string{" (node ", "; "} {
		if i := strings.Index(cause, sep); i >= 0 {
			cause = cause[:i]
		}
	}
	return cause
}

// Withheld is why the provisioner launches nothing for a pod a NodePool could take.
type Withheld struct {
	// Reason is the event's: GangNotProvisioned or OverQuota.
	Reason  string
	Message string
	Count   int32
}

// NodeClaim is a NodeClaim a pod is planned onto.
type NodeClaim struct {
	Name         string
	NodePool     string
	InstanceType string
	Zone         string
	CapacityType string
	NodeName     string
	ProviderID   string
	// Launched, Registered and Initialized are the status of those conditions: True,
	// False, Unknown, or empty when the condition is not set yet.
	Launched    string
	Registered  string
	Initialized string
	// PlannedPods counts every pod planned onto the NodeClaim, this one included.
	PlannedPods int
	// Price is what its node costs per hour, by part: as launched once it is (PriceLaunched),
	// as planned until then; nil when it has no price.
	Price         *cloudprovider.PriceParts
	PriceLaunched bool
	// MinValuesRelaxed says its NodePool's minValues were lowered to the values the
	// instance types that can take its pods have (minValuesPolicy BestEffort).
	MinValuesRelaxed bool
	// Overlays are the NodeOverlays that select its offering (by its node's labels once the
	// node exists), highest weight first: the prices and capacities it was planned with.
	Overlays []string
}

// Explain reads what the cluster records about the pod namespace/name.
func Explain(ctx context.Context, c client.Reader, namespace, name string) (*Explanation, error) {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %s/%s not found: check the name and the namespace (-n)", namespace, name)
		}
		return nil, fmt.Errorf("getting pod %s/%s: %w", namespace, name, err)
	}
	ex := &Explanation{
		Pod:               namespace + "/" + name,
		SchedulerName:     pod.Spec.SchedulerName,
		Phase:             pod.Status.Phase,
		NodeName:          pod.Spec.NodeName,
		NominatedNodeName: pod.Status.NominatedNodeName,
	}
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == launchlimit.PodCondition:
			ex.CapacityRejected = &CapacityRejected{Held: c.Status == corev1.ConditionTrue, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
		case c.Type == corev1.PodResizePending && c.Status == corev1.ConditionTrue:
			ex.Resize = &Resize{Reason: c.Reason, Message: c.Message}
		}
	}

	replacement, err := replacementOf(ctx, c, pod)
	if err != nil {
		return nil, err
	}
	ex.Replacement = replacement

	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(namespace), client.MatchingFields{
		"involvedObject.kind": "Pod", "involvedObject.name": name,
	}); err != nil {
		return nil, fmt.Errorf("listing events of pod %s/%s: %w", namespace, name, err)
	}
	var mine []corev1.Event
	for _, e := range events.Items {
		if e.InvolvedObject.UID == pod.UID {
			mine = append(mine, e)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return lastSeen(&mine[i]).After(lastSeen(&mine[j])) })
	for i := range mine {
		e := &mine[i]
		switch e.Reason {
		case ReasonFailedScheduling:
			if ex.Scheduling == nil {
				f := ParseSchedulingMessage(e.Message)
				f.Count = count(e)
				ex.Scheduling = &f
			}
		case ReasonFailedProvisioning:
			f := ParseProvisioningMessage(e.Message)
			f.Count = count(e)
			ex.Provisioning = append(ex.Provisioning, f)
		case ReasonGangNotProvisioned, ReasonOverQuota:
			if ex.Withheld == nil {
				ex.Withheld = &Withheld{Reason: e.Reason, Message: e.Message, Count: count(e)}
			}
		}
	}

	claims := &karpv1.NodeClaimList{}
	if err := c.List(ctx, claims); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		planned, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
		if err != nil {
			continue // another NodeClaim's broken annotation says nothing about this pod
		}
		for _, p := range planned {
			if p.UID == pod.UID || (p.UID == "" && p.Namespace == namespace && p.Name == name) {
				ex.NodeClaim = nodeClaim(nc, len(planned))
				if ex.NodeClaim.Overlays, err = overlaysOf(ctx, c, nc); err != nil {
					return nil, err
				}
			}
		}
	}
	return ex, nil
}

// replacementOf finds the replacement before eviction the pod takes part in: it is a copy,
// or a copy names it.
func replacementOf(ctx context.Context, c client.Reader, pod *corev1.Pod) (*Replacement, error) {
	copy := pod
	if !surge.IsCopy(pod) {
		copies := &corev1.PodList{}
		if err := c.List(ctx, copies, client.InNamespace(pod.Namespace), client.MatchingLabels{surge.ReplacesLabelKey: string(pod.UID)}); err != nil {
			return nil, fmt.Errorf("listing copies of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if len(copies.Items) == 0 {
			return nil, nil
		}
		copy = &copies.Items[0]
	}
	r := &Replacement{IsCopy: copy == pod, Other: copy.Name, CopyNode: copy.Spec.NodeName, CopyReady: surge.Ready(copy)}
	if r.IsCopy {
		r.Other = copy.Annotations[surge.ReplacesAnnotationKey]
	}
	r.Deadline, _ = surge.Deadline(copy)
	return r, nil
}

// overlaysOf returns the NodeOverlays that select the NodeClaim's offering: by the labels of
// its node, which carry every instance type label, or by its own until the node exists.
// Without the NodeOverlay kind in the cluster there are none.
func overlaysOf(ctx context.Context, c client.Reader, nc *karpv1.NodeClaim) ([]string, error) {
	list := &karpv1alpha1.NodeOverlayList{}
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing NodeOverlays: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	labels := nc.Labels
	if nc.Status.NodeName != "" {
		node := &corev1.Node{}
		switch err := c.Get(ctx, types.NamespacedName{Name: nc.Status.NodeName}, node); {
		case err == nil:
			labels = node.Labels
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("getting node %s: %w", nc.Status.NodeName, err)
		}
	}
	return overlay.Compile(list.Items).Selecting(labels), nil
}

func nodeClaim(nc *karpv1.NodeClaim, planned int) *NodeClaim {
	condition := func(t string) string {
		if c := meta.FindStatusCondition(nc.Status.Conditions, t); c != nil {
			return string(c.Status)
		}
		return ""
	}
	out := &NodeClaim{
		Name:         nc.Name,
		NodePool:     nc.Labels[karpv1.NodePoolLabelKey],
		InstanceType: nc.Labels[corev1.LabelInstanceTypeStable],
		Zone:         nc.Labels[corev1.LabelTopologyZone],
		CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey],
		NodeName:     nc.Status.NodeName,
		ProviderID:   nc.Status.ProviderID,
		Launched:     condition(karpv1.ConditionTypeLaunched),
		Registered:   condition(karpv1.ConditionTypeRegistered),
		Initialized:  condition(karpv1.ConditionTypeInitialized),
		PlannedPods:  planned,

		MinValuesRelaxed: nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey] == "true",
	}
	if parts, ok := cloudprovider.NodeClaimPrice(nc); ok {
		out.Price, out.PriceLaunched = &parts, nc.Status.Price != nil
	}
	return out
}

// lastSeen is when an event last happened, whichever API (core/v1 or events.k8s.io/v1,
// which the scheduler uses) recorded it.
func lastSeen(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if e.FirstTimestamp.After(t) {
		t = e.FirstTimestamp.Time
	}
	return t
}

func count(e *corev1.Event) int32 {
	if e.Series != nil && e.Series.Count > e.Count {
		return e.Series.Count
	}
	if e.Count == 0 {
		return 1
	}
	return e.Count
}
