// Package provisioning turns pods the scheduler could not place into NodeClaims: it collects
// submitted pods into batches, plans them onto in-flight and new NodeClaims within the
// NodePools their scheduler profile may use, creates the NodeClaims and records which pods
// each one is for.
package provisioning

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/quota"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

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
	// StaleNode is a node the pod was nominated to that registered and rejected it, and
	// StaleRejection what rejected it there.
	StaleNode      string
	StaleRejection StaleRejection
	// SchedulerMessage is the scheduler's summary of why existing nodes rejected the pod.
	SchedulerMessage string
	// Early marks a pod the provisioner took in itself, before the scheduler tried it (see
	// Intake).
	Early bool
}

// StaleRejection is the scheduler's verdict on a pod at the node planned for it.
type StaleRejection struct {
	// Plugin is the filter plugin that rejected the pod, Reason its message.
	Plugin, Reason string
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
	clock         clock.WithDelayedExecution
	// launches counts the launches the scheduler rejected pods on, and holds them back.
	launches *launchlimit.Limiter
	// replanWindow is how long after pods were first planned a later batch may plan them
	// again with its own (see softClaims); 0 never does.
	replanWindow time.Duration
	// minValuesPolicy is the planner's (packing.Input.MinValuesPolicy).
	minValuesPolicy packing.MinValuesPolicy
	// gangs reads the gangs pods belong to; nil plans every pod on its own.
	gangs gang.Reader
	// refused are the submissions of the members of gangs a batch left out, which
	// RetryRefusedGangs queues again.
	refused map[types.UID]Submission
	// quotas reads the namespaces' ElasticQuotas; nil admits every pod.
	quotas quota.Reader
	// staticCapacity keeps pending pods off static NodePools (Options.StaticCapacity).
	staticCapacity bool

	mu      sync.Mutex
	pending map[types.UID]Submission
	// replanned lists, per NodeClaim, the pods whose plan on it went stale: the next batch
	// takes them off its planned-pods annotation, so a restarted provisioner does not take
	// them back there.
	replanned map[string][]types.UID
	// rejecting are the NodeClaims whose node rejected a pod planned onto it: it has
	// registered, whatever its conditions say yet, so no batch takes it back.
	rejecting map[string]bool
	// earlyIntake takes pods in as they are created (see Intake).
	earlyIntake bool
	// profiles are the NodePools of each scheduler profile, as its last submission said.
	profiles map[string]NodePoolSelector
	// expected are the early pods left to the scheduler on registered nodes' room.
	expected map[types.UID]expectation
	// unswept are the profiles learnt since the last batch, whose pods it takes in.
	unswept map[string]bool
	// firstPlanned are the pods a NodeClaim was planned for, until they are bound or gone:
	// the time to the first is observed once per pod.
	firstPlanned map[types.UID]bool
	// rejected are the launches the scheduler rejected pods on since the last batch.
	rejected []rejectedLaunch
	// heldBack are the pods the launch limit holds back (see launches.go).
	heldBack map[types.UID]heldPod
}

// Options configure a Provisioner.
type Options struct {
	// Clock tells the time, and wakes the batch when a pod's launch backoff has passed.
	Clock clock.WithDelayedExecution
	// Launches bounds the launches for pods the scheduler rejects on the nodes planned for
	// them; nil uses launchlimit's defaults.
	Launches *launchlimit.Limiter
	// ReplanWindow is how long after pods were first planned a later batch may plan them
	// again with its own onto cheaper capacity, while their node has not registered; 0
	// never does.
	ReplanWindow time.Duration
	// EarlyIntake plans pods as they are created, before the scheduler has tried them, for
	// the scheduler profiles a submission has made known (see Intake).
	EarlyIntake bool
	// MinValuesPolicy is what the planner does when a NodePool's minValues cannot be met
	// (--min-values-policy); empty is packing.MinValuesStrict.
	MinValuesPolicy packing.MinValuesPolicy
	// Gangs reads the gangs pods belong to, whose members get capacity all or nothing; nil
	// plans every pod on its own.
	Gangs gang.Reader
	// Quotas reads the ElasticQuotas the scheduler admits pods by (its profile enables
	// CapacityScheduling): pods they would not admit get no capacity. Nil admits every pod.
	Quotas quota.Reader
	// StaticCapacity (the feature gate) keeps pending pods off static NodePools
	// (spec.replicas): LaunchStatic alone launches their nodes. Without it, spec.replicas is
	// ignored.
	StaticCapacity bool
}

// DefaultReplanWindow is the --replan-window default: an EC2 node takes most of a minute to
// register, and a batch closes within ten seconds, so pods are planned again with the next
// three or four batches at most.
const DefaultReplanWindow = 30 * time.Second

// New returns a Provisioner.
func New(kube client.Client, instanceTypes InstanceTypeSource, tracker *nomination.Tracker, batch Trigger, recorder record.EventRecorder, opts Options) *Provisioner {
	launches := opts.Launches
	if launches == nil {
		launches = DefaultLaunchLimit(opts.Clock)
	}
	return &Provisioner{kube: kube, instanceTypes: instanceTypes, tracker: tracker, batch: batch, recorder: recorder, clock: opts.Clock, launches: launches,
		replanWindow: opts.ReplanWindow, minValuesPolicy: opts.MinValuesPolicy, gangs: opts.Gangs, quotas: opts.Quotas, staticCapacity: opts.StaticCapacity, pending: map[types.UID]Submission{}, replanned: map[string][]types.UID{}, rejecting: map[string]bool{},
		earlyIntake: opts.EarlyIntake, profiles: map[string]NodePoolSelector{}, expected: map[types.UID]expectation{}, unswept: map[string]bool{},
		firstPlanned: map[types.UID]bool{}, refused: map[types.UID]Submission{}, heldBack: map[types.UID]heldPod{}}
}

// DefaultLaunchLimit is the launch limit with the flags' defaults.
func DefaultLaunchLimit(clk clock.PassiveClock) *launchlimit.Limiter {
	l, err := launchlimit.New(launchlimit.Options{Clock: clk, PerPod: launchlimit.DefaultPerPod, PerGroup: launchlimit.DefaultPerGroup,
		Backoff: launchlimit.DefaultBackoff, MaxBackoff: launchlimit.DefaultMaxBackoff})
	if err != nil {
		panic(err) // the defaults are valid
	}
	return l
}

// Submit queues pods for the next batch and returns how many were queued. Pods already
// planned are skipped, their nomination is on its way, unless they report that plan stale.
// A pod the scheduler hands over found no room on the registered nodes, whatever early
// intake expected.
func (p *Provisioner) Submit(subs []Submission) int {
	p.mu.Lock()
	n := 0
	for _, s := range subs {
		p.learnProfile(s)
		if s.Pod.Spec.NodeName != "" {
			continue
		}
		delete(p.expected, s.Pod.UID)
		if plan, ok := p.tracker.Get(s.Pod.UID); ok {
			if s.StaleNode == "" || plan.NodeName != s.StaleNode {
				continue
			}
			if claim, ok := p.tracker.Replan(s.Pod.UID); ok {
				p.replanned[claim] = append(p.replanned[claim], s.Pod.UID)
				p.rejecting[claim] = true
				p.rejected = append(p.rejected, rejectedLaunch{sub: s, nodeClaim: claim, at: p.clock.Now()})
			}
		}
		p.pending[s.Pod.UID] = s
		n++
	}
	metrics.SetPodsQueued(len(p.pending))
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
	delete(p.expected, uid)
	delete(p.firstPlanned, uid)
	delete(p.refused, uid)
	_, held := p.heldBack[uid]
	delete(p.heldBack, uid)
	metrics.SetPodsQueued(len(p.pending))
	p.mu.Unlock()
	p.tracker.Forget(uid)
	p.launches.Forget(uid)
	if held {
		p.reportHeld()
	}
}

// Bound records a pod's binding: a pod Tailor planned for counts in the time pods wait for
// capacity, and its landing frees its group's launches. Then the pod is forgotten.
func (p *Provisioner) Bound(pod *corev1.Pod, at time.Time) {
	if p.tracker.Planned(pod.UID) {
		metrics.PodBoundSeconds.Observe(at.Sub(pod.CreationTimestamp.Time).Seconds())
		p.launches.Landed(pod.UID)
	}
	p.Forget(pod.UID)
}

// observeFirstPlans observes, for each pod no NodeClaim was planned for before, the time
// from its creation to now, when one just was.
func (p *Provisioner) observeFirstPlans(pods []*corev1.Pod) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range pods {
		if p.firstPlanned[pod.UID] {
			continue
		}
		p.firstPlanned[pod.UID] = true
		metrics.PodFirstNodeClaimSeconds.Observe(now.Sub(pod.CreationTimestamp.Time).Seconds())
	}
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
	metrics.SetPodsQueued(0)
	slices.SortFunc(out, byPod)
	return out
}

// byPod orders submissions by their pods' namespace and name.
func byPod(a, b Submission) int {
	return cmp.Or(strings.Compare(a.Pod.Namespace, b.Pod.Namespace), strings.Compare(a.Pod.Name, b.Pod.Name))
}

// Provision plans the pending pods and creates what the plan needs. Pods that cannot be
// planned get an event; like planned pods they leave the queue, and come back when the
// scheduler tries them again. When provisioning fails, pods left without a plan go back
// into the queue for the next batch.
func (p *Provisioner) Provision(ctx context.Context) (err error) {
	if err := p.unlistReplanned(ctx); err != nil {
		return err
	}
	heldBack := p.takeHeld()
	subs := append(p.takePending(), heldBack...)
	if len(subs) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			p.requeueUnplanned(subs)
		}
	}()
	unbound, err := p.unboundPods(ctx)
	if err != nil {
		return err
	}
	if err := p.countRejections(ctx, unbound); err != nil {
		return err
	}
	subs = append(subs, p.sweep(unbound, subs)...)
	var live []Submission
	for _, s := range subs {
		pod, ok := unbound[s.Pod.UID]
		if !ok || pod.DeletionTimestamp != nil || p.tracker.Planned(pod.UID) {
			continue
		}
		s.Pod = pod
		live = append(live, s)
	}
	admitted, err := p.admitLaunches(ctx, live)
	if err != nil {
		return err
	}
	groups := map[string][]Submission{}
	var order []string
	for _, s := range admitted {
		k := s.NodePools.key()
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	for _, k := range order {
		group, err := p.checkEarly(ctx, groups[k], unbound)
		if err != nil {
			return err
		}
		if len(group) == 0 {
			continue
		}
		if err := p.provisionGroup(ctx, group, unbound); err != nil {
			return err
		}
	}
	return nil
}

// checkEarly returns the submissions of a group that need capacity: those the scheduler
// handed over, and the early ones that found no room on the registered nodes.
func (p *Provisioner) checkEarly(ctx context.Context, subs []Submission, unbound map[types.UID]*corev1.Pod) ([]Submission, error) {
	var early, out []Submission
	for _, s := range subs {
		if s.Early {
			early = append(early, s)
		} else {
			out = append(out, s)
		}
	}
	if len(early) == 0 {
		return out, nil
	}
	need, err := p.placeEarly(ctx, early, unbound)
	if err != nil {
		return nil, err
	}
	return append(out, need...), nil
}

func (p *Provisioner) provisionGroup(ctx context.Context, subs []Submission, unbound map[types.UID]*corev1.Pod) error {
	logger := log.FromContext(ctx)
	g, err := p.gangsOf(ctx, subs, unbound)
	if err != nil {
		return err
	}
	subs, err = p.admitted(ctx, append(subs, g.members...), unbound)
	if err != nil || len(subs) == 0 {
		return err
	}
	pods := make([]*corev1.Pod, len(subs))
	schedulerMessage := map[types.UID]string{}
	early := map[types.UID]bool{}
	for i, s := range subs {
		pods[i] = s.Pod
		schedulerMessage[s.Pod.UID] = s.SchedulerMessage
		early[s.Pod.UID] = s.Early
	}
	input, notReady, err := p.input(ctx, subs[0].NodePools, pods, unbound, inputOptions{expected: true})
	if err != nil {
		return err
	}
	start := time.Now()
	plan, planned, err := p.solveGangs(ctx, input, g, subs)
	if err != nil {
		return err
	}
	// A joint plan with earlier batches' pods leaves the gangs refused out too.
	input.Pods = planned
	joint, takenBack, replanned := replan(input, plan, p.softClaims(input, subs[0].NodePools))
	if replanned {
		plan = joint
	}
	metrics.ObservePlan(metrics.ControllerProvisioner, time.Since(start))
	recordPlan(plan)
	err = concurrently(ctx, len(plan.Existing), func(ctx context.Context, i int) error {
		if err := p.addToInFlight(ctx, plan.Existing[i]); err != nil {
			return err
		}
		p.observeFirstPlans(plan.Existing[i].Pods)
		p.recordPlannedOntoInFlight(plan.Existing[i])
		return nil
	})
	if err != nil {
		return err
	}
	now := p.clock.Now()
	// The NodeClaims carrying the most pods go first: under a burst the API server takes a
	// few hundred a second, and most pods then wait for fewer writes.
	slices.SortStableFunc(plan.NewNodeClaims, func(a, b packing.NewNodeClaim) int {
		return cmp.Compare(len(b.Pods), len(a.Pods))
	})
	err = concurrently(ctx, len(plan.NewNodeClaims), func(ctx context.Context, i int) error {
		planned := &plan.NewNodeClaims[i]
		nc, err := p.createNodeClaim(ctx, planned, plannedSinceAnnotations(planned.Pods, takenBack, now), metrics.ReasonProvisioned)
		if err != nil {
			return err
		}
		p.observeFirstPlans(planned.Pods)
		p.recordPlannedOntoNew(nc.Name, planned)
		c := planned.Cheapest
		logger.Info("planned NodeClaim", "nodeClaim", nc.Name, "nodePool", nc.Labels[karpv1.NodePoolLabelKey],
			"pods", len(planned.Pods), "expectedInstanceType", c.InstanceType, "zone", c.Zone,
			"capacityType", c.CapacityType, "pricePerHour", c.Price, "instanceTypes", len(planned.InstanceTypes))
		return nil
	})
	if err != nil {
		return err
	}
	if err := p.takeBack(ctx, takenBack); err != nil {
		return err
	}
	for _, u := range plan.Unschedulable {
		// The scheduler has not tried an early pod yet: the batch that plans the pod once it
		// is handed over says why it cannot be.
		if early[u.Pod.UID] {
			continue
		}
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

// writeConcurrency is how many NodeClaims a batch writes at once. A burst's batch makes
// hundreds, and one write takes the API server a tenth to half a second under the burst's
// load: one after the other, the last pods of a batch waited minutes for their NodeClaim.
const writeConcurrency = 16

// concurrently calls write for 0 to n-1, writeConcurrency at a time, and returns the first
// error; once one has failed, the writes not started yet are not.
func concurrently(ctx context.Context, n int, write func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(writeConcurrency)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return write(ctx, i) })
	}
	return g.Wait()
}

// recordPlan counts where a plan put its pods.
func recordPlan(plan packing.Plan) {
	for _, nc := range plan.NewNodeClaims {
		metrics.PlannedPods.WithLabelValues(metrics.ResultNewNodeClaim).Add(float64(len(nc.Pods)))
	}
	for _, e := range plan.Existing {
		metrics.PlannedPods.WithLabelValues(metrics.ResultExisting).Add(float64(len(e.Pods)))
	}
	metrics.PlannedPods.WithLabelValues(metrics.ResultUnschedulable).Add(float64(len(plan.Unschedulable)))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// createNodeClaim makes the NodeClaim of a plan, with the annotations given, recording its
// pods on it, then tracks them. reason says why it is made, for metrics: provisioned, or
// the disruption reason of the nodes it replaces.
func (p *Provisioner) createNodeClaim(ctx context.Context, planned *packing.NewNodeClaim, annotations map[string]string, reason string) (*karpv1.NodeClaim, error) {
	np := planned.NodePool
	tmpl := np.Spec.Template
	pods := podRefs(planned.Pods)
	podsValue, err := nomination.EncodePods(pods)
	if err != nil {
		return nil, err
	}
	price, err := json.Marshal(planned.Cheapest.Parts)
	if err != nil {
		return nil, fmt.Errorf("encoding the planned price: %w", err)
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       map[string]string{},
			Annotations: map[string]string{
				karpv1.NodePoolHashAnnotationKey:        np.Hash(),
				karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
				nomination.PlannedPodsAnnotationKey:     podsValue,
				cloudprovider.PlannedPriceAnnotationKey: string(price),
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
	if c := planned.Cheapest; c.ReservationID != "" {
		// The reservation the plan counts the NodeClaim against until it launches: the
		// provider keeps its instance from the next plans.
		nc.Labels[karpv1.CapacityReservationIDLabelKey] = c.ReservationID
		nc.Labels[karpv1.CapacityReservationTypeLabelKey] = c.ReservationType
	}
	for k, v := range tmpl.ObjectMeta.Labels {
		nc.Labels[k] = v
	}
	if planned.MinValuesRelaxed {
		nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey] = "true"
	} else if requirements.MinValues(tmpl.Spec.Requirements) != nil {
		nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey] = "false"
	}
	for k, v := range annotations {
		nc.Annotations[k] = v
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
	metrics.NodeClaimCreated(nc, reason)
	return nc, nil
}

// unlistReplanned takes the pods planned again off the planned-pods annotation of the
// NodeClaims their stale plans were on. What it could not write waits for the next batch.
func (p *Provisioner) unlistReplanned(ctx context.Context) error {
	p.mu.Lock()
	todo := p.replanned
	p.replanned = map[string][]types.UID{}
	p.mu.Unlock()
	for _, name := range sortedKeys(todo) {
		if err := p.unlist(ctx, name, todo[name]); err != nil {
			p.mu.Lock()
			for claim, uids := range todo {
				p.replanned[claim] = append(p.replanned[claim], uids...)
			}
			p.mu.Unlock()
			return err
		}
		delete(todo, name)
	}
	return nil
}

// unlist takes pods off a NodeClaim's planned-pods annotation; a NodeClaim gone has none.
func (p *Provisioner) unlist(ctx context.Context, name string, uids []types.UID) error {
	_, err := p.editPlannedPods(ctx, name, func(listed []nomination.Pod) []nomination.Pod {
		return slices.DeleteFunc(listed, func(pod nomination.Pod) bool { return slices.Contains(uids, pod.UID) })
	})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("taking pods planned again off NodeClaim %s: %w", name, err)
	}
	return nil
}

// addToInFlight records more pods on an in-flight NodeClaim and nominates them.
func (p *Provisioner) addToInFlight(ctx context.Context, placement packing.Placement) error {
	if placement.Node.NodeClaim == nil || !placement.Node.Schedulable {
		return fmt.Errorf("recording pods planned onto node %s: the planner may only add pods to schedulable NodeClaims", placement.Node.Node.Name)
	}
	added := podRefs(placement.Pods)
	nc, err := p.editPlannedPods(ctx, placement.Node.NodeClaim.Name, func(listed []nomination.Pod) []nomination.Pod {
		return append(listed, added...)
	})
	if err != nil {
		return fmt.Errorf("recording pods on NodeClaim %s: %w", placement.Node.NodeClaim.Name, err)
	}
	p.tracker.Plan(nc.Name, nc.Status.NodeName, added)
	return nil
}

// editPlannedPods rewrites a NodeClaim's planned-pods annotation with edit and returns the
// NodeClaim as written. The NodeClaim is read from a cache that may lag behind the last
// batch's write; the patch carries the resourceVersion read, so a stale read conflicts and
// is read again, instead of dropping pods from the list.
func (p *Provisioner) editPlannedPods(ctx context.Context, name string, edit func([]nomination.Pod) []nomination.Pod) (*karpv1.NodeClaim, error) {
	nc := &karpv1.NodeClaim{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := p.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			return err
		}
		listed, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
		if err != nil {
			return err
		}
		value, err := nomination.EncodePods(edit(listed))
		if err != nil {
			return err
		}
		if value == nc.Annotations[nomination.PlannedPodsAnnotationKey] {
			return nil
		}
		patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[nomination.PlannedPodsAnnotationKey] = value
		return p.kube.Patch(ctx, nc, patch)
	})
	return nc, err
}

func podRefs(pods []*corev1.Pod) []nomination.Pod {
	out := make([]nomination.Pod, len(pods))
	for i, pod := range pods {
		out[i] = nomination.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	}
	return out
}
