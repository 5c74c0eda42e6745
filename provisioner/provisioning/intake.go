package provisioning

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// A pod the scheduler has not tried yet waits in its queue behind every pod it retries: in
// a burst of thousands, minutes pass before the plugin hands the last ones over. So the
// provisioner takes pods in itself as soon as they are created (early intake), for the
// scheduler profiles whose NodePools it has learnt from the plugin's submissions. An early
// pod has not been checked against the existing nodes: a batch first places its early pods
// with room on registered nodes counted, and plans capacity only for those that do not fit
// there. Those that fit are left to the scheduler, and their room is kept for them for
// ExpectedHold, so that later batches do not count it twice. The scheduler stays the judge:
// a pod it finds no room for after all is handed over as usual.

// ExpectedHold is how long room an early pod was found on stays counted as taken while the
// pod is not bound. The scheduler binds such a pod once it reaches it, or hands it over when
// it does not fit after all; in a burst that may take minutes, so a pod still unbound after
// the hold is taken in again, and the next batch looks for room for it anew.
const ExpectedHold = time.Minute

// expectation is an early pod left to the scheduler on a registered node's room.
type expectation struct {
	node string
	at   time.Time
	// sub is the pod's submission, taken in again once the hold has passed.
	sub Submission
}

// Intake queues a pod that was just created for the next batch, without waiting for the
// scheduler to hand it over, when early intake is on and the provisioner can plan it: it is
// not bound, not being deleted, not gated, not planned already, for a scheduler profile a
// submission has made known, and cannot preempt (preemption, not a new node, may be its scheduler's
// answer). It reports whether the pod was queued.
func (p *Provisioner) Intake(pod *corev1.Pod) bool {
	p.mu.Lock()
	sel, known := p.profiles[pod.Spec.SchedulerName]
	if !known || !p.takesIn(pod) {
		p.mu.Unlock()
		return false
	}
	p.pending[pod.UID] = Submission{Pod: pod, Profile: pod.Spec.SchedulerName, NodePools: sel, Early: true}
	p.mu.Unlock()
	p.batch.Trigger()
	return true
}

// takesIn reports whether early intake takes the pod in (see Intake), its profile aside.
// The caller holds p.mu.
func (p *Provisioner) takesIn(pod *corev1.Pod) bool {
	if !p.earlyIntake || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || len(pod.Spec.SchedulingGates) > 0 || mayPreempt(pod) ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	_, queued := p.pending[pod.UID]
	_, expected := p.expected[pod.UID]
	_, held := p.heldBack[pod.UID]
	return !queued && !expected && !held && !p.tracker.Planned(pod.UID)
}

// mayPreempt reports whether the scheduler may preempt other pods for the pod: it has a
// positive priority and may preempt.
func mayPreempt(pod *corev1.Pod) bool {
	never := pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever
	return pod.Spec.Priority != nil && *pod.Spec.Priority > 0 && !never
}

// learnProfile records the NodePools a scheduler profile may use, as its submissions say.
// A profile learnt for the first time is swept by the next batch. The caller holds p.mu.
func (p *Provisioner) learnProfile(s Submission) {
	if s.Profile == "" || s.Early {
		return
	}
	if _, known := p.profiles[s.Profile]; !known && p.earlyIntake {
		p.unswept[s.Profile] = true
	}
	p.profiles[s.Profile] = s.NodePools
}

// sweep takes in the unbound pods of the scheduler profiles learnt since the last batch,
// but those in the batch already: in a burst, most pods are created before the scheduler
// hands the first one over, and would otherwise wait for the scheduler to reach them.
func (p *Provisioner) sweep(unbound map[types.UID]*corev1.Pod, batch []Submission) []Submission {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.unswept) == 0 {
		return nil
	}
	inBatch := make(map[types.UID]bool, len(batch))
	for _, s := range batch {
		inBatch[s.Pod.UID] = true
	}
	var out []Submission
	for _, pod := range unbound {
		sel, ok := p.profiles[pod.Spec.SchedulerName]
		if !ok || !p.unswept[pod.Spec.SchedulerName] || inBatch[pod.UID] || !p.takesIn(pod) {
			continue
		}
		out = append(out, Submission{Pod: pod, Profile: pod.Spec.SchedulerName, NodePools: sel, Early: true})
	}
	clear(p.unswept)
	slices.SortFunc(out, byPod)
	return out
}

// placeEarly places the early pods of a batch with room on registered nodes counted and
// returns those that need capacity: the others are left to the scheduler, their room kept
// for them. Pods that fit nowhere are dropped without an event: the scheduler hands them
// over once it has tried them, and the batch that plans them then says why.
func (p *Provisioner) placeEarly(ctx context.Context, subs []Submission, unbound map[types.UID]*corev1.Pod) ([]Submission, error) {
	pods := make([]*corev1.Pod, len(subs))
	for i, s := range subs {
		pods[i] = s.Pod
	}
	input, _, err := p.input(ctx, subs[0].NodePools, pods, unbound, inputOptions{existing: true, expected: true})
	if err != nil {
		return nil, err
	}
	// Only the placements on existing nodes count here.
	input.WholePriceRankingOnly = true
	plan := packing.Solve(input)
	onNode := map[types.UID]string{}
	needCapacity := map[types.UID]bool{}
	for _, placement := range plan.Existing {
		for _, pod := range placement.Pods {
			if inFlight(placement.Node) {
				needCapacity[pod.UID] = true
			} else {
				onNode[pod.UID] = placement.Node.Node.Name
			}
		}
	}
	for _, nc := range plan.NewNodeClaims {
		for _, pod := range nc.Pods {
			needCapacity[pod.UID] = true
		}
	}
	now := p.clock.Now()
	p.mu.Lock()
	for _, s := range subs {
		if node, ok := onNode[s.Pod.UID]; ok {
			p.expected[s.Pod.UID] = expectation{node: node, at: now, sub: s}
		}
	}
	p.mu.Unlock()
	var out []Submission
	for _, s := range subs {
		if needCapacity[s.Pod.UID] {
			out = append(out, s)
		}
	}
	log.FromContext(ctx).V(1).Info("early pods placed", "pods", len(subs), "leftToScheduler", len(onNode), "needCapacity", len(out))
	return out, nil
}

// inFlight reports whether a node of the input stands for an in-flight NodeClaim rather
// than a registered node: its NodeClaim is neither initialized nor being deleted.
func inFlight(n *packing.Node) bool {
	return n.NodeClaim != nil && n.NodeClaim.DeletionTimestamp == nil && !nodeclaim.IsTrue(n.NodeClaim, karpv1.ConditionTypeInitialized)
}

// expectedOn returns, by node, the unbound pods left to the scheduler on that node's room
// within ExpectedHold, and forgets the others: those gone or bound, and those whose hold has
// passed, which are taken in again for the next batch.
func (p *Provisioner) expectedOn(unbound map[types.UID]*corev1.Pod) map[string][]*corev1.Pod {
	p.mu.Lock()
	if len(p.expected) == 0 {
		p.mu.Unlock()
		return nil
	}
	now := p.clock.Now()
	out := map[string][]*corev1.Pod{}
	again := false
	for uid, e := range p.expected {
		pod, ok := unbound[uid]
		if !ok || now.Sub(e.at) > ExpectedHold {
			delete(p.expected, uid)
			if ok && p.takesIn(pod) {
				e.sub.Pod = pod
				p.pending[uid] = e.sub
				again = true
			}
			continue
		}
		out[e.node] = append(out[e.node], pod)
	}
	p.mu.Unlock()
	if again {
		p.batch.Trigger()
	}
	return out
}
