package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// DefaultDisruptionDeployments is how many single-replica Deployments issue 42 measures
// replace-before-evict with.
const DefaultDisruptionDeployments = 20

// defaultFillers is the replicas of each NodePool's filler Deployment before the drift.
const defaultFillers = 4

// The NodePools of the disruption scenario: the opted-in half runs on the first, which
// carries surge.AnnotationKey, the baseline half on the second. Apart, the pools let every
// drifted node of the opted-in half be judged while the baseline's nodes are reported, and
// each has its own disruption budget.
const (
	disruptionOptedInPool  = "opted-in"
	disruptionBaselinePool = "baseline"
	disruptionNodeClass    = "disruption"
)

// The AMI releases the EC2NodeClass is pinned to before and after the drift, as the chaos
// trials' drift phase does: the local endpoint publishes both.
const (
	amiBeforeDrift = "al2023@v20261001"
	amiAfterDrift  = "al2023@v20261101"
)

// How a Deployment of the disruption scenario opted in to replace-before-evict.
const (
	OptInTemplate = "pod template"
	OptInNodePool = "NodePool"
)

// DisruptionOptions configure the disruption scenario.
type DisruptionOptions struct {
	// Deployments is how many single-replica Deployments run, each behind a Service and a
	// PodDisruptionBudget of minAvailable 1 (DefaultDisruptionDeployments). The first half
	// opt in to replace-before-evict, alternately by their pod template and by their
	// NodePool, and run on the opted-in NodePool; the others run on the baseline one.
	Deployments int
	// Fillers is the replicas of each NodePool's filler Deployment (no budget) before the
	// drift, which scales them to one so that consolidation has nodes to take too (4).
	Fillers int
	// ConsolidateAfter is set on the NodePools at the drift (DefaultConsolidateAfter); until
	// then it is Never, so that the cluster being set up is not consolidated.
	ConsolidateAfter time.Duration
	// DisruptionInterval is the sidecar's --disruption-interval on the stack
	// (DefaultDisruptionInterval); only Quiet's default uses it.
	DisruptionInterval time.Duration
	// Quiet is how long the opted-in pool must stay converged to count as converged: by
	// default the longer of ConsolidateAfter and the sidecar's protection of new nodes, plus
	// three disruption intervals, as in ScaleDown, so that the consolidation the filler's
	// scale-down leaves to do has had its passes. Idle passes cannot be waited for: the
	// baseline's drains may block for good and keep the sidecar busy.
	Quiet time.Duration
	// RunTimeout bounds the set-up: every pod running and every Service with a ready
	// endpoint (5 minutes). Not getting there is an error: there is nothing to measure.
	RunTimeout time.Duration
	// Timeout bounds the whole run (20 minutes). Not converging within it is a result
	// (TimedOut), measured at the bound.
	Timeout time.Duration
}

func (o *DisruptionOptions) defaults() error {
	if o.Deployments == 0 {
		o.Deployments = DefaultDisruptionDeployments
	}
	if o.Deployments < 2 {
		return errors.New("disruption: at least two Deployments, one opted in and one not")
	}
	if o.Fillers == 0 {
		o.Fillers = defaultFillers
	}
	if o.ConsolidateAfter == 0 {
		o.ConsolidateAfter = DefaultConsolidateAfter
	}
	if o.DisruptionInterval == 0 {
		o.DisruptionInterval = DefaultDisruptionInterval
	}
	if o.Quiet == 0 {
		o.Quiet = max(o.ConsolidateAfter, newNodeProtection) + 3*o.DisruptionInterval
	}
	if o.RunTimeout == 0 {
		o.RunTimeout = 5 * time.Minute
	}
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Minute
	}
	return nil
}

// DisruptionResult is what the disruption scenario measured.
type DisruptionResult struct {
	// Rows are the Deployments behind a Service, the opted-in half first.
	Rows []DisruptionRow
	// Fillers is the filler Deployments' replicas before the drift.
	Fillers int
	// Provisioned is how long the set-up took to run every pod with every Service ready;
	// NodesBefore counts the NodeClaims of the scenario's NodePools then.
	Provisioned time.Duration
	NodesBefore int
	// OptedIn and Baseline are what the drift did to each half's NodePool.
	OptedIn, Baseline PoolDrift
	// Copies counts the pods seen labelled surge.ReplacesLabelKey after the drift began: the
	// copies replace-before-evict started. Evictions counts the scenario's pods evicted
	// through the Eviction API meanwhile.
	Copies, Evictions int
	// ExtraPods counts the pods at the end beyond the replicas of their Deployment, or still
	// labelled surge.ReplacesLabelKey (extraPods).
	ExtraPods int
	// Passes counts the sidecar's disruption passes from the drift to the end, by result
	// (disruption.PassDecided, ...): passes that stay busy say a decision, or a NodeClaim it
	// deleted, is not done.
	Passes map[string]int
	// TimedOut is set when the opted-in pool did not converge within the run's timeout;
	// Waiting then says what it still waited for. Converge is the time from the drift to
	// the start of the converged state that lasted Quiet, or to the bound when TimedOut.
	TimedOut bool
	Waiting  string
	Converge time.Duration
	Quiet    time.Duration
	// Wall is the whole scenario's time.
	Wall time.Duration
}

// DisruptionRow is one Deployment behind a Service.
type DisruptionRow struct {
	Name string
	// OptIn says how it opted in (OptInTemplate, OptInNodePool), "" for the baseline.
	OptIn string
	// WithoutReadyEndpoint is how long after the drift began its Service had no ready
	// endpoint, by its EndpointSlices.
	WithoutReadyEndpoint time.Duration
	// Moved is set when none of its pods at the end is one it ran at the drift.
	Moved bool
}

// PoolDrift is what the drift did to one NodePool.
type PoolDrift struct {
	NodePool string
	// Drifted counts its NodeClaims there when the drift began and those seen Drifted
	// after; Replaced those of them gone by the end. The others were kept, Draining of them
	// being deleted: their drain had not ended.
	Drifted, Replaced, Draining int
}

// Kept counts the drifted NodeClaims still there at the end.
func (p PoolDrift) Kept() int { return p.Drifted - p.Replaced }

// disruptionDeployment is a Deployment of the scenario: the shared shape plus whether it
// has a Service and how it opted in.
type disruptionDeployment struct {
	*deployment
	pool    string
	service bool
	optIn   string
}

// disruptionDeployments are the scenario's Deployments: n behind a Service and a budget of
// minAvailable 1, the first half opted in, and a filler for each NodePool.
func disruptionDeployments(n, fillers int) []disruptionDeployment {
	one := intstr.FromInt32(1)
	var out []disruptionDeployment
	for i := range n {
		d := disruptionDeployment{pool: disruptionBaselinePool, service: true}
		kind := "baseline"
		if i < n/2 {
			d.pool, d.optIn, kind = disruptionOptedInPool, OptInNodePool, "nodepool"
			if i%2 == 0 {
				d.optIn, kind = OptInTemplate, "template"
			}
		}
		pod := disruptionPod(d.pool)
		if d.optIn == OptInTemplate {
			pod.Annotations = map[string]string{surge.AnnotationKey: "true"}
		}
		d.deployment = &deployment{name: fmt.Sprintf("%s-%02d", kind, i), pod: pod, from: 1, to: 1, minAvailable: &one}
		out = append(out, d)
	}
	for _, pool := range []string{disruptionOptedInPool, disruptionBaselinePool} {
		out = append(out, disruptionDeployment{pool: pool, deployment: &deployment{
			name: "filler-" + pool, pod: disruptionPod(pool), from: fillers, to: 1, unbudgeted: true,
		}})
	}
	return out
}

// shapes are the shared shapes of the Deployments, for the helpers the scale-down has.
func shapes(ds []disruptionDeployment) []*deployment {
	out := make([]*deployment, len(ds))
	for i, d := range ds {
		out[i] = d.deployment
	}
	return out
}

// disruptionPod is the pod of every Deployment on a NodePool: four fit a node of the
// NodePools' 2 vCPUs, so that the Deployments spread over several nodes.
func disruptionPod(pool string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{Spec: corev1.PodSpec{
		SchedulerName:                 "tailor-scheduler",
		NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: pool},
		TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{
			Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
			}},
		}},
	}}
}

// disruptionPools is the scenario's EC2NodeClass, pinned to ami, and its two NodePools of
// on-demand 2-vCPU c and m instances. Their budgets let every node go at once: drift
// replaces one node a pass anyway, and the time measured is then replace-before-evict's,
// not the budgets' pacing.
func disruptionPools(cluster, ami string) string {
	pool := func(name, annotations string) string {
		return fmt.Sprintf(`---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s%[2]s
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: %[3]s
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values: [on-demand]
      - key: karpenter.k8s.aws/instance-category
        operator: In
        values: [c, m]
      - key: karpenter.k8s.aws/instance-cpu
        operator: In
        values: ["2"]
      - key: kubernetes.io/arch
        operator: In
        values: [amd64]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: Never
    budgets:
    - nodes: "100%%"
`, name, annotations, disruptionNodeClass)
	}
	return fmt.Sprintf(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: %[1]s
spec:
  role: KarpenterNodeRole-%[2]s
  amiSelectorTerms:
  - alias: %[3]s
  subnetSelectorTerms:
  - tags:
      karpenter.sh/discovery: %[2]s
  securityGroupSelectorTerms:
  - tags:
      karpenter.sh/discovery: %[2]s
`, disruptionNodeClass, cluster, ami) +
		pool(disruptionOptedInPool, fmt.Sprintf("\n  annotations:\n    %s: \"true\"", surge.AnnotationKey)) +
		pool(disruptionBaselinePool, "")
}

// Disruption measures replace-before-evict (issue 42) on the stack: single-replica
// Deployments behind Services and PodDisruptionBudgets of minAvailable 1, half opted in,
// on two NodePools with a filler Deployment each. Once everything runs it drifts every node
// (the EC2NodeClass moves to another AMI release), scales the fillers down and turns
// consolidation on, then follows the Services' EndpointSlices until the opted-in pool has
// converged, and prints a report to out. Not converging within opts.Timeout is a result.
func Disruption(ctx context.Context, stack *localstack.Stack, opts DisruptionOptions, out io.Writer) (DisruptionResult, error) {
	start := time.Now()
	if err := opts.defaults(); err != nil {
		return DisruptionResult{}, err
	}
	deadline := start.Add(opts.Timeout)
	setupCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cfg := rest.CopyConfig(stack.Config)
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return DisruptionResult{}, err
	}
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		return DisruptionResult{}, err
	}
	ds := disruptionDeployments(opts.Deployments, opts.Fillers)
	r := DisruptionResult{
		Fillers: opts.Fillers, Quiet: opts.Quiet,
		OptedIn: PoolDrift{NodePool: disruptionOptedInPool}, Baseline: PoolDrift{NodePool: disruptionBaselinePool},
	}
	objs, err := localstack.Decode([]byte(disruptionPools(stack.ClusterName(), amiBeforeDrift)))
	if err != nil {
		return r, err
	}
	pools, err := applyPoolObjects(setupCtx, cfg, objs, stack.ClusterName())
	if err != nil {
		return r, err
	}
	if err := waitNodeClassReady(setupCtx, kube, disruptionNodeClass); err != nil {
		return r, fmt.Errorf("waiting for EC2NodeClass %s to be ready: %w", disruptionNodeClass, err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := watchDisruption(watchCtx, cfg, ds)
	if err != nil {
		return r, err
	}
	run := &disruptionRun{opts: opts, cs: cs, ds: ds, w: w, metricsURLs: stack.ProvisionerMetricsURLs, out: out, r: &r}
	fmt.Fprintf(out, "disruption: %d Deployments of one replica behind a Service and a PodDisruptionBudget of minAvailable 1, %d opted in to replace-before-evict; fillers of %d pods on NodePools %s and %s\n",
		opts.Deployments, opts.Deployments/2, opts.Fillers, disruptionOptedInPool, disruptionBaselinePool)
	if err := run.provision(setupCtx); err != nil {
		return r, err
	}
	driftAt, err := w.begin(setupCtx)
	if err != nil {
		return r, err
	}
	passesBefore, err := passCounts(setupCtx, run.metricsURLs, passResults...)
	if err != nil {
		return r, err
	}
	if err := run.disrupt(setupCtx, objs, pools); err != nil {
		return r, err
	}
	if err := run.converge(ctx, driftAt, deadline); err != nil {
		return r, err
	}
	if err := run.measureEnd(ctx, time.Now()); err != nil {
		return r, err
	}
	passesAfter, err := passCounts(ctx, run.metricsURLs, passResults...)
	if err != nil {
		return r, err
	}
	r.Passes = map[string]int{}
	for _, res := range passResults {
		r.Passes[res] = int(passesAfter[res] - passesBefore[res])
	}
	stopWatch()
	r.Wall = time.Since(start)
	PrintDisruption(out, r)
	return r, nil
}

// disruptionRun is the disruption scenario under way.
type disruptionRun struct {
	opts        DisruptionOptions
	cs          kubernetes.Interface
	ds          []disruptionDeployment
	w           *disruptionWatch
	metricsURLs []string
	out         io.Writer
	r           *DisruptionResult
}

// passResults are the results of the sidecar's disruption passes, in the order reported.
var passResults = []string{disruption.PassDecided, disruption.PassBusy, disruption.PassIdle, disruption.PassPlanning, disruption.PassFailed}

// provision creates the Deployments, their budgets and Services, and waits until every pod
// runs and every Service has a ready endpoint.
func (s *disruptionRun) provision(ctx context.Context) error {
	created := time.Now()
	if err := createDeployments(ctx, s.cs, shapes(s.ds)); err != nil {
		return err
	}
	for _, d := range s.ds {
		if d.service {
			if err := createService(ctx, s.cs, d.name); err != nil {
				return err
			}
		}
	}
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, time.Second, s.opts.RunTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		waiting, err = s.w.unready(ctx, s.ds)
		return waiting == "", err
	})
	if err != nil {
		return fmt.Errorf("waiting for every pod to run and every Service to have a ready endpoint (%s%s): %w", waiting, describe(pendingPods(ctx, s.w.cache)), err)
	}
	s.r.Provisioned = time.Since(created)
	claims := &karpv1.NodeClaimList{}
	if err := s.w.cache.List(ctx, claims); err != nil {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	s.r.NodesBefore = len(claims.Items)
	fmt.Fprintf(s.out, "disruption: every pod running and every Service ready after %s on %d nodes; drifting them (EC2NodeClass %s %s → %s), scaling the fillers to 1, consolidation on\n",
		s.r.Provisioned.Round(time.Second), s.r.NodesBefore, disruptionNodeClass, amiBeforeDrift, amiAfterDrift)
	return nil
}

// createService creates the Service in front of a Deployment's pods.
func createService(ctx context.Context, cs kubernetes.Interface, name string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{DeploymentLabel: name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := cs.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Service %s: %w", name, err)
	}
	return nil
}

// disrupt drifts every node of the scenario by pinning the EC2NodeClass to the other AMI
// release, scales the fillers down and turns consolidation on.
func (s *disruptionRun) disrupt(ctx context.Context, objs []*unstructured.Unstructured, pools *workloadPools) error {
	for _, o := range objs {
		if o.GetKind() != "EC2NodeClass" {
			continue
		}
		terms := []any{map[string]any{"alias": amiAfterDrift}}
		if err := unstructured.SetNestedSlice(o.Object, terms, "spec", "amiSelectorTerms"); err != nil {
			return fmt.Errorf("setting amiSelectorTerms of EC2NodeClass %s: %w", o.GetName(), err)
		}
		if err := pools.applier.ApplyObjects(ctx, o); err != nil {
			return err
		}
	}
	if err := scaleDeployments(ctx, s.cs, shapes(s.ds)); err != nil {
		return err
	}
	return pools.consolidate(ctx, s.opts.ConsolidateAfter)
}

// progressEvery is how often the wait for convergence says what it waits for.
const progressEvery = 30 * time.Second

// converge waits until the opted-in pool has stayed converged for Quiet, or the deadline.
func (s *disruptionRun) converge(ctx context.Context, driftAt, deadline time.Time) error {
	var heldSince, said time.Time
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
		var err error
		if waiting, err = s.w.waiting(ctx); err != nil {
			return false, err
		}
		now := time.Now()
		if waiting != "" {
			heldSince = time.Time{}
			if now.Sub(said) >= progressEvery {
				fmt.Fprintf(s.out, "disruption: %s after the drift, waiting for %s\n", now.Sub(driftAt).Round(time.Second), waiting)
				said = now
			}
			return false, nil
		}
		if heldSince.IsZero() {
			heldSince = now
		}
		return now.Sub(heldSince) >= s.opts.Quiet, nil
	})
	switch {
	case err == nil:
		s.r.Converge = heldSince.Sub(driftAt)
	case ctx.Err() != nil || !wait.Interrupted(err):
		return err
	default:
		s.r.TimedOut, s.r.Converge = true, time.Since(driftAt)
		s.r.Waiting = waiting
		if waiting == "" {
			s.r.Waiting = fmt.Sprintf("the converged state to last %s (it had lasted %s)", s.opts.Quiet, time.Since(heldSince).Round(time.Second))
		}
		fmt.Fprintf(s.out, "disruption: not converged within %s: waiting for %s%s\n", s.opts.Timeout, s.r.Waiting, describe(pendingPods(ctx, s.w.cache)))
	}
	return nil
}

// measureEnd fills the result in from the watch at the end.
func (s *disruptionRun) measureEnd(ctx context.Context, end time.Time) error {
	pods, claims, _, err := s.w.list(ctx)
	if err != nil {
		return err
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	live := map[types.UID]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live[p.UID] = true
		}
	}
	want := map[string]int{}
	for _, d := range s.ds {
		want[d.name] = d.to
		if !d.service {
			continue
		}
		moved := true
		for _, uid := range s.w.startPods[d.name] {
			moved = moved && !live[uid]
		}
		s.r.Rows = append(s.r.Rows, DisruptionRow{
			Name: d.name, OptIn: d.optIn, WithoutReadyEndpoint: s.w.outages.without(d.name, end), Moved: moved,
		})
	}
	s.r.ExtraPods = extraPods(pods, want)
	s.r.OptedIn = poolDrift(disruptionOptedInPool, s.w.drifted, claims)
	s.r.Baseline = poolDrift(disruptionBaselinePool, s.w.drifted, claims)
	s.r.Copies, s.r.Evictions = len(s.w.copies), len(s.w.evicted)
	return nil
}

// extraPods counts the live pods beyond their Deployment's replicas (want, by the
// Deployment's name): for each Deployment the more of its pods beyond its replicas and of
// its pods labelled surge.ReplacesLabelKey, plus pods so labelled of no Deployment of want.
func extraPods(pods []corev1.Pod, want map[string]int) int {
	count, copies := map[string]int{}, map[string]int{}
	extra := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		d := p.Labels[DeploymentLabel]
		_, isCopy := p.Labels[surge.ReplacesLabelKey]
		if _, ours := want[d]; !ours {
			if isCopy {
				extra++
			}
			continue
		}
		count[d]++
		if isCopy {
			copies[d]++
		}
	}
	for d, n := range want {
		extra += max(count[d]-n, copies[d], 0)
	}
	return extra
}

// poolDrift is what the drift did to a NodePool: drifted names the NodeClaims drifted,
// with their NodePool; those not among claims are gone.
func poolDrift(pool string, drifted map[string]string, claims []karpv1.NodeClaim) PoolDrift {
	there := map[string]*karpv1.NodeClaim{}
	for i := range claims {
		there[claims[i].Name] = &claims[i]
	}
	p := PoolDrift{NodePool: pool}
	for name, of := range drifted {
		if of != pool {
			continue
		}
		p.Drifted++
		switch nc, ok := there[name]; {
		case !ok:
			p.Replaced++
		case nc.DeletionTimestamp != nil:
			p.Draining++
		}
	}
	return p
}

// disruptionWaiting says what keeps a NodePool from having converged after the drift:
// drifted NodeClaims of it left (drifted names every NodeClaim drifted, with its NodePool),
// pods pending, copies of replace-before-evict still labelled as such, or cordoned nodes of
// it; "" when nothing does.
func disruptionWaiting(pool string, drifted map[string]string, pods []corev1.Pod, claims []karpv1.NodeClaim, nodes []corev1.Node) string {
	var left, cordoned []string
	for _, nc := range claims {
		if drifted[nc.Name] == pool {
			left = append(left, nc.Name)
		}
	}
	pending, copies := 0, 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase == corev1.PodPending {
			pending++
		}
		if _, ok := p.Labels[surge.ReplacesLabelKey]; ok {
			copies++
		}
	}
	for _, n := range nodes {
		if n.Labels[karpv1.NodePoolLabelKey] == pool && isCordoned(&n) {
			cordoned = append(cordoned, n.Name)
		}
	}
	sort.Strings(left)
	sort.Strings(cordoned)
	var parts []string
	if len(left) > 0 {
		parts = append(parts, fmt.Sprintf("%d drifted NodeClaims of NodePool %s to go (%s)", len(left), pool, strings.Join(left, ", ")))
	}
	if pending > 0 {
		parts = append(parts, fmt.Sprintf("%d pods pending", pending))
	}
	if copies > 0 {
		parts = append(parts, fmt.Sprintf("%d pods labelled %s", copies, surge.ReplacesLabelKey))
	}
	if len(cordoned) > 0 {
		parts = append(parts, fmt.Sprintf("%d cordoned nodes of NodePool %s (%s)", len(cordoned), pool, strings.Join(cordoned, ", ")))
	}
	return strings.Join(parts, ", ")
}

// isCordoned reports whether a node is cordoned: unschedulable, or tainted by a disruption.
func isCordoned(n *corev1.Node) bool {
	return n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint)
	})
}

// disruptionWatch follows the scenario's pods, the NodeClaims, the Nodes and the Services'
// EndpointSlices through informers, so that no moment without a ready endpoint between
// two looks is missed.
type disruptionWatch struct {
	cache cache.Cache
	// services are the Services followed; pools the scenario's NodePools.
	services map[string]bool
	pools    map[string]bool

	mu sync.Mutex
	// ready counts the ready endpoints of each EndpointSlice, by Service and slice name.
	ready   map[string]map[string]int
	outages *outages
	// begun is when the drift began. drifted names, with its NodePool, every NodeClaim of the
	// scenario's NodePools there then or seen Drifted since; startPods the pods of each
	// Deployment then.
	begun     time.Time
	drifted   map[string]string
	startPods map[string][]types.UID
	// copies and evicted are the pods seen, after the drift began, labelled
	// surge.ReplacesLabelKey and evicted through the Eviction API.
	copies, evicted map[types.UID]bool
}

// newDisruptionWatch returns a watch of the Deployments that reads no cache yet.
func newDisruptionWatch(ds []disruptionDeployment) *disruptionWatch {
	w := &disruptionWatch{
		services: map[string]bool{}, pools: map[string]bool{disruptionOptedInPool: true, disruptionBaselinePool: true},
		ready: map[string]map[string]int{}, outages: newOutages(),
		drifted: map[string]string{}, startPods: map[string][]types.UID{},
		copies: map[types.UID]bool{}, evicted: map[types.UID]bool{},
	}
	for _, d := range ds {
		if d.service {
			w.services[d.name] = true
		}
	}
	return w
}

// watchDisruption starts informers on the default namespace's pods and EndpointSlices, the
// NodeClaims and the Nodes, and returns once they have synced.
func watchDisruption(ctx context.Context, cfg *rest.Config, ds []disruptionDeployment) (*disruptionWatch, error) {
	inDefault := map[string]cache.Config{metav1.NamespaceDefault: {}}
	c, err := cache.New(cfg, cache.Options{
		Scheme: apischeme.New(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                {Namespaces: inDefault},
			&discoveryv1.EndpointSlice{}: {Namespaces: inDefault},
			&karpv1.NodeClaim{}:          {},
			&corev1.Node{}:               {},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache: %w", err)
	}
	w := newDisruptionWatch(ds)
	w.cache = c
	handlers := []struct {
		obj     client.Object
		handler toolscache.ResourceEventHandlerFuncs
	}{
		{&corev1.Pod{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    w.pod,
			UpdateFunc: func(_, o any) { w.pod(o) },
			DeleteFunc: w.pod,
		}},
		{&discoveryv1.EndpointSlice{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.endpointSlice(o, false) },
			UpdateFunc: func(_, o any) { w.endpointSlice(o, false) },
			DeleteFunc: func(o any) { w.endpointSlice(o, true) },
		}},
		{&karpv1.NodeClaim{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    w.nodeClaim,
			UpdateFunc: func(_, o any) { w.nodeClaim(o) },
		}},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, fmt.Errorf("watching %T: %w", h.obj, err)
		}
		if _, err := inf.AddEventHandler(h.handler); err != nil {
			return nil, fmt.Errorf("watching %T: %w", h.obj, err)
		}
	}
	// Nodes are only read, for their cordons.
	if _, err := c.GetInformer(ctx, &corev1.Node{}); err != nil {
		return nil, fmt.Errorf("watching Nodes: %w", err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the cache of pods, EndpointSlices, NodeClaims and Nodes did not sync")
	}
	return w, nil
}

func (w *disruptionWatch) pod(o any) {
	p, ok := unwrap(o).(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.begun.IsZero() {
		return
	}
	if _, ok := p.Labels[surge.ReplacesLabelKey]; ok {
		w.copies[p.UID] = true
	}
	if evictedPod(p) {
		w.evicted[p.UID] = true
	}
}

func (w *disruptionWatch) endpointSlice(o any, deleted bool) {
	es, ok := unwrap(o).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	svc := es.Labels[discoveryv1.LabelServiceName]
	if !w.services[svc] {
		return
	}
	ready := 0
	for _, e := range es.Endpoints {
		// The API reads an unset condition as ready.
		if e.Conditions.Ready == nil || *e.Conditions.Ready {
			ready++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ready[svc] == nil {
		w.ready[svc] = map[string]int{}
	}
	if deleted {
		delete(w.ready[svc], es.Name)
	} else {
		w.ready[svc][es.Name] = ready
	}
	total := 0
	for _, n := range w.ready[svc] {
		total += n
	}
	w.outages.observe(svc, total > 0, time.Now())
}

func (w *disruptionWatch) nodeClaim(o any) {
	nc, ok := unwrap(o).(*karpv1.NodeClaim)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pool := nc.Labels[karpv1.NodePoolLabelKey]
	if !w.begun.IsZero() && w.pools[pool] && nodeclaim.IsTrue(nc, karpv1.ConditionTypeDrifted) {
		w.drifted[nc.Name] = pool
	}
}

// begin marks the start of the drift: the NodeClaims of the scenario's NodePools are all to
// drift, the outages count from now, and each Deployment's pods are those to move.
func (w *disruptionWatch) begin(ctx context.Context) (time.Time, error) {
	pods, claims, _, err := w.list(ctx)
	if err != nil {
		return time.Time{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.begun = time.Now()
	w.outages.begin(w.begun)
	for _, nc := range claims {
		if pool := nc.Labels[karpv1.NodePoolLabelKey]; w.pools[pool] {
			w.drifted[nc.Name] = pool
		}
	}
	for _, p := range pods {
		if d := p.Labels[DeploymentLabel]; p.DeletionTimestamp == nil && d != "" {
			w.startPods[d] = append(w.startPods[d], p.UID)
		}
	}
	return w.begun, nil
}

// list lists the pods, NodeClaims and Nodes the watch holds.
func (w *disruptionWatch) list(ctx context.Context) ([]corev1.Pod, []karpv1.NodeClaim, []corev1.Node, error) {
	pods := &corev1.PodList{}
	if err := w.cache.List(ctx, pods); err != nil {
		return nil, nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	claims := &karpv1.NodeClaimList{}
	if err := w.cache.List(ctx, claims); err != nil {
		return nil, nil, nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := w.cache.List(ctx, nodes); err != nil {
		return nil, nil, nil, fmt.Errorf("listing Nodes: %w", err)
	}
	return pods.Items, claims.Items, nodes.Items, nil
}

// unready says what the set-up still waits for: Deployments not running all their pods,
// pods pending, Services without a ready endpoint; "" when nothing.
func (w *disruptionWatch) unready(ctx context.Context, ds []disruptionDeployment) (string, error) {
	pods, _, _, err := w.list(ctx)
	if err != nil {
		return "", err
	}
	running := map[string]int{}
	pending := 0
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == corev1.PodRunning:
			running[p.Labels[DeploymentLabel]]++
		case p.Status.Phase == corev1.PodPending:
			pending++
		}
	}
	short := 0
	for _, d := range ds {
		if running[d.name] != d.from {
			short++
		}
	}
	w.mu.Lock()
	unready := 0
	for svc := range w.services {
		if !w.outages.ready[svc] {
			unready++
		}
	}
	w.mu.Unlock()
	if short == 0 && pending == 0 && unready == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d Deployments short of pods, %d pods pending, %d Services without a ready endpoint", short, pending, unready), nil
}

// waiting says what keeps the opted-in pool from having converged; "" when nothing.
func (w *disruptionWatch) waiting(ctx context.Context) (string, error) {
	pods, claims, nodes, err := w.list(ctx)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return disruptionWaiting(disruptionOptedInPool, w.drifted, pods, claims, nodes), nil
}

// outages accumulates, per Service, how long it had no ready endpoint since begin.
type outages struct {
	begun time.Time
	// ready is each Service's state as last observed, since when it has had none while
	// it has none, and total the time without before that.
	ready map[string]bool
	since map[string]time.Time
	total map[string]time.Duration
}

func newOutages() *outages {
	return &outages{ready: map[string]bool{}, since: map[string]time.Time{}, total: map[string]time.Duration{}}
}

// begin starts the count: time without a ready endpoint before at does not count.
func (o *outages) begin(at time.Time) { o.begun = at }

// observe records whether a Service has a ready endpoint at a moment.
func (o *outages) observe(svc string, ready bool, at time.Time) {
	was, seen := o.ready[svc]
	if seen && was == ready {
		return
	}
	o.ready[svc] = ready
	if !ready {
		o.since[svc] = at
		return
	}
	if seen {
		o.total[svc] += o.counted(o.since[svc], at)
	}
}

// without is how long the Service had no ready endpoint from begin to end. A Service never
// observed had none throughout.
func (o *outages) without(svc string, end time.Time) time.Duration {
	ready, seen := o.ready[svc]
	switch {
	case !seen:
		return o.counted(o.begun, end)
	case ready:
		return o.total[svc]
	}
	return o.total[svc] + o.counted(o.since[svc], end)
}

// counted is the part of [from, to) after begin; none before begin is called.
func (o *outages) counted(from, to time.Time) time.Duration {
	if o.begun.IsZero() {
		return 0
	}
	if from.Before(o.begun) {
		from = o.begun
	}
	return max(to.Sub(from), 0)
}
