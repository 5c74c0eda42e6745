package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
)

// A pod the scheduler rejects on the node planned for it is planned again, but not at
// once and not for ever (package launchlimit): the batch counts the rejected launch, and
// holds the pod back while it backs off and, past the bound, until the pod, its NodePools
// or its claims change. The pod and the NodeClaim say so in a condition and an event.

// ConditionPlannedPodsRejected is the NodeClaim condition that says the scheduler rejected
// a pod planned onto its node: its reason is the filter plugin, its message the pod and the
// plugin's reason.
const ConditionPlannedPodsRejected = "PlannedPodsRejected"

// Reasons of the pod condition (launchlimit.PodCondition) and events.
const (
	// ReasonPlannedCapacityRejected (event): the scheduler rejected the pod on the node
	// planned for it.
	ReasonPlannedCapacityRejected = "PlannedCapacityRejected"
	// ReasonBackingOff (condition): the pod is planned again once its backoff has passed.
	ReasonBackingOff = "BackingOff"
	// ReasonLaunchLimitReached (event and condition): nothing more is launched for the pod
	// until it, its NodePools or its claims change.
	ReasonLaunchLimitReached = "LaunchLimitReached"
	// ReasonLaunchLimitLifted (event and condition): something changed; the pod is planned
	// again.
	ReasonLaunchLimitLifted = "LaunchLimitLifted"
	// ReasonPlanningAgain (condition): the backoff passed; the pod is planned again.
	ReasonPlanningAgain = "PlanningAgain"
)

// rejectedLaunch is a pod the scheduler rejected on the node of its NodeClaim, as
// submitted, waiting for the next batch to count it.
type rejectedLaunch struct {
	sub       Submission
	nodeClaim string
	at        time.Time
}

// heldPod is a pod the launch limit holds back, and the state its condition says.
type heldPod struct {
	sub      Submission
	reported launchlimit.State
}

// countRejections counts the launches the scheduler rejected since the last batch and
// tells their pods and NodeClaims. Writing the conditions is best effort: a failure is
// logged, and the limit holds whatever the pod's status says.
func (p *Provisioner) countRejections(ctx context.Context, unbound map[types.UID]*corev1.Pod) error {
	p.mu.Lock()
	todo := p.rejected
	p.rejected = nil
	p.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	pools, err := p.nodePools(ctx)
	if err != nil {
		return err
	}
	for _, r := range todo {
		pod := unbound[r.sub.Pod.UID]
		if pod == nil {
			continue // bound or gone meanwhile
		}
		rej := launchlimit.Rejection{Plugin: r.sub.StaleRejection.Plugin, Reason: r.sub.StaleRejection.Reason, Node: r.sub.StaleNode, NodeClaim: r.nodeClaim, At: r.at}
		subject := subjectOf(pod, pools, r.sub.NodePools)
		p.restore(pod, subject)
		v := p.launches.Rejected(subject, rej)
		metrics.PlannedCapacityRejections.WithLabelValues(rej.Plugin).Inc()
		msg := heldMessage(pod, v)
		p.recorder.Event(pod, corev1.EventTypeWarning, ReasonPlannedCapacityRejected, msg)
		if v.State == launchlimit.Limited {
			p.recorder.Event(pod, corev1.EventTypeWarning, ReasonLaunchLimitReached, msg)
		}
		log.FromContext(ctx).Info("planned capacity rejected the pod", "pod", klogRef(pod), "node", rej.Node, "nodeClaim", rej.NodeClaim,
			"plugin", rej.Plugin, "reason", rej.Reason, "launches", v.Launches, "limit", v.Limit, "byGroup", v.ByGroup, "state", v.State.String())
		p.setHeldCondition(ctx, pod, v.State, msg)
		p.markNodeClaim(ctx, r.nodeClaim, pod, rej)
		if v.State != launchlimit.Free {
			p.mu.Lock()
			p.heldBack[pod.UID] = heldPod{sub: r.sub, reported: v.State}
			p.mu.Unlock()
		}
	}
	return nil
}

// admitLaunches returns the submissions whose pods may be planned now, and keeps the others
// until they may: those backing off come back when their wait has passed, those limited
// when something about them changes.
func (p *Provisioner) admitLaunches(ctx context.Context, subs []Submission) ([]Submission, error) {
	pools, err := p.nodePools(ctx)
	if err != nil {
		return nil, err
	}
	now := p.clock.Now()
	var out []Submission
	var wake time.Time
	for _, s := range subs {
		subject := subjectOf(s.Pod, pools, s.NodePools)
		v := p.launches.Check(subject)
		if v.State == launchlimit.Free && v.Launches == 0 {
			p.restore(s.Pod, subject)
			v = p.launches.Check(subject)
		}
		p.mu.Lock()
		was, wasHeld := p.heldBack[s.Pod.UID]
		if v.State == launchlimit.Free {
			delete(p.heldBack, s.Pod.UID)
		} else {
			p.heldBack[s.Pod.UID] = heldPod{sub: s, reported: v.State}
		}
		p.mu.Unlock()
		switch {
		case v.State == launchlimit.Free:
			out = append(out, s)
			if wasHeld || heldCondition(s.Pod) != nil {
				p.releaseHeld(ctx, s.Pod, was.reported, v)
			}
		case v.State == launchlimit.BackingOff:
			if wake.IsZero() || v.Until.Before(wake) {
				wake = v.Until
			}
		case !wasHeld || was.reported != launchlimit.Limited:
			if !limitedAt(s.Pod) {
				msg := heldMessage(s.Pod, v)
				p.recorder.Event(s.Pod, corev1.EventTypeWarning, ReasonLaunchLimitReached, msg)
				p.setHeldCondition(ctx, s.Pod, v.State, msg)
			}
		}
	}
	p.reportHeld()
	if !wake.IsZero() {
		p.clock.AfterFunc(wake.Sub(now), p.batch.Trigger)
	}
	return out, nil
}

// releaseHeld tells a pod held back before that it is planned again; the condition keeps
// the count, v's, for a restart.
func (p *Provisioner) releaseHeld(ctx context.Context, pod *corev1.Pod, was launchlimit.State, v launchlimit.Verdict) {
	c := heldCondition(pod)
	if c == nil || c.Status != corev1.ConditionTrue {
		return
	}
	reason, msg := ReasonPlanningAgain, "its backoff passed; planning it again; "+launchesRejected(pod, v)
	if c.Reason == ReasonLaunchLimitReached || was == launchlimit.Limited {
		reason, msg = ReasonLaunchLimitLifted, "the pod, its NodePools or its claims changed since its launches were rejected; planning it again"
		p.recorder.Event(pod, corev1.EventTypeNormal, ReasonLaunchLimitLifted, msg)
	}
	p.patchHeldCondition(ctx, pod, corev1.ConditionFalse, reason, msg)
}

// reportHeld sets the metric of the pods held back, by state.
func (p *Provisioner) reportHeld() {
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := map[launchlimit.State]int{}
	for _, h := range p.heldBack {
		counts[h.reported]++
	}
	metrics.PodsHeldBack.WithLabelValues(metrics.HeldBackingOff).Set(float64(counts[launchlimit.BackingOff]))
	metrics.PodsHeldBack.WithLabelValues(metrics.HeldLimited).Set(float64(counts[launchlimit.Limited]))
}

// takeHeld returns the pods held back, for the batch to check again.
func (p *Provisioner) takeHeld() []Submission {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Submission, 0, len(p.heldBack))
	for uid, h := range p.heldBack {
		if _, queued := p.pending[uid]; !queued {
			out = append(out, h.sub)
		}
	}
	return out
}

// NodePoolsChanged tells the provisioner a NodePool changed: the pods held back at their
// launch limit may be planned again.
func (p *Provisioner) NodePoolsChanged() {
	p.mu.Lock()
	held := len(p.heldBack)
	p.mu.Unlock()
	if held > 0 {
		p.batch.Trigger()
	}
}

// heldMessage says why the pod is held back, naming the plugin and its reason first:
// "planned capacity did not fit: <plugin>: <reason>".
func heldMessage(pod *corev1.Pod, v launchlimit.Verdict) string {
	var b strings.Builder
	b.WriteString("planned capacity did not fit: ")
	b.WriteString(v.Last.String())
	if v.Last.NodeClaim != "" {
		fmt.Fprintf(&b, " (node %s of NodeClaim %s)", orUnknown(v.Last.Node), v.Last.NodeClaim)
	}
	flag, them := "--launch-limit-per-pod", "this pod until it, its NodePools or its claims change"
	if v.ByGroup {
		flag, them = "--launch-limit-per-group", "them until they, their NodePools or their claims change, or one of them lands on a node planned for it"
	}
	switch v.State {
	case launchlimit.Limited:
		fmt.Fprintf(&b, "; %s (%s): nothing more is launched for %s", launchesRejected(pod, v), flag, them)
	case launchlimit.BackingOff:
		fmt.Fprintf(&b, "; %s; planning again after %s", launchesRejected(pod, v), v.Until.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintf(&b, "; %s; planning again", launchesRejected(pod, v))
	}
	return b.String()
}

// launchesRejected says how many launches were rejected: "K of N launches rejected", or
// "K of N launches for pods like this one (ReplicaSet ns/name) rejected" when the group's
// count holds the pod back. The pod's condition carries it, and a restarted provisioner reads
// it back (launchesOf).
func launchesRejected(pod *corev1.Pod, v launchlimit.Verdict) string {
	whose := "launches"
	if v.ByGroup {
		whose = "launches for pods like this one"
		if owner := metav1.GetControllerOf(pod); owner != nil {
			whose += fmt.Sprintf(" (%s %s/%s)", owner.Kind, pod.Namespace, owner.Name)
		}
	}
	return fmt.Sprintf("%d of %d %s rejected", v.Launches, v.Limit, whose)
}

// launchesCounted reads what launchesRejected wrote into a condition's message.
var launchesCounted = regexp.MustCompile(`(\d+) of \d+ launches( for pods like this one)?`)

// launchesOf returns the launches the pod's condition says were rejected, and whether they
// were its group's; none when it has no condition, or one that says no count.
func launchesOf(pod *corev1.Pod) (launches int, byGroup bool) {
	c := heldCondition(pod)
	if c == nil {
		return 0, false
	}
	m := launchesCounted.FindStringSubmatch(c.Message)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	return n, m[2] != ""
}

// restore seeds the launch limit with what the pod's condition says, when the limiter does
// not count the pod: a restarted provisioner, or a new leader, goes on counting where the
// one before left off.
func (p *Provisioner) restore(pod *corev1.Pod, subject launchlimit.Subject) {
	launches, byGroup := launchesOf(pod)
	if launches == 0 {
		return
	}
	c := heldCondition(pod)
	p.launches.Restore(subject, launches, byGroup, launchlimit.Rejection{Reason: c.Message, At: c.LastTransitionTime.Time})
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// heldCondition is the pod's PlannedCapacityRejected condition, nil when it has none.
func heldCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == launchlimit.PodCondition {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// limitedAt reports whether the pod's condition says it reached its launch limit.
func limitedAt(pod *corev1.Pod) bool {
	c := heldCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == ReasonLaunchLimitReached
}

// setHeldCondition sets the pod's condition to what the verdict says; a pod free to be
// planned again keeps its count in a False condition.
func (p *Provisioner) setHeldCondition(ctx context.Context, pod *corev1.Pod, state launchlimit.State, msg string) {
	switch state {
	case launchlimit.Limited:
		p.patchHeldCondition(ctx, pod, corev1.ConditionTrue, ReasonLaunchLimitReached, msg)
	case launchlimit.BackingOff:
		p.patchHeldCondition(ctx, pod, corev1.ConditionTrue, ReasonBackingOff, msg)
	default:
		p.patchHeldCondition(ctx, pod, corev1.ConditionFalse, ReasonPlanningAgain, msg)
	}
}

// patchHeldCondition writes the pod's condition with a strategic merge patch, which merges
// conditions by type and leaves the scheduler's and kubelet's alone.
func (p *Provisioner) patchHeldCondition(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, msg string) {
	cond := corev1.PodCondition{Type: launchlimit.PodCondition, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(p.clock.Now())}
	if c := heldCondition(pod); c != nil && c.Status == status {
		cond.LastTransitionTime = c.LastTransitionTime
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err == nil {
		target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
		err = p.kube.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, body))
	}
	if client.IgnoreNotFound(err) != nil {
		log.FromContext(ctx).Error(err, "setting the pod's planned-capacity condition", "pod", klogRef(pod), "reason", reason)
	}
}

// markNodeClaim records on the NodeClaim that its node rejected a pod planned onto it.
func (p *Provisioner) markNodeClaim(ctx context.Context, name string, pod *corev1.Pod, r launchlimit.Rejection) {
	reason := r.Plugin
	if reason == "" {
		reason = "Unknown"
	}
	msg := fmt.Sprintf("pod %s: %s", klogRef(pod), r)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc := &karpv1.NodeClaim{}
		if err := p.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			return err
		}
		before := nc.DeepCopy()
		nodeclaim.SetCondition(nc, ConditionPlannedPodsRejected, metav1.ConditionTrue, reason, msg)
		return p.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "recording the rejected pod on its NodeClaim", "nodeClaim", name, "pod", klogRef(pod))
	}
}

// nodePools lists the NodePools, for the launch limit's versions.
func (p *Provisioner) nodePools(ctx context.Context) ([]karpv1.NodePool, error) {
	list := &karpv1.NodePoolList{}
	if err := p.kube.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	return list.Items, nil
}

// subjectOf is the pod as the launch limit counts it: its group is its controller and its
// scheduling constraints; its version adds the claims it was given, and both change with
// the NodePools it may use (their names and generations).
func subjectOf(pod *corev1.Pod, pools []karpv1.NodePool, sel NodePoolSelector) launchlimit.Subject {
	spec := schedulingHash(pod)
	var names []string
	for i := range pools {
		if np := &pools[i]; np.DeletionTimestamp == nil && sel.Matches(np) {
			names = append(names, fmt.Sprintf("%s/%d", np.Name, np.Generation))
		}
	}
	slices.Sort(names)
	poolsVersion := strings.Join(names, ",")
	var claims []string
	for _, c := range pod.Status.ResourceClaimStatuses {
		if c.ResourceClaimName != nil {
			claims = append(claims, c.Name+"="+*c.ResourceClaimName)
		}
	}
	s := launchlimit.Subject{UID: pod.UID, Version: spec + "|" + strings.Join(claims, ",") + "|" + poolsVersion, GroupVersion: poolsVersion}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		s.Group = string(owner.UID) + "/" + spec
	}
	return s
}

// schedulingHash digests what of a pod's spec decides where it can run: its requests,
// node selector and affinity, tolerations, topology spread, claims and overhead. Pods of
// one controller share it unless their constraints differ.
func schedulingHash(pod *corev1.Pod) string {
	s := &pod.Spec
	subset := corev1.PodSpec{
		InitContainers: s.InitContainers, Containers: s.Containers, NodeSelector: s.NodeSelector, Affinity: s.Affinity,
		Tolerations: s.Tolerations, TopologySpreadConstraints: s.TopologySpreadConstraints, ResourceClaims: s.ResourceClaims,
		Overhead: s.Overhead, Resources: s.Resources, PriorityClassName: s.PriorityClassName,
	}
	raw, _ := subset.Marshal()
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}
