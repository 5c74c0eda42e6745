// Package provisioning turns pods the scheduler could not place into NodeClaims: it collects
// submitted pods into batches, plans them onto in-flight and new NodeClaims within the
// NodePools their scheduler profile may use, creates the NodeClaims and records which pods
// each one is for.
package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// PodNodeNameIndex is the cache index of pods by spec.nodeName the provisioner needs.
const PodNodeNameIndex = "spec.nodeName"

// Event reasons on pods.
const (
	// ReasonFailedProvisioning: no NodePool can take the pod; the message says why per NodePool.
	ReasonFailedProvisioning = "FailedProvisioning"
)

// Submission is a pod handed over by the scheduler plugin.
type Submission struct {
	Pod *corev1.Pod
	// Profile is the scheduler profile of the pod.
	Profile string
	// NodePools the pod may be provisioned from.
	NodePools NodePoolSelector
	// StaleNode is a node the pod was nominated to that registered and rejected it.
	StaleNode string
	// SchedulerMessage is the scheduler's summary of why existing nodes rejected the pod.
	SchedulerMessage string
}

// NodePoolSelector restricts the NodePools of a scheduler profile.
type NodePoolSelector struct {
	// Names of allowed NodePools; empty allows any name.
	Names []string
	// Labels the NodePools must have; nil allows any.
	Labels labels.Selector
}

// Matches reports whether the selector allows the NodePool.
func (s NodePoolSelector) Matches(np *karpv1.NodePool) bool {
	if len(s.Names) > 0 && !contains(s.Names, np.Name) {
		return false
	}
	return s.Labels == nil || s.Labels.Matches(labels.Set(np.Labels))
}

func (s NodePoolSelector) key() string {
	names := append([]string(nil), s.Names...)
	sort.Strings(names)
	sel := ""
	if s.Labels != nil {
		sel = s.Labels.String()
	}
	return strings.Join(names, ",") + "|" + sel
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// InstanceTypeSource lists what a NodePool can launch.
type InstanceTypeSource interface {
	InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error)
}

// Trigger starts a batch window.
type Trigger interface{ Trigger() }

// Provisioner plans capacity for submitted pods.
type Provisioner struct {
	kube          client.Client
	instanceTypes InstanceTypeSource
	tracker       *nomination.Tracker
	batch         Trigger
	recorder      record.EventRecorder

	mu      sync.Mutex
	pending map[types.UID]Submission
}

// New returns a Provisioner.
func New(kube client.Client, instanceTypes InstanceTypeSource, tracker *nomination.Tracker, batch Trigger, recorder record.EventRecorder) *Provisioner {
	return &Provisioner{kube: kube, instanceTypes: instanceTypes, tracker: tracker, batch: batch, recorder: recorder, pending: map[types.UID]Submission{}}
}

// Submit queues pods for the next batch and returns how many were queued. Pods already
// planned are skipped, their nomination is on its way, unless they report that plan stale.
func (p *Provisioner) Submit(subs []Submission) int {
	p.mu.Lock()
	n := 0
	for _, s := range subs {
		if s.Pod.Spec.NodeName != "" {
			continue
		}
		if plan, ok := p.tracker.Get(s.Pod.UID); ok {
			if s.StaleNode == "" || plan.NodeName != s.StaleNode {
				continue
			}
			p.tracker.Forget(s.Pod.UID)
		}
		p.pending[s.Pod.UID] = s
		n++
	}
	p.mu.Unlock()
	if n > 0 {
		p.batch.Trigger()
	}
	return n
}

// Forget drops a pod that was bound or deleted.
func (p *Provisioner) Forget(uid types.UID) {
	p.mu.Lock()
	delete(p.pending, uid)
	p.mu.Unlock()
	p.tracker.Forget(uid)
}

// Pending returns how many pods wait for the next batch.
func (p *Provisioner) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// requeueUnplanned puts back submissions that got no plan, unless newer ones replaced them.
func (p *Provisioner) requeueUnplanned(subs []Submission) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range subs {
		if _, newer := p.pending[s.Pod.UID]; !newer && !p.tracker.Planned(s.Pod.UID) {
			p.pending[s.Pod.UID] = s
		}
	}
	p.batch.Trigger()
}

// takePending empties the queue.
func (p *Provisioner) takePending() []Submission {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Submission, 0, len(p.pending))
	for _, s := range p.pending {
		out = append(out, s)
	}
	p.pending = map[types.UID]Submission{}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pod.Namespace != out[j].Pod.Namespace {
			return out[i].Pod.Namespace < out[j].Pod.Namespace
		}
		return out[i].Pod.Name < out[j].Pod.Name
	})
	return out
}

// Provision plans the pending pods and creates what the plan needs. Pods that cannot be
// planned get an event; like planned pods they leave the queue, and come back when the
// scheduler tries them again. When provisioning fails, pods left without a plan go back
// into the queue for the next batch.
func (p *Provisioner) Provision(ctx context.Context) (err error) {
	subs := p.takePending()
	if len(subs) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			p.requeueUnplanned(subs)
		}
	}()
	groups := map[string][]Submission{}
	var order []string
	for _, s := range subs {
		live := &corev1.Pod{}
		if err := p.kube.Get(ctx, client.ObjectKeyFromObject(s.Pod), live); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("getting pod %s: %w", client.ObjectKeyFromObject(s.Pod), err)
		}
		if live.UID != s.Pod.UID || live.Spec.NodeName != "" || live.DeletionTimestamp != nil || p.tracker.Planned(live.UID) {
			continue
		}
		s.Pod = live
		k := s.NodePools.key()
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	for _, k := range order {
		if err := p.provisionGroup(ctx, groups[k]); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provisioner) provisionGroup(ctx context.Context, subs []Submission) error {
	logger := log.FromContext(ctx)
	input, notReady, err := p.input(ctx, subs[0].NodePools)
	if err != nil {
		return err
	}
	schedulerMessage := map[types.UID]string{}
	for _, s := range subs {
		input.Pods = append(input.Pods, s.Pod)
		schedulerMessage[s.Pod.UID] = s.SchedulerMessage
	}
	plan := packing.Solve(input)
	for _, placement := range plan.Existing {
		if err := p.addToInFlight(ctx, placement); err != nil {
			return err
		}
	}
	for i := range plan.NewNodeClaims {
		nc, err := p.createNodeClaim(ctx, &plan.NewNodeClaims[i])
		if err != nil {
			return err
		}
		c := plan.NewNodeClaims[i].Cheapest
		logger.Info("planned NodeClaim", "nodeClaim", nc.Name, "nodePool", nc.Labels[karpv1.NodePoolLabelKey],
			"pods", len(plan.NewNodeClaims[i].Pods), "expectedInstanceType", c.InstanceType, "zone", c.Zone,
			"capacityType", c.CapacityType, "pricePerHour", c.Price, "instanceTypes", len(plan.NewNodeClaims[i].InstanceTypes))
	}
	for _, u := range plan.Unschedulable {
		msg := "cannot provision a node for this pod: " + u.Reason
		for _, name := range sortedKeys(notReady) {
			msg += fmt.Sprintf("; NodePool %q: %s", name, notReady[name])
		}
		if m := schedulerMessage[u.Pod.UID]; m != "" {
			msg += "; existing nodes: " + m
		}
		p.recorder.Event(u.Pod, corev1.EventTypeWarning, ReasonFailedProvisioning, msg)
		logger.Info("cannot provision pod", "pod", klogRef(u.Pod), "reason", msg)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// input gathers the NodePools a selector allows, their instance types and remaining limits,
// and the in-flight NodeClaims. notReady says why NodePools that cannot launch were left out.
func (p *Provisioner) input(ctx context.Context, sel NodePoolSelector) (packing.Input, map[string]string, error) {
	var in packing.Input
	notReady := map[string]string{}
	pools := &karpv1.NodePoolList{}
	if err := p.kube.List(ctx, pools); err != nil {
		return in, nil, fmt.Errorf("listing NodePools: %w", err)
	}
	claims := &karpv1.NodeClaimList{}
	if err := p.kube.List(ctx, claims); err != nil {
		return in, nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	for i := range pools.Items {
		np := &pools.Items[i]
		if np.DeletionTimestamp != nil || !sel.Matches(np) {
			continue
		}
		its, err := p.instanceTypes.InstanceTypes(ctx, np)
		if err != nil {
			if cloudprovider.IsNodeClassNotReadyError(err) {
				notReady[np.Name] = err.Error()
				continue
			}
			return in, nil, fmt.Errorf("listing instance types of NodePool %s: %w", np.Name, err)
		}
		in.NodePools = append(in.NodePools, packing.NodePool{NodePool: np, InstanceTypes: its, Remaining: remaining(np, claims.Items)})
	}
	for i := range claims.Items {
		if f, ok := p.inFlight(ctx, &claims.Items[i], sel, pools.Items); ok {
			in.Nodes = append(in.Nodes, f)
		}
	}
	return in, notReady, nil
}

// remaining is the NodePool's limits minus the capacity of its NodeClaims.
func remaining(np *karpv1.NodePool, claims []karpv1.NodeClaim) corev1.ResourceList {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range np.Spec.Limits {
		out[k] = v.DeepCopy()
	}
	for _, nc := range claims {
		if nc.Labels[karpv1.NodePoolLabelKey] != np.Name {
			continue
		}
		used := nc.Status.Capacity
		if len(used) == 0 {
			used = nc.Spec.Resources.Requests
		}
		for k := range out {
			if q, ok := used[k]; ok {
				r := out[k]
				r.Sub(q)
				out[k] = r
			}
		}
	}
	return out
}

// inFlight describes a launched, not yet initialized NodeClaim the selector allows, with the
// room its planned pods leave.
func (p *Provisioner) inFlight(ctx context.Context, nc *karpv1.NodeClaim, sel NodePoolSelector, pools []karpv1.NodePool) (packing.Node, bool) {
	if nc.DeletionTimestamp != nil || nc.Status.ProviderID == "" || len(nc.Status.Allocatable) == 0 || isTrue(nc, karpv1.ConditionTypeInitialized) {
		return packing.Node{}, false
	}
	allowed := false
	for i := range pools {
		if pools[i].Name == nc.Labels[karpv1.NodePoolLabelKey] && sel.Matches(&pools[i]) {
			allowed = true
		}
	}
	if !allowed {
		return packing.Node{}, false
	}
	var pods []*corev1.Pod
	for _, ref := range p.tracker.PodsOf(nc.Name) {
		pod := &corev1.Pod{}
		if err := p.kube.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pod); err != nil || pod.Spec.NodeName != "" {
			continue
		}
		pods = append(pods, pod)
	}
	if nc.Status.NodeName != "" {
		bound := &corev1.PodList{}
		if err := p.kube.List(ctx, bound, client.MatchingFields{PodNodeNameIndex: nc.Status.NodeName}); err != nil {
			return packing.Node{}, false
		}
		for i := range bound.Items {
			if pod := &bound.Items[i]; pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				pods = append(pods, pod)
			}
		}
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: nc.Labels},
		Spec:       corev1.NodeSpec{Taints: nc.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: nc.Status.Allocatable},
	}
	return packing.Node{Node: node, NodeClaim: nc, Pods: pods, Schedulable: true}, true
}

func isTrue(nc *karpv1.NodeClaim, condition string) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == condition {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// createNodeClaim makes the NodeClaim of a plan, recording its pods on it, then tracks them.
func (p *Provisioner) createNodeClaim(ctx context.Context, planned *packing.NewNodeClaim) (*karpv1.NodeClaim, error) {
	np := planned.NodePool
	tmpl := np.Spec.Template
	pods := podRefs(planned.Pods)
	podsValue, err := nomination.EncodePods(pods)
	if err != nil {
		return nil, err
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       map[string]string{},
			Annotations: map[string]string{
				karpv1.NodePoolHashAnnotationKey:    TemplateHash(np),
				nomination.PlannedPodsAnnotationKey: podsValue,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptr.To(true),
			}},
			Finalizers: []string{karpv1.TerminationFinalizer},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints:                 tmpl.Spec.Taints,
			StartupTaints:          tmpl.Spec.StartupTaints,
			Requirements:           planned.Requirements,
			Resources:              karpv1.ResourceRequirements{Requests: planned.Requests},
			NodeClassRef:           tmpl.Spec.NodeClassRef,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
		},
	}
	for k, v := range requirements.SingleValueLabels(tmpl.Spec.Requirements) {
		nc.Labels[k] = v
	}
	for k, v := range tmpl.ObjectMeta.Labels {
		nc.Labels[k] = v
	}
	for k, v := range tmpl.ObjectMeta.Annotations {
		if _, reserved := nc.Annotations[k]; !reserved {
			nc.Annotations[k] = v
		}
	}
	nc.Labels[karpv1.NodePoolLabelKey] = np.Name
	if err := p.kube.Create(ctx, nc); err != nil {
		return nil, fmt.Errorf("creating NodeClaim for NodePool %s: %w", np.Name, err)
	}
	p.tracker.Plan(nc.Name, "", pods)
	return nc, nil
}

// addToInFlight records more pods on an in-flight NodeClaim and nominates them.
func (p *Provisioner) addToInFlight(ctx context.Context, placement packing.Placement) error {
	nc := &karpv1.NodeClaim{}
	if err := p.kube.Get(ctx, client.ObjectKeyFromObject(placement.Node.NodeClaim), nc); err != nil {
		return fmt.Errorf("getting NodeClaim %s: %w", placement.Node.NodeClaim.Name, err)
	}
	existing, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
	if err != nil {
		return err
	}
	added := podRefs(placement.Pods)
	value, err := nomination.EncodePods(append(existing, added...))
	if err != nil {
		return err
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[nomination.PlannedPodsAnnotationKey] = value
	if err := p.kube.Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("recording pods on NodeClaim %s: %w", nc.Name, err)
	}
	p.tracker.Plan(nc.Name, nc.Status.NodeName, added)
	return nil
}

func podRefs(pods []*corev1.Pod) []nomination.Pod {
	out := make([]nomination.Pod, len(pods))
	for i, pod := range pods {
		out[i] = nomination.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	}
	return out
}

// TemplateHash identifies a NodePool's NodeClaim template, so drift can be detected later.
func TemplateHash(np *karpv1.NodePool) string {
	b, _ := json.Marshal(np.Spec.Template)
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:8])
}
