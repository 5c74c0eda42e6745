package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/scenario"
)

// Invariants, by the name the report gives them.
const (
	InvPodsRunning       = "pods-running"
	InvNoOrphanInstance  = "no-instance-without-nodeclaim"
	InvNoClaimWithout    = "no-nodeclaim-without-instance"
	InvNoDrifted         = "drift-rolled-out"
	InvCost              = "cost-at-rest"
	InvNoDuplicateLaunch = "no-duplicate-launch"
	InvPDB               = "pdb-respected"
	InvEvictedOnce       = "evicted-once-per-consolidation"
	InvNoCrash           = "no-crash"
	InvNoGrowth          = "no-growth"
	InvLaunchesBounded   = "launches-bounded"
	InvCleanup           = "cleanup"
	InvNoCopyLeft        = "no-copy-left"
	InvNoExtraReplicas   = "no-extra-replicas"
	InvNoCordoned        = "no-cordoned-node"
)

// costSlack is the bound on the cost at rest over a fresh plan.
const costSlack = 1.05

// Breach is an invariant that did not hold after a trial.
type Breach struct {
	Seed      uint64 `json:"seed"`
	Phase     Phase  `json:"phase"`
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
}

// TrialResult is what one trial found.
type TrialResult struct {
	Plan Plan
	// Recovery is the time from the last fault's end to a sound rest (or to the bound).
	Recovery time.Duration
	// Held are the invariants that held; Breaches the others.
	Held     []string
	Breaches []Breach
	// Launched and Created count the instances launched and NodeClaims they were launched
	// for during the trial.
	Launched, Created int
	// RejectedLaunches counts the instances launched for the pods of UnmodelledRejection
	// faults.
	RejectedLaunches int
	// Tombstones counts the pod deletions the watch missed and judged by the pods' last
	// known state.
	Tombstones int
	// Restarts counts the components that ended on their own and were started again.
	Restarts int
}

func (t *TrialResult) check(plan Plan, invariant string, ok bool, format string, args ...any) {
	if ok {
		t.Held = append(t.Held, invariant)
		return
	}
	t.Breaches = append(t.Breaches, Breach{Seed: plan.Seed, Phase: plan.Phase, Invariant: invariant, Detail: fmt.Sprintf(format, args...)})
}

// trial runs one trial on an empty cluster and leaves the cluster empty again.
func (r *runner) trial(ctx context.Context, plan Plan) (*TrialResult, error) {
	res := &TrialResult{Plan: plan}
	r.inject.reset()
	start := time.Now()
	launchedBefore, err := r.launched(ctx)
	if err != nil {
		return nil, err
	}
	watch, err := watchPods(ctx, r.cs)
	if err != nil {
		return nil, err
	}
	if err := createDeployments(ctx, r.cs, plan.Deployments); err != nil {
		return nil, err
	}
	if plan.Phase != PhaseBurst {
		// The phase starts from a cluster at rest; its faults strike after.
		if err := r.waitRunning(ctx, plan, false, r.opts.Recovery); err != nil {
			res.check(plan, InvPodsRunning, false, "before the %s phase and its faults: %v", plan.Phase, err)
		}
	}
	phaseStart := time.Now()
	switch plan.Phase {
	case PhaseScaleDown:
		err = scaleDeployments(ctx, r.cs, plan.Deployments)
	case PhaseDrift:
		r.alias = 1 - r.alias
		err = r.applyPool(ctx)
	}
	if err != nil {
		return nil, err
	}
	faults := plan.Faults
	if plan.Phase == PhaseSpot {
		// The phase's own reclaims, one with its warning and one without, at its start.
		faults = append([]Fault{{Kind: SpotWarning, Pick: int(plan.Seed % 7)}, {Kind: SpotNoWarning, Pick: int(plan.Seed % 5)}}, faults...)
	}
	if err := r.inject.run(ctx, phaseStart, faults); err != nil {
		// A fault the harness could not inject or lift is the harness's failure.
		return nil, err
	}
	faultsEnd := time.Now()
	rest := r.atRest(ctx, plan)
	res.Recovery = time.Since(faultsEnd)
	for _, inv := range []string{InvPodsRunning, InvNoOrphanInstance, InvNoClaimWithout, InvNoDrifted, InvCost, InvNoCopyLeft, InvNoExtraReplicas, InvNoCordoned} {
		detail, failed := rest[inv]
		res.check(plan, inv, !failed, "%s", detail)
	}
	r.checkLaunches(ctx, plan, start, launchedBefore, res)
	r.checkRejected(ctx, plan, start, res)
	seen := watch.close()
	for _, e := range append(seen.evicted, seen.deleted...) {
		if e.tombstone {
			res.Tombstones++
		}
	}
	r.checkEvictions(plan, phaseStart, seen, res)
	r.checkProcesses(ctx, plan, res)
	if err := r.cleanup(ctx); err != nil {
		res.check(plan, InvCleanup, false, "%v", err)
	}
	return res, nil
}

// waitRunning waits for every pod of the plan's Deployments to run, as many as before the
// phase or, when begun, after it.
func (r *runner) waitRunning(ctx context.Context, plan Plan, begun bool, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		last = r.podsRunning(ctx, plan, begun)
		return last == "", nil
	})
	if err != nil {
		return fmt.Errorf("%s after %s", last, timeout)
	}
	return nil
}

// wantReplicas is how many pods a Deployment runs before the phase or, when begun, after.
func wantReplicas(plan Plan, d Deployment, begun bool) int {
	if begun && plan.Phase == PhaseScaleDown {
		return d.Keep
	}
	return d.Replicas
}

// podsRunning says which Deployments do not run all their pods; "" when all do. Copies of
// pods replaced before their eviction are no pods of their Deployments until handed over
// (no-copy-left and no-extra-replicas judge those left at rest).
func (r *runner) podsRunning(ctx context.Context, plan Plan, begun bool) string {
	pods, err := r.cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: DeploymentLabel})
	if err != nil {
		return fmt.Sprintf("listing pods: %v", err)
	}
	running := map[string]int{}
	pending := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || surge.IsCopy(&p) {
			continue
		}
		if p.Status.Phase == corev1.PodRunning {
			running[p.Labels[DeploymentLabel]]++
		} else {
			pending++
		}
	}
	var short []string
	for _, d := range plan.Deployments {
		if want := wantReplicas(plan, d, begun); running[d.Name] != want {
			short = append(short, fmt.Sprintf("%s %d/%d", d.Name, running[d.Name], want))
		}
	}
	if len(short) == 0 && pending == 0 {
		return ""
	}
	return fmt.Sprintf("pods running: %s; %d not running", strings.Join(short, ", "), pending)
}

// atRest polls the invariants of a cluster at rest until they all hold or the recovery
// bound passes, and returns those that did not hold, with what was wrong.
func (r *runner) atRest(ctx context.Context, plan Plan) map[string]string {
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, r.opts.Recovery, true, func(ctx context.Context) (bool, error) {
		return len(r.restChecks(ctx, plan)) == 0, nil
	})
	if err == nil {
		return nil
	}
	// Once more outside the poll, whose context has ended: what did not hold at the bound.
	return r.restChecks(ctx, plan)
}

// restChecks evaluates the invariants of a cluster at rest once.
func (r *runner) restChecks(ctx context.Context, plan Plan) map[string]string {
	failed := map[string]string{}
	if msg := r.podsRunning(ctx, plan, true); msg != "" {
		failed[InvPodsRunning] = msg
	}
	live, err := r.inject.admin.live(ctx)
	if err != nil {
		failed[InvNoOrphanInstance] = err.Error()
		return failed
	}
	claims := &karpv1.NodeClaimList{}
	if err := r.kube.List(ctx, claims); err != nil {
		failed[InvNoClaimWithout] = err.Error()
		return failed
	}
	liveIDs := map[string]localaws.InstanceSummary{}
	for _, i := range live {
		liveIDs[i.ID] = i
	}
	claimed := map[string]bool{}
	var without, drifted []string
	for _, nc := range claims.Items {
		id, _ := aws.InstanceIDOf(nc.Status.ProviderID)
		claimed[id] = true
		if i, ok := liveIDs[id]; !ok || !i.NodeRegistered {
			without = append(without, nc.Name)
		}
		for _, c := range nc.Status.Conditions {
			if c.Type == karpv1.ConditionTypeDrifted && c.Status == metav1.ConditionTrue {
				drifted = append(drifted, nc.Name)
			}
		}
	}
	var orphans []string
	for _, i := range live {
		if !claimed[i.ID] {
			orphans = append(orphans, i.ID)
		}
	}
	if len(without) > 0 {
		failed[InvNoClaimWithout] = fmt.Sprintf("NodeClaims without a registered instance: %v", without)
	}
	if len(orphans) > 0 {
		failed[InvNoOrphanInstance] = fmt.Sprintf("instances without a NodeClaim: %v", orphans)
	}
	if len(drifted) > 0 {
		failed[InvNoDrifted] = fmt.Sprintf("NodeClaims still drifted: %v", drifted)
	}
	r.surgeChecks(ctx, claims.Items, failed)
	var pods []*corev1.Pod
	for _, d := range plan.Deployments {
		pods = append(pods, podsOf(d, wantReplicas(plan, d, true))...)
	}
	// Both sides priced whole: each live node its NodeClaim's price as launched, the fresh
	// plan's nodes their instances and node costs.
	cost, unpriced := scenario.WholeNodePrice(live, claims.Items)
	fresh := r.fresh.cost(pods)
	if cost > costSlack*fresh+1e-9 {
		failed[InvCost] = fmt.Sprintf("$%.4f/hour on %d nodes priced whole (%d instances priced alone: %v), ×%.3f a fresh plan's $%.4f/hour", cost, len(live), len(unpriced), unpriced, cost/fresh, fresh)
	}
	return failed
}

// surgeChecks evaluates, into failed, the invariants of a rest that replacements before
// eviction and the decisions a killed leader left must come back to: no copy left, no
// Deployment running more pods than its replicas, no node cordoned by a decision no longer
// under way.
func (r *runner) surgeChecks(ctx context.Context, claims []karpv1.NodeClaim, failed map[string]string) {
	pods, err := r.cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		failed[InvNoCopyLeft] = fmt.Sprintf("listing pods: %v", err)
		return
	}
	if left := copiesLeft(pods.Items); len(left) > 0 {
		failed[InvNoCopyLeft] = fmt.Sprintf("copies of pods replaced before their eviction left at rest: %s", strings.Join(left, "; "))
	}
	deps, err := r.cs.AppsV1().Deployments(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		failed[InvNoExtraReplicas] = fmt.Sprintf("listing Deployments: %v", err)
	} else if extra := extraReplicas(deps.Items, pods.Items); len(extra) > 0 {
		failed[InvNoExtraReplicas] = fmt.Sprintf("Deployments running more pods than their replicas: %s", strings.Join(extra, "; "))
	}
	nodes, err := r.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		failed[InvNoCordoned] = fmt.Sprintf("listing nodes: %v", err)
	} else if cordoned := cordonedNodes(nodes.Items, claims); len(cordoned) > 0 {
		failed[InvNoCordoned] = fmt.Sprintf("nodes cordoned for a disruption while their NodeClaims are not being deleted: %s", strings.Join(cordoned, "; "))
	}
}

// copiesLeft describes the copies among pods (surge.IsCopy) that are not being deleted.
func copiesLeft(pods []corev1.Pod) []string {
	var out []string
	for i := range pods {
		p := &pods[i]
		if !surge.IsCopy(p) || p.DeletionTimestamp != nil {
			continue
		}
		state := "not Ready"
		if surge.Ready(p) {
			state = "Ready"
		}
		node := p.Spec.NodeName
		if node == "" {
			node = "no node"
		}
		out = append(out, fmt.Sprintf("%s (%s on %s) replacing pod %s, due Ready by %s", p.Name, state, node,
			p.Annotations[surge.ReplacesAnnotationKey], p.Annotations[surge.DeadlineAnnotationKey]))
	}
	slices.Sort(out)
	return out
}

// extraReplicas describes the Deployments that more pods match, not being deleted nor
// finished, than their replicas: a copy left, or an old pod its ReplicaSet kept beside the
// copy that replaced it.
func extraReplicas(deps []appsv1.Deployment, pods []corev1.Pod) []string {
	var out []string
	for _, d := range deps {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		var names []string
		for i := range pods {
			p := &pods[i]
			if p.Namespace == d.Namespace && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && sel.Matches(labels.Set(p.Labels)) {
				names = append(names, p.Name)
			}
		}
		if int32(len(names)) > want {
			slices.Sort(names)
			out = append(out, fmt.Sprintf("%s runs %d pods for %d replicas: %v", d.Name, len(names), want, names))
		}
	}
	slices.Sort(out)
	return out
}

// cordonedNodes describes the nodes that carry the disruption taint (karpenter.sh/disrupted)
// or the mark of a disruption's cordon (disruption.CordonedAnnotationKey) while their
// NodeClaim is not being deleted: a decision lost with its leader, or abandoned, that nothing
// released. Nodes of no NodeClaim are left to no-nodeclaim-without-instance and cleanup.
func cordonedNodes(nodes []corev1.Node, claims []karpv1.NodeClaim) []string {
	claimOf := map[string]*karpv1.NodeClaim{}
	for i := range claims {
		if name := claims[i].Status.NodeName; name != "" {
			claimOf[name] = &claims[i]
		}
	}
	var out []string
	for _, n := range nodes {
		nc := claimOf[n.Name]
		if nc == nil || nc.DeletionTimestamp != nil {
			continue
		}
		var marks []string
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) }) {
			marks = append(marks, "tainted "+karpv1.DisruptedNoScheduleTaint.ToString())
		}
		if at, ok := n.Annotations[disruption.CordonedAnnotationKey]; ok {
			marks = append(marks, "cordoned at "+at)
		}
		if len(marks) > 0 {
			out = append(out, fmt.Sprintf("%s (NodeClaim %s) %s", n.Name, nc.Name, strings.Join(marks, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// launched counts the instances the local endpoint launched.
func (r *runner) launched(ctx context.Context) (int, error) {
	var n localaws.LaunchCount
	return n.Instances, r.inject.admin.do(ctx, http.MethodGet, "launched", nil, &n)
}

// checkLaunches checks that no NodeClaim got two instances: every instance launched during
// the trial names its NodeClaim, and no NodeClaim is named twice.
func (r *runner) checkLaunches(ctx context.Context, plan Plan, start time.Time, before int, res *TrialResult) {
	after, err := r.launched(ctx)
	all, err2 := r.inject.admin.instances(ctx)
	if err != nil || err2 != nil {
		res.check(plan, InvNoDuplicateLaunch, false, "reading the launches: %v %v", err, err2)
		return
	}
	byClaim := map[string][]string{}
	for _, i := range all {
		if i.LaunchTime.Before(start.Add(-time.Second)) {
			continue
		}
		claim := i.Tags["karpenter.sh/nodeclaim"]
		byClaim[claim] = append(byClaim[claim], i.ID)
	}
	var dups []string
	for claim, ids := range byClaim {
		if claim == "" || len(ids) > 1 {
			dups = append(dups, fmt.Sprintf("NodeClaim %q: %v", claim, ids))
		}
	}
	slices.Sort(dups)
	res.Launched, res.Created = after-before, len(byClaim)
	res.check(plan, InvNoDuplicateLaunch, len(dups) == 0 && res.Launched <= res.Created,
		"%d instances launched for %d NodeClaims: %s", res.Launched, res.Created, strings.Join(dups, "; "))
}

// plannedOnto reads a Planned event's NodeClaim.
var plannedOnto = regexp.MustCompile(`^planned onto NodeClaim (\S+) `)

// checkRejected checks that the pods of UnmodelledRejection faults, which the scheduler
// rejects on every node Tailor launches, got no more launches than the launch limit: the
// instances launched during the trial for the NodeClaims their Planned events name.
func (r *runner) checkRejected(ctx context.Context, plan Plan, start time.Time, res *TrialResult) {
	pods, err := r.cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: RejectedLabel})
	if err != nil || len(pods.Items) == 0 {
		if err != nil {
			res.check(plan, InvLaunchesBounded, false, "listing the rejected pods: %v", err)
		}
		return
	}
	all, err := r.inject.admin.instances(ctx)
	if err != nil {
		res.check(plan, InvLaunchesBounded, false, "reading the launches: %v", err)
		return
	}
	launchedFor := map[string]int{}
	for _, i := range all {
		if !i.LaunchTime.Before(start.Add(-time.Second)) {
			launchedFor[i.Tags["karpenter.sh/nodeclaim"]]++
		}
	}
	var over []string
	for _, p := range pods.Items {
		events, err := r.cs.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.uid": string(p.UID), "reason": provisioning.ReasonPlanned}.String()})
		if err != nil {
			res.check(plan, InvLaunchesBounded, false, "listing the events of pod %s: %v", p.Name, err)
			return
		}
		claims := map[string]bool{}
		for _, e := range events.Items {
			if m := plannedOnto.FindStringSubmatch(e.Message); m != nil {
				claims[m[1]] = true
			}
		}
		launches := 0
		for claim := range claims {
			launches += launchedFor[claim]
		}
		if launches > launchlimit.DefaultPerPod {
			over = append(over, fmt.Sprintf("%s: %d launches for NodeClaims %v", p.Name, launches, slices.Sorted(maps.Keys(claims))))
		}
		res.RejectedLaunches += launches
	}
	res.check(plan, InvLaunchesBounded, len(over) == 0, "pods the scheduler rejects on every launched node got more than --launch-limit-per-pod (%d) launches: %v", launchlimit.DefaultPerPod, over)
}

// checkEvictions checks that pods left only through the Eviction API (which holds them to
// their budgets), with their node when a fault took it, by the scale-down, or, replaced
// before their eviction, by their ReplicaSet once another pod of theirs was Ready; and that
// no pod the scale-down's consolidation moved (evicted, or replaced by a copy) was moved
// again.
func (r *runner) checkEvictions(plan Plan, phaseStart time.Time, seen history, res *TrialResult) {
	allowed := map[string]int{}
	if plan.Phase == PhaseScaleDown {
		for _, d := range plan.Deployments {
			allowed[d.Name] = d.Replicas - d.Keep
		}
	}
	var bypassed []string
	for _, e := range seen.deleted {
		switch {
		case e.node == "" || r.inject.lost(e.node):
		case e.copy:
			// Deleted before it was handed over (its replacement abandoned, swept by a new
			// leader, or gone with its NodeClaim): a surge beyond its Deployment's replicas,
			// which no budget counts.
		case e.replaced && e.servedBy != "":
			// Replaced before its eviction: its ReplicaSet deleted it once a copy served.
		case allowed[e.deployment] > 0:
			allowed[e.deployment]--
		default:
			how := ""
			if e.replaced {
				how = " (handed over to a copy, but no other pod of its Deployment was Ready)"
			}
			if e.tombstone {
				how += " (deletion missed by the watch, judged by the pod's last known state)"
			}
			bypassed = append(bypassed, fmt.Sprintf("%s on %s%s", e.pod, e.node, how))
		}
	}
	res.check(plan, InvPDB, len(bypassed) == 0, "pods deleted without the Eviction API, beyond the scale-down and the nodes faults took: %v", bypassed)
	if plan.Phase != PhaseScaleDown {
		return
	}
	// A pod of a Deployment created once consolidation had evicted one of its pods, or
	// started a copy of one, took the place of a moved one (as the sidecar counts moved
	// pods, by their controller, from the decision on); within the sidecar's hold on moved
	// pods, nothing may move it again: evict it, or replace it by a copy. Past the hold, a
	// later consolidation may, by design (the chaos stack shortens the hold to
	// MovedPodsHold). A pod that replaced one lost with a node a fault took was not moved,
	// and the drain of a node a fault took (after a spot warning, or once its instance is
	// gone) is no consolidation. A copy evicted or deleted before it was handed over was no
	// pod of its Deployment.
	firstMove := map[string]time.Time{}
	moveAt := func(deployment string, at time.Time) {
		if first, ok := firstMove[deployment]; !ok || at.Before(first) {
			firstMove[deployment] = at
		}
	}
	type move struct {
		eviction
		how string
	}
	var moves []move
	for _, e := range seen.evicted {
		if e.copy || r.inject.lost(e.node) {
			continue
		}
		moves = append(moves, move{e, "evicted"})
		if !e.at.Before(phaseStart) {
			moveAt(e.deployment, e.at)
		}
	}
	for _, e := range seen.copies {
		if !e.at.Before(phaseStart) {
			moveAt(e.deployment, e.at)
		}
	}
	for _, e := range seen.deleted {
		if e.replaced && !e.copy && !r.inject.lost(e.node) {
			moves = append(moves, move{e, "replaced by a copy"})
		}
	}
	var twice []string
	for _, m := range moves {
		first, moved := firstMove[m.deployment]
		// Creation times are whole seconds.
		moved = moved && !m.created.Before(first.Truncate(time.Second))
		if moved && m.at.Sub(m.created) < MovedPodsHold {
			twice = append(twice, fmt.Sprintf("%s (created %s after the scale-down, %s after consolidation first moved a pod of %s; %s %s after that) from %s",
				m.pod, m.created.Sub(phaseStart).Round(time.Second), m.created.Sub(first).Round(time.Second), m.deployment,
				m.how, m.at.Sub(m.created).Round(time.Second), m.node))
		}
	}
	res.check(plan, InvEvictedOnce, len(twice) == 0, "pods moved again within the hold on pods consolidation moved: %v", twice)
}

// crashLoop is how many times a component may end on its own in one trial before it counts
// as crash-looping: a sidecar that led exits once when the API server is away past its
// renew deadline, and may exit once more if its restart meets the API server still away.
const crashLoop = 3

// checkProcesses checks that no component ended on its own crashLoop times, and samples the
// goroutines and memory of Tailor's processes.
func (r *runner) checkProcesses(ctx context.Context, plan Plan, res *TrialResult) {
	var looping []string
	for name, ends := range r.inject.restarted() {
		res.Restarts += len(ends)
		if len(ends) >= crashLoop {
			looping = append(looping, fmt.Sprintf("%s ended %d times: %s", name, len(ends), strings.Join(ends, "; ")))
		}
	}
	slices.Sort(looping)
	res.check(plan, InvNoCrash, len(looping) == 0, "components crash-looping: %v", looping)
	r.samples = append(r.samples, r.inject.sample(ctx, plan.Phase)...)
}

// cleanup deletes the trial's Deployments and NodeClaims and waits for the cluster and the
// local endpoint to be empty, with no fault in force.
func (r *runner) cleanup(ctx context.Context) error {
	if err := deleteDeployments(ctx, r.cs); err != nil {
		return err
	}
	zero := int64(0)
	if err := r.cs.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: RejectedLabel}); err != nil {
		return fmt.Errorf("deleting the rejected pods: %w", err)
	}
	if err := r.kube.DeleteAllOf(ctx, &karpv1.NodeClaim{}); err != nil {
		return fmt.Errorf("deleting NodeClaims: %w", err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		claims := &karpv1.NodeClaimList{}
		if err := r.kube.List(ctx, claims); err != nil {
			last = err.Error()
			return false, nil
		}
		live, err := r.inject.admin.live(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		left := 0
		for _, label := range []string{DeploymentLabel, RejectedLabel} {
			pods := &corev1.PodList{}
			if err := r.kube.List(ctx, pods, client.InNamespace(metav1.NamespaceDefault), client.HasLabels{label}); err != nil {
				last = err.Error()
				return false, nil
			}
			left += len(pods.Items)
		}
		last = fmt.Sprintf("%d NodeClaims, %d live instances, %d pods left", len(claims.Items), len(live), left)
		return len(claims.Items) == 0 && len(live) == 0 && left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("emptying the cluster after the trial: %s", last)
	}
	return nil
}
