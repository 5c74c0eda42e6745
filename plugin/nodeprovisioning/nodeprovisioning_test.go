package nodeprovisioning

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	clocktesting "k8s.io/utils/clock/testing"

	provisionerv1 "github.com/tailor-autoscaler/tailor/proto/tailor/provisioner/v1"
)

// fakeProvisioner records what the plugin hands over.
type fakeProvisioner struct {
	nominations map[types.UID]Nomination
	held        map[string]int
	submitted   []submitted
	forgotten   []types.UID
}

type submitted struct {
	Pod        string
	Rejections []*provisionerv1.Rejection
	Message    string
	Stale      *provisionerv1.Rejection
}

func (f *fakeProvisioner) Submit(pod *v1.Pod, rejections []*provisionerv1.Rejection, message string, stale *provisionerv1.Rejection) {
	f.submitted = append(f.submitted, submitted{Pod: pod.Name, Rejections: rejections, Message: message, Stale: stale})
}

func (f *fakeProvisioner) Nomination(uid types.UID) (Nomination, bool) {
	n, ok := f.nominations[uid]
	return n, ok
}

func (f *fakeProvisioner) Held(nodeName string) int { return f.held[nodeName] }

func (f *fakeProvisioner) Forget(uid types.UID) { f.forgotten = append(f.forgotten, uid) }

func TestPostFilter(t *testing.T) {
	pod := st.MakePod().Namespace("default").Name("web-0").UID("uid-0").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	system := st.MakeNode().Name("system-0").Taints([]v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectNoSchedule}}).Obj()
	small := st.MakeNode().Name("small-0").Obj()
	small1 := st.MakeNode().Name("small-1").Obj()
	planned := st.MakeNode().Name("ip-10-0-0-1.ec2.internal").Obj()
	plannedReady := st.MakeNode().Name("ip-10-0-0-1.ec2.internal").Label(initializedLabel, "true").Obj()
	taintStatus := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) had untolerated taint {CriticalAddonsOnly: true}").WithPlugin("TaintToleration")
	cpuStatus := fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit")
	spreadStatus := fwk.NewStatus(fwk.Unschedulable, "node(s) didn't match pod topology spread constraints").WithPlugin("PodTopologySpread")
	spreadLabelStatus := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't match pod topology spread constraints (missing required label)").WithPlugin("PodTopologySpread")
	affinityStatus := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't match pod affinity rules").WithPlugin("InterPodAffinity")
	antiAffinityStatus := fwk.NewStatus(fwk.Unschedulable, "node(s) didn't match pod anti-affinity rules").WithPlugin("InterPodAffinity")
	nomination := Nomination{NodeName: "ip-10-0-0-1.ec2.internal", NodeClaim: "general-abcde"}
	stale := func(status *fwk.Status) []submitted {
		rejection := &provisionerv1.Rejection{Plugin: status.Plugin(), Reason: status.Message(), Unresolvable: status.Code() == fwk.UnschedulableAndUnresolvable, NodeCount: 1, Nodes: []string{"ip-10-0-0-1.ec2.internal"}}
		return []submitted{{
			Pod:        "web-0",
			Rejections: []*provisionerv1.Rejection{rejection},
			Message:    fmt.Sprintf("0/1 nodes are available: 1 node(s): %s (%s)", status.Message(), status.Plugin()),
			Stale:      rejection,
		}}
	}

	tests := []struct {
		name          string
		nodes         []*v1.Node
		statuses      map[string]*fwk.Status
		nominations   map[types.UID]Nomination
		wantNominated string
		// wantCleared: the result clears the pod's nomination.
		wantCleared   bool
		wantStatus    *fwk.Status
		wantSubmitted []submitted
		wantForgotten []types.UID
	}{
		{
			name:       "a pod without a plan is handed to the provisioner with its filter results",
			nodes:      []*v1.Node{system, small, small1},
			statuses:   map[string]*fwk.Status{"system-0": taintStatus, "small-0": cpuStatus, "small-1": cpuStatus},
			wantStatus: fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: waiting for the provisioner to plan a node"),
			wantSubmitted: []submitted{{
				Pod: "web-0",
				Rejections: []*provisionerv1.Rejection{
					{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", NodeCount: 2, Nodes: []string{"small-0", "small-1"}},
					{Plugin: "TaintToleration", Reason: "node(s) had untolerated taint {CriticalAddonsOnly: true}", Unresolvable: true, NodeCount: 1, Nodes: []string{"system-0"}},
				},
				Message: "0/3 nodes are available: 2 node(s): Insufficient cpu (NodeResourcesFit); 1 node(s): node(s) had untolerated taint {CriticalAddonsOnly: true} (TaintToleration)",
			}},
		},
		{
			name:        "a pod planned onto a NodeClaim not launched yet waits without a nomination",
			nodes:       []*v1.Node{system},
			statuses:    map[string]*fwk.Status{"system-0": taintStatus},
			nominations: map[types.UID]Nomination{"uid-0": {NodeClaim: "general-abcde"}},
			wantStatus:  fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: waiting for NodeClaim general-abcde to launch"),
		},
		{
			name:          "a pod with a plan is nominated to the planned node before it exists",
			nodes:         []*v1.Node{system},
			statuses:      map[string]*fwk.Status{"system-0": taintStatus},
			nominations:   map[types.UID]Nomination{"uid-0": nomination},
			wantNominated: "ip-10-0-0-1.ec2.internal",
			wantStatus:    fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: waiting for node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde"),
		},
		{
			name:          "a planned node that is not initialized yet keeps the nomination",
			nodes:         []*v1.Node{system, planned},
			statuses:      map[string]*fwk.Status{"system-0": taintStatus, planned.Name: taintStatus},
			nominations:   map[types.UID]Nomination{"uid-0": nomination},
			wantNominated: "ip-10-0-0-1.ec2.internal",
			wantStatus:    fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: waiting for node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde"),
		},
		{
			name:        "an initialized planned node that rejects the pod makes the plan stale",
			nodes:       []*v1.Node{plannedReady},
			statuses:    map[string]*fwk.Status{plannedReady.Name: cpuStatus},
			nominations: map[types.UID]Nomination{"uid-0": nomination},
			wantStatus:  fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde cannot take the pod (NodeResourcesFit: Insufficient cpu); the provisioner backs off before planning it again"),
			wantSubmitted: []submitted{{
				Pod:        "web-0",
				Rejections: []*provisionerv1.Rejection{{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", NodeCount: 1, Nodes: []string{"ip-10-0-0-1.ec2.internal"}}},
				Message:    "0/1 nodes are available: 1 node(s): Insufficient cpu (NodeResourcesFit)",
				Stale:      &provisionerv1.Rejection{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", NodeCount: 1, Nodes: []string{"ip-10-0-0-1.ec2.internal"}},
			}},
			wantForgotten: []types.UID{"uid-0"},
		},
		{
			name:        "an initialized planned node whose topology spread waits for the other planned pods keeps the plan and clears the nomination, which the scheduler would count against it",
			nodes:       []*v1.Node{plannedReady},
			statuses:    map[string]*fwk.Status{plannedReady.Name: spreadStatus},
			nominations: map[types.UID]Nomination{"uid-0": nomination},
			wantCleared: true,
			wantStatus:  fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: waiting for node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde, which PodTopologySpread rejects until the pods planned with this one are bound"),
		},
		{
			name:        "an initialized planned node whose pod affinity waits for the other planned pods keeps the plan and clears the nomination, which the scheduler would count against it",
			nodes:       []*v1.Node{plannedReady},
			statuses:    map[string]*fwk.Status{plannedReady.Name: affinityStatus},
			nominations: map[types.UID]Nomination{"uid-0": nomination},
			wantCleared: true,
			wantStatus:  fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: waiting for node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde, which InterPodAffinity rejects until the pods planned with this one are bound"),
		},
		{
			name:          "an initialized planned node that pod anti-affinity rejects makes the plan stale",
			nodes:         []*v1.Node{plannedReady},
			statuses:      map[string]*fwk.Status{plannedReady.Name: antiAffinityStatus},
			nominations:   map[types.UID]Nomination{"uid-0": nomination},
			wantStatus:    fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde cannot take the pod (InterPodAffinity: node(s) didn't match pod anti-affinity rules); the provisioner backs off before planning it again"),
			wantSubmitted: stale(antiAffinityStatus),
			wantForgotten: []types.UID{"uid-0"},
		},
		{
			name:          "an initialized planned node without a spread constraint's topology label makes the plan stale",
			nodes:         []*v1.Node{plannedReady},
			statuses:      map[string]*fwk.Status{plannedReady.Name: spreadLabelStatus},
			nominations:   map[types.UID]Nomination{"uid-0": nomination},
			wantStatus:    fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde cannot take the pod (PodTopologySpread: node(s) didn't match pod topology spread constraints (missing required label)); the provisioner backs off before planning it again"),
			wantSubmitted: stale(spreadLabelStatus),
			wantForgotten: []types.UID{"uid-0"},
		},
		{
			name:          "a planned node not initialized yet that topology spread rejects keeps the nomination",
			nodes:         []*v1.Node{planned},
			statuses:      map[string]*fwk.Status{planned.Name: spreadStatus},
			nominations:   map[types.UID]Nomination{"uid-0": nomination},
			wantNominated: "ip-10-0-0-1.ec2.internal",
			wantStatus:    fwk.NewStatus(fwk.Unschedulable, "NodeProvisioning: waiting for node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			prov := &fakeProvisioner{nominations: tt.nominations}
			pl := &NodeProvisioning{
				handle: newFramework(ctx, t, tt.nodes), provisioner: prov,
				clock: clocktesting.NewFakeClock(time.Now()), activatePods: func([]types.UID) {},
			}
			statuses := framework.NewDefaultNodeToStatus()
			for name, s := range tt.statuses {
				statuses.Set(name, s)
			}

			result, status := pl.PostFilter(ctx, nil, pod, statuses)

			if diff := cmp.Diff(tt.wantStatus.Code(), status.Code()); diff != "" {
				t.Errorf("status code (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStatus.Message(), status.Message()); diff != "" {
				t.Errorf("status message (-want +got):\n%s", diff)
			}
			var nominated string
			nominating := result != nil && result.NominatingInfo != nil
			if cleared := nominating && result.NominatedNodeName == ""; cleared != tt.wantCleared {
				t.Errorf("nomination cleared = %v, want %v", cleared, tt.wantCleared)
			}
			if nominating {
				nominated = result.NominatedNodeName
				if result.NominatingMode != fwk.ModeOverride {
					t.Errorf("nominating mode = %v, want ModeOverride", result.NominatingMode)
				}
			}
			if nominated != tt.wantNominated {
				t.Errorf("nominated node = %q, want %q", nominated, tt.wantNominated)
			}
			if diff := cmp.Diff(tt.wantSubmitted, prov.submitted, protocmp.Transform()); diff != "" {
				t.Errorf("submitted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantForgotten, prov.forgotten); diff != "" {
				t.Errorf("forgotten (-want +got):\n%s", diff)
			}
		})
	}
}

// newFramework is a scheduler framework whose snapshot holds the nodes.
func newFramework(ctx context.Context, t *testing.T, nodes []*v1.Node) fwk.Handle {
	t.Helper()
	cs := clientsetfake.NewClientset()
	fh, err := tf.NewFramework(ctx,
		[]tf.RegisterPluginFunc{
			tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
			tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		},
		"tailor-scheduler",
		frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(nil, nodes)),
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(cs, 0)),
	)
	if err != nil {
		t.Fatal(err)
	}
	return fh
}

// TestAWaitForThePlanThatCannotEndIsPlannedAgain: a planned node whose topology spread keeps
// rejecting the pod past planWaitLimit (the scheduler counts a domain the plan did not) makes
// the plan stale: the plugin activates the pod once the limit has passed, and the pod is
// planned again, so it is not stuck.
func TestAWaitForThePlanThatCannotEndIsPlannedAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plannedReady := st.MakeNode().Name("ip-10-0-0-1.ec2.internal").Label(initializedLabel, "true").Obj()
	nomination := Nomination{NodeName: plannedReady.Name, NodeClaim: "general-abcde"}
	prov := &fakeProvisioner{nominations: map[types.UID]Nomination{"uid-0": nomination}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	var activated []types.UID
	pl := &NodeProvisioning{
		handle: newFramework(ctx, t, []*v1.Node{plannedReady}), provisioner: prov, clock: clk,
		activatePods: func(uids []types.UID) { activated = append(activated, uids...) },
	}
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set(plannedReady.Name, fwk.NewStatus(fwk.Unschedulable, "node(s) didn't match pod topology spread constraints").WithPlugin("PodTopologySpread"))
	pod := st.MakePod().Namespace("default").Name("web-0").UID("uid-0").Obj()

	for _, elapsed := range []time.Duration{0, planWaitLimit} {
		clk.Step(elapsed)
		if _, status := pl.PostFilter(ctx, nil, pod, statuses); !strings.Contains(status.Message(), "rejects until the pods planned with this one are bound") {
			t.Fatalf("after %s: %q, want the pod to wait for the pods planned with it", elapsed, status.Message())
		}
	}
	if len(prov.submitted) != 0 || len(activated) != 0 {
		t.Fatalf("submitted %d times and activated %v while the wait was within %s", len(prov.submitted), activated, planWaitLimit)
	}
	clk.Step(time.Second)
	if diff := cmp.Diff([]types.UID{"uid-0"}, activated); diff != "" {
		t.Fatalf("activated once the limit passed (-want +got):\n%s", diff)
	}
	_, status := pl.PostFilter(ctx, nil, pod, statuses)
	if diff := cmp.Diff("NodeProvisioning: node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde cannot take the pod (PodTopologySpread: node(s) didn't match pod topology spread constraints); the provisioner backs off before planning it again", status.Message()); diff != "" {
		t.Errorf("past the limit (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.UID{"uid-0"}, prov.forgotten); diff != "" {
		t.Errorf("forgotten (-want +got):\n%s", diff)
	}
	if len(prov.submitted) != 1 || prov.submitted[0].Stale.GetNodes()[0] != plannedReady.Name {
		t.Errorf("submitted %+v, want the pod once with its planned node stale", prov.submitted)
	}
}

// TestWaitingPods: a pod waits for a node while the scheduler's informer holds it unbound
// and not terminating.
func TestWaitingPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pl := &NodeProvisioning{handle: newFramework(ctx, t, nil), provisioner: &fakeProvisioner{}}
	if !pl.waiting("uid-0") {
		t.Error("waiting before the pods are indexed by UID = false, want true")
	}
	if err := pl.forgetBoundPods(); err != nil {
		t.Fatal(err)
	}
	store := pl.handle.SharedInformerFactory().Core().V1().Pods().Informer().GetIndexer()
	pending := st.MakePod().Namespace("default").Name("pending").UID("uid-pending").Obj()
	bound := st.MakePod().Namespace("default").Name("bound").UID("uid-bound").Node("node-a").Obj()
	terminating := st.MakePod().Namespace("default").Name("terminating").UID("uid-terminating").Terminating().Obj()
	for _, p := range []*v1.Pod{pending, bound, terminating} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got := map[types.UID]bool{}
	for _, uid := range []types.UID{"uid-pending", "uid-bound", "uid-terminating", "uid-gone"} {
		got[uid] = pl.waiting(uid)
	}
	want := map[types.UID]bool{"uid-pending": true, "uid-bound": false, "uid-terminating": false, "uid-gone": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
}

// TestAPodBoundWhileWaitingIsNotActivated: the timer of a wait that ended (the pod was
// bound) activates nothing.
func TestAPodBoundWhileWaitingIsNotActivated(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	var activated []types.UID
	pl := &NodeProvisioning{clock: clk, activatePods: func(uids []types.UID) { activated = append(activated, uids...) }}
	if pl.waitedTooLong("uid-0") {
		t.Fatal("a wait that just began is too long")
	}
	pl.stopWaiting("uid-0")
	clk.Step(planWaitLimit + time.Second)
	if len(activated) != 0 {
		t.Errorf("activated %v after the wait ended", activated)
	}
}

// TestAPlannedPodTurnedBackAfterReserveIsQueuedAgain: each time a planned pod is turned back
// after Reserve (Coscheduling sends a gang back from Permit), it is activated a second later,
// then after twice as long each next time up to turnedBackMax; once bound it starts afresh.
// A pod without a plan is left to the scheduler.
func TestAPlannedPodTurnedBackAfterReserveIsQueuedAgain(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	var activated []types.UID
	prov := &fakeProvisioner{nominations: map[types.UID]Nomination{"uid-0": {NodeClaim: "gpu-abcde", NodeName: "ip-10-0-0-4.ec2.internal"}}}
	pl := &NodeProvisioning{clock: clk, provisioner: prov, activatePods: func(uids []types.UID) { activated = append(activated, uids...) }}
	planned := st.MakePod().Namespace("default").Name("train-0").UID("uid-0").Obj()
	unplanned := st.MakePod().Namespace("default").Name("web-0").UID("uid-1").Obj()
	ctx := context.Background()

	// waits turns the pod back and reports how long it took to be activated, to the second.
	waits := func(pod *v1.Pod) time.Duration {
		pl.Unreserve(ctx, nil, pod, "ip-10-0-0-4.ec2.internal")
		activated = nil
		for waited := time.Duration(0); waited <= time.Minute; waited += time.Second {
			if len(activated) > 0 {
				if diff := cmp.Diff([]types.UID{pod.UID}, activated); diff != "" {
					t.Fatalf("activated (-want +got):\n%s", diff)
				}
				return waited
			}
			clk.Step(time.Second)
		}
		return -1
	}
	var got []time.Duration
	for range 7 {
		got = append(got, waits(planned))
	}
	pl.stopWaiting(planned.UID)
	got = append(got, waits(planned), waits(unplanned))
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, time.Second, -1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits before activation (-want +got; -1ns: never):\n%s", diff)
	}
}

func TestFilter(t *testing.T) {
	pod := st.MakePod().Namespace("default").Name("web-0").UID("uid-0").Obj()
	planned := st.MakeNode().Name("ip-10-0-0-1.ec2.internal").Obj()
	other := st.MakeNode().Name("ip-10-0-0-2.ec2.internal").Obj()

	tests := []struct {
		name        string
		nominations map[types.UID]Nomination
		held        map[string]int
		node        *v1.Node
		want        *fwk.Status
	}{
		{
			name: "a pod without a plan may go to a node held for no one",
			held: map[string]int{planned.Name: 2},
			node: other,
		},
		{
			name: "a pod without a plan is kept off a node held for pods planned onto it",
			held: map[string]int{planned.Name: 2},
			node: planned,
			want: fwk.NewStatus(fwk.Unschedulable, "node is held for 2 pod(s) planned onto it until they are bound"),
		},
		{
			name:        "a pod planned onto a node passes it while it is held for the pods planned with it",
			nominations: map[types.UID]Nomination{"uid-0": {NodeName: planned.Name, NodeClaim: "general-abcde"}},
			held:        map[string]int{planned.Name: 2},
			node:        planned,
		},
		{
			name:        "a pod planned onto a launched NodeClaim passes its node",
			nominations: map[types.UID]Nomination{"uid-0": {NodeName: planned.Name, NodeClaim: "general-abcde"}},
			node:        planned,
		},
		{
			name:        "a pod planned onto a launched NodeClaim is kept off other nodes",
			nominations: map[types.UID]Nomination{"uid-0": {NodeName: planned.Name, NodeClaim: "general-abcde"}},
			node:        other,
			want:        fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "pod is planned for node ip-10-0-0-1.ec2.internal of NodeClaim general-abcde"),
		},
		{
			name:        "a pod planned onto a NodeClaim not launched yet is kept off every node",
			nominations: map[types.UID]Nomination{"uid-0": {NodeClaim: "general-abcde"}},
			node:        planned,
			want:        fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "pod is planned for NodeClaim general-abcde, not launched yet"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &NodeProvisioning{provisioner: &fakeProvisioner{nominations: tt.nominations, held: tt.held}}
			info := framework.NewNodeInfo()
			info.SetNode(tt.node)

			got := pl.Filter(context.Background(), nil, pod, info)

			if diff := cmp.Diff(tt.want.Code(), got.Code()); diff != "" {
				t.Errorf("status code (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.Message(), got.Message()); diff != "" {
				t.Errorf("status message (-want +got):\n%s", diff)
			}
		})
	}
}
