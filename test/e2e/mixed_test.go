package e2e

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// The mixed workloads (testdata/mixed-workloads.yaml): their pods' label, how many there
// are, and the app label of each workload checked.
const (
	mixedSelector = "workload=mixed"
	mixedPods     = 32
	spreadApp     = "spread"
	uniqueApp     = "unique"
	armApp        = "arm"
	gpuApp        = "gpu"
	resourceGPU   = corev1.ResourceName("nvidia.com/gpu")
)

// How long the test waits for the pods to land, how long an unchanging state of bound pods
// must last to count as final, and how often it looks.
const (
	mixedDeadline  = 3 * time.Minute
	mixedSettled   = 30 * time.Second
	mixedPollEvery = 2 * time.Second
)

// TestMixedWorkloadsLandAsPlanned runs workloads with the constraints users combine on one
// cluster (zonal spread, anti-affinity, arm64 only, a GPU, a spot preference) next to
// DaemonSets, across a general and a tainted GPU NodePool, and checks that every pod is bound
// to exactly the node of the NodeClaim planned for it, that the DaemonSets run on every node
// Tailor launched, and that each workload's constraint holds.
func TestMixedWorkloadsLandAsPlanned(t *testing.T) {
	e := startStack(t)
	e.apply(t, "mixed-nodepools.yaml")
	e.waitNodeClassReady(t, "default")
	e.apply(t, "mixed-daemonsets.yaml")
	// The log collector tolerates the system node's taint: once it runs there, the default
	// scheduler and the DaemonSet controller are at work.
	e.waitDaemonSetReady(t, "log-collector")
	e.apply(t, "mixed-workloads.yaml")

	var (
		last      *mixedState
		found     findings
		lastText  string
		readErr   error
		start     = time.Now()
		changedAt = start
	)
	err := wait.PollUntilContextTimeout(e.ctx, mixedPollEvery, mixedDeadline, true, func(ctx context.Context) (bool, error) {
		s, err := e.mixedState(ctx)
		if err != nil {
			// Reading can fail near the deadline; the last state read is what gets judged.
			readErr = err
			return false, nil
		}
		last, found = s, s.check()
		if text := found.String(); text != lastText {
			lastText, changedAt = text, time.Now()
		}
		// Done when everything holds, or when every pod is bound and nothing changed for a
		// while: a bound pod does not move, so waiting longer cannot help.
		return found.empty() || (s.allBound() && time.Since(changedAt) > mixedSettled), nil
	})
	if last == nil {
		t.Fatalf("reading the cluster: %v", cmp.Or(readErr, err))
	}
	t.Logf("after %s: %s", time.Since(start).Round(time.Second), last.summary())
	if err != nil {
		t.Logf("stopped waiting at the %s deadline", mixedDeadline)
	}
	if len(found.offPlan) > 0 {
		t.Errorf("%d/%d pods are not bound to the node of the NodeClaim planned for them:\n%s",
			len(found.offPlan), len(last.pods), strings.Join(e.explain(last, found.offPlan), "\n"))
	}
	for _, f := range []struct {
		what string
		list []string
	}{
		{"pods of the mixed workloads", found.count},
		{"DaemonSet pods that do not run on nodes Tailor launched", found.daemons},
		{"zonal spread of app=spread", found.spread},
		{"anti-affinity of app=unique", found.antiAffinity},
		{"arm64 pods of app=arm", found.arch},
		{"GPU pod of app=gpu", found.gpu},
	} {
		if len(f.list) > 0 {
			t.Errorf("%s:\n  %s", f.what, strings.Join(f.list, "\n  "))
		}
	}
}

func (e *env) apply(t *testing.T, file string) {
	t.Helper()
	applier, err := localstack.NewApplier(e.stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applier.ApplyFiles(e.ctx, filepath.Join(testenv.Root(), "test", "e2e", "testdata", file)); err != nil {
		t.Fatal(err)
	}
}

func (e *env) waitNodeClassReady(t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		class := &awsv1.EC2NodeClass{}
		if err := e.kube.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady), nil
	})
	if err != nil {
		t.Fatalf("EC2NodeClass %s not Ready: %v", name, err)
	}
}

func (e *env) waitDaemonSetReady(t *testing.T, name string) {
	t.Helper()
	var ds *appsv1.DaemonSet
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := e.cs.AppsV1().DaemonSets(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ds = got
		return got.Status.DesiredNumberScheduled > 0 && got.Status.NumberReady == got.Status.DesiredNumberScheduled, nil
	})
	if err != nil {
		t.Fatalf("DaemonSet %s not ready on the system node (status %+v): %v", name, ds.Status, err)
	}
}

// plan is a NodeClaim a pod was planned onto.
type plan struct {
	nodeClaim string
	node      string
}

// mixedState is what the checks read.
type mixedState struct {
	pods       []corev1.Pod
	daemons    []corev1.Pod
	daemonSets []appsv1.DaemonSet
	nodes      map[string]*corev1.Node
	claims     []karpv1.NodeClaim
	plans      map[types.UID][]plan
}

func (e *env) mixedState(ctx context.Context) (*mixedState, error) {
	s := &mixedState{nodes: map[string]*corev1.Node{}, plans: map[types.UID][]plan{}}
	pods, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: mixedSelector})
	if err != nil {
		return nil, err
	}
	s.pods = pods.Items
	daemons, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "daemon"})
	if err != nil {
		return nil, err
	}
	s.daemons = daemons.Items
	daemonSets, err := e.cs.AppsV1().DaemonSets(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.daemonSets = daemonSets.Items
	nodes, err := e.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		s.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	claims := &karpv1.NodeClaimList{}
	if err := e.kube.List(ctx, claims); err != nil {
		return nil, err
	}
	s.claims = claims.Items
	for _, nc := range claims.Items {
		planned, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
		if err != nil {
			return nil, err
		}
		for _, p := range planned {
			s.plans[p.UID] = append(s.plans[p.UID], plan{nodeClaim: nc.Name, node: nc.Status.NodeName})
		}
	}
	return s, nil
}

func (s *mixedState) allBound() bool {
	for _, p := range s.pods {
		if p.Spec.NodeName == "" {
			return false
		}
	}
	return len(s.pods) == mixedPods
}

// findings are the violations, one line each.
type findings struct {
	count        []string
	offPlan      []string // pod names
	daemons      []string
	spread       []string
	antiAffinity []string
	arch         []string
	gpu          []string
}

func (f findings) empty() bool {
	return len(f.count)+len(f.offPlan)+len(f.daemons)+len(f.spread)+len(f.antiAffinity)+len(f.arch)+len(f.gpu) == 0
}

func (f findings) String() string {
	return fmt.Sprint(f.count, f.offPlan, f.daemons, f.spread, f.antiAffinity, f.arch, f.gpu)
}

func (s *mixedState) check() findings {
	var f findings
	// Until the Deployments have created every pod, nothing is settled.
	if len(s.pods) != mixedPods {
		f.count = append(f.count, fmt.Sprintf("%d pods exist, want %d", len(s.pods), mixedPods))
	}
	for _, p := range s.pods {
		plans := s.plans[p.UID]
		if len(plans) != 1 || p.Spec.NodeName == "" || p.Spec.NodeName != plans[0].node {
			f.offPlan = append(f.offPlan, p.Name)
		}
	}
	f.daemons = s.checkDaemons()
	f.spread = s.checkSpread()
	f.antiAffinity = s.checkAntiAffinity()
	for _, p := range s.app(armApp) {
		if n := s.nodes[p.Spec.NodeName]; n != nil && n.Labels[corev1.LabelArchStable] != "arm64" {
			f.arch = append(f.arch, fmt.Sprintf("%s runs on %s, a %s node", p.Name, n.Name, n.Labels[corev1.LabelArchStable]))
		}
	}
	for _, p := range s.app(gpuApp) {
		n := s.nodes[p.Spec.NodeName]
		if n == nil {
			continue
		}
		if q := n.Status.Allocatable[resourceGPU]; q.Value() < 1 || n.Labels[karpv1.NodePoolLabelKey] != gpuApp {
			f.gpu = append(f.gpu, fmt.Sprintf("%s runs on %s (NodePool %q, %s allocatable %s), want a node of NodePool gpu with a GPU",
				p.Name, n.Name, n.Labels[karpv1.NodePoolLabelKey], resourceGPU, q.String()))
		}
	}
	sort.Strings(f.offPlan)
	return f
}

func (s *mixedState) app(name string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range s.pods {
		if p.Labels["app"] == name {
			out = append(out, p)
		}
	}
	return out
}

// launchedNodes are the nodes of Tailor's NodeClaims, with their NodeClaims.
func (s *mixedState) launchedNodes() map[string]*karpv1.NodeClaim {
	out := map[string]*karpv1.NodeClaim{}
	for i := range s.claims {
		if name := s.claims[i].Status.NodeName; name != "" && s.nodes[name] != nil {
			out[name] = &s.claims[i]
		}
	}
	return out
}

// checkDaemons reports DaemonSet pods that are not Running on nodes Tailor launched, and
// such nodes missing a pod of a DaemonSet that tolerates their NodeClaim's taints.
func (s *mixedState) checkDaemons() []string {
	launched := s.launchedNodes()
	running := map[string]bool{}
	var out []string
	for _, p := range s.daemons {
		node := daemonPodNode(&p)
		if launched[node] == nil {
			continue
		}
		ds := p.Labels["daemon"]
		running[ds+"/"+node] = true
		if p.Status.Phase != corev1.PodRunning {
			out = append(out, fmt.Sprintf("%s of DaemonSet %s is %s for node %s: %s", p.Name, ds, p.Status.Phase, node, scheduledMessage(&p)))
		}
	}
	for node, nc := range launched {
		for _, ds := range s.daemonSets {
			_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), nc.Spec.Taints, ds.Spec.Template.Spec.Tolerations, func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, packing.TaintComparisonOperators)
			if !untolerated && !running[ds.Name+"/"+node] {
				out = append(out, fmt.Sprintf("node %s (NodeClaim %s) has no pod of DaemonSet %s", node, nc.Name, ds.Name))
			}
		}
	}
	sort.Strings(out)
	return out
}

// daemonPodNode is the node a DaemonSet pod is for: where it is bound, or the node its
// required node affinity names.
func daemonPodNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return "no PodScheduled condition"
}

// checkSpread computes the skew of app=spread across the zones of the nodes its pods may
// run on, as PodTopologySpread does: every node (the pods select none, and taints do not
// exclude a node from the domains by default).
func (s *mixedState) checkSpread() []string {
	counts := map[string]int{}
	for _, n := range s.nodes {
		if z, ok := n.Labels[corev1.LabelTopologyZone]; ok {
			counts[z] += 0
		}
	}
	pending := 0
	for _, p := range s.app(spreadApp) {
		n := s.nodes[p.Spec.NodeName]
		if n == nil {
			pending++
			continue
		}
		counts[n.Labels[corev1.LabelTopologyZone]]++
	}
	if len(counts) == 0 {
		return []string{"no zone has a node"}
	}
	zones := make([]string, 0, len(counts))
	low, high := -1, 0
	for z, c := range counts {
		zones = append(zones, fmt.Sprintf("%s=%d", z, c))
		if low < 0 || c < low {
			low = c
		}
		high = max(high, c)
	}
	sort.Strings(zones)
	if high-low <= 1 && pending == 0 {
		return nil
	}
	return []string{fmt.Sprintf("skew %d (max 1), %d pods not bound; pods per zone: %s", high-low, pending, strings.Join(zones, ", "))}
}

func (s *mixedState) checkAntiAffinity() []string {
	byNode := map[string][]string{}
	for _, p := range s.app(uniqueApp) {
		if p.Spec.NodeName != "" {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
		}
	}
	var out []string
	for node, pods := range byNode {
		if len(pods) > 1 {
			sort.Strings(pods)
			out = append(out, fmt.Sprintf("node %s runs %d of them: %s", node, len(pods), strings.Join(pods, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

// explain says, for each pod off its plan, where it is, where it was planned, its
// nomination and the latest distinct events about it.
func (e *env) explain(s *mixedState, names []string) []string {
	byName := map[string]*corev1.Pod{}
	for i := range s.pods {
		byName[s.pods[i].Name] = &s.pods[i]
	}
	out := make([]string, 0, len(names))
	for _, name := range names {
		p := byName[name]
		where := "not bound"
		if p.Spec.NodeName != "" {
			where = "bound to " + p.Spec.NodeName
		}
		var plans []string
		for _, pl := range s.plans[p.UID] {
			plans = append(plans, fmt.Sprintf("NodeClaim %s (node %q)", pl.nodeClaim, pl.node))
		}
		planned := "planned onto no NodeClaim"
		if len(plans) > 0 {
			planned = "planned onto " + strings.Join(plans, " and ")
		}
		out = append(out, fmt.Sprintf("  %s: %s, %s, status.nominatedNodeName %q; events:%s", p.Name, where, planned, p.Status.NominatedNodeName, e.events(p)))
	}
	return out
}

// events renders the latest distinct events of a pod, oldest first, one per line.
func (e *env) events(p *corev1.Pod) string {
	list, err := e.cs.CoreV1().Events(p.Namespace).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.uid": string(p.UID)}.String(),
	})
	if err != nil {
		return " (listing events: " + err.Error() + ")"
	}
	sort.Slice(list.Items, func(i, j int) bool { return eventTime(&list.Items[i]).Before(eventTime(&list.Items[j])) })
	const keep = 2
	seen := map[string]bool{}
	var lines []string
	for i := len(list.Items) - 1; i >= 0 && len(lines) < keep; i-- {
		ev := list.Items[i]
		line := fmt.Sprintf("%s %s (%s, x%d): %s", ev.Type, ev.Reason, sourceOf(&ev), max(ev.Count, 1), ev.Message)
		if key := ev.Reason + ev.Message; !seen[key] {
			seen[key] = true
			lines = append([]string{line}, lines...)
		}
	}
	if len(lines) == 0 {
		return " none"
	}
	return "\n      " + strings.Join(lines, "\n      ")
}

func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

func sourceOf(ev *corev1.Event) string {
	if ev.ReportingController != "" {
		return ev.ReportingController
	}
	return ev.Source.Component
}

// summary renders the nodes Tailor launched and what runs on them: the workloads' pods by
// app, and the DaemonSet pods for the node with their phase.
func (s *mixedState) summary() string {
	launched := s.launchedNodes()
	pods := map[string][]string{}
	requested := map[string]*resource.Quantity{}
	addCPU := func(node string, p *corev1.Pod) {
		if requested[node] == nil {
			requested[node] = resource.NewMilliQuantity(0, resource.DecimalSI)
		}
		requested[node].Add(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[corev1.ResourceCPU])
	}
	for _, p := range s.pods {
		if p.Spec.NodeName != "" {
			pods[p.Spec.NodeName] = append(pods[p.Spec.NodeName], p.Labels["app"])
			addCPU(p.Spec.NodeName, &p)
		}
	}
	daemons := map[string][]string{}
	for _, p := range s.daemons {
		node := daemonPodNode(&p)
		daemons[node] = append(daemons[node], p.Labels["daemon"]+"="+string(p.Status.Phase))
		if p.Spec.NodeName != "" {
			addCPU(p.Spec.NodeName, &p)
		}
	}
	var lines []string
	for node, nc := range launched {
		n := s.nodes[node]
		apps, ds := pods[node], daemons[node]
		sort.Strings(apps)
		sort.Strings(ds)
		cpu := "0"
		if q := requested[node]; q != nil {
			cpu = q.String()
		}
		lines = append(lines, fmt.Sprintf("  %s  NodeClaim %s  %s  %s  %s  %s  %s  cpu %s/%s  pods: %s  daemons: %s", node, nc.Name,
			n.Labels[karpv1.NodePoolLabelKey], n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelArchStable],
			n.Labels[corev1.LabelTopologyZone], n.Labels[karpv1.CapacityTypeLabelKey], cpu, n.Status.Allocatable.Cpu(),
			strings.Join(apps, ","), strings.Join(ds, ",")))
	}
	sort.Strings(lines)
	bound := 0
	for _, p := range s.pods {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return fmt.Sprintf("%d NodeClaims, %d/%d pods bound\n%s", len(s.claims), bound, len(s.pods), strings.Join(lines, "\n"))
}
