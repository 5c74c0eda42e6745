package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
)

// limitedFixture is a fixture whose provisioner's launch limit runs on a fake clock.
func limitedFixture(t *testing.T, perPod, perGroup int) (*fixture, *clocktesting.FakeClock) {
	t.Helper()
	f := newFixture(t, selling(instanceType("g.xlarge", 4, 16, 0.4)), pool("gpu"))
	clk := clocktesting.NewFakeClock(time.Now())
	launches, err := launchlimit.New(launchlimit.Options{Clock: clk, PerPod: perPod, PerGroup: perGroup, Backoff: 30 * time.Second, MaxBackoff: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.prov.clock, f.prov.launches = clk, launches
	return f, clk
}

// provision runs a batch and returns the names of the NodeClaims it created.
func (f *fixture) provision(t *testing.T, before []karpv1.NodeClaim) []string {
	t.Helper()
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, nc := range before {
		seen[nc.Name] = true
	}
	var created []string
	for _, nc := range f.claims(t) {
		if !seen[nc.Name] {
			created = append(created, nc.Name)
		}
	}
	return created
}

// reject plays the plugin when the pod's planned node registered and the scheduler
// rejected the pod there: the node gets a name and the pod is handed over again with it.
func (f *fixture) reject(t *testing.T, pod *corev1.Pod) (nodeClaim, node string) {
	t.Helper()
	plan, ok := f.tracker.Get(pod.UID)
	if !ok {
		t.Fatalf("pod %s has no plan to reject", pod.Name)
	}
	node = "node-of-" + plan.NodeClaim
	f.tracker.SetNode(plan.NodeClaim, node)
	f.prov.Submit([]Submission{{Pod: pod, StaleNode: node, StaleRejection: StaleRejection{Plugin: "DynamicResources", Reason: "cannot allocate all claims"}}})
	return plan.NodeClaim, node
}

// condition is the pod's launch-limit condition as the API server has it.
func (f *fixture) condition(t *testing.T, pod *corev1.Pod) *corev1.PodCondition {
	t.Helper()
	live := &corev1.Pod{}
	if err := f.kube.Get(context.Background(), client.ObjectKeyFromObject(pod), live); err != nil {
		t.Fatal(err)
	}
	return heldCondition(live)
}

func wantCondition(t *testing.T, got *corev1.PodCondition, status corev1.ConditionStatus, reason, message string) {
	t.Helper()
	if got == nil {
		t.Fatalf("no %s condition, want %s %s", launchlimit.PodCondition, status, reason)
	}
	if got.Status != status || got.Reason != reason || !strings.HasPrefix(got.Message, message) {
		t.Errorf("condition %s=%s reason %s message %q, want %s reason %s message starting %q", got.Type, got.Status, got.Reason, got.Message, status, reason, message)
	}
}

// TestRejectedLaunchesBackOffThenStop: a pod its planned node rejects is planned again
// after 30 s, then 60 s, and after its third rejected launch no more, until its NodePool
// changes; the pod and the NodeClaim say why at each step.
func TestRejectedLaunchesBackOffThenStop(t *testing.T) {
	f, clk := limitedFixture(t, 3, 6)
	pod := f.pod(t, "gpu", "1")
	f.prov.Submit([]Submission{{Pod: pod}})
	if got := f.provision(t, nil); len(got) != 1 {
		t.Fatalf("first batch created %d NodeClaims, want 1", len(got))
	}

	claim, node := f.reject(t, pod)
	before := f.claims(t)
	if got := f.provision(t, before); len(got) != 0 {
		t.Fatalf("the batch right after the rejection created %v, want nothing while the pod backs off", got)
	}
	until := clk.Now().Add(30 * time.Second).UTC().Format(time.RFC3339)
	want := fmt.Sprintf("Warning PlannedCapacityRejected planned capacity did not fit: DynamicResources: cannot allocate all claims (node %s of NodeClaim %s); 1 of 3 launches rejected; planning again after %s", node, claim, until)
	if events := f.events(); !slices.Contains(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
	wantCondition(t, f.condition(t, pod), corev1.ConditionTrue, ReasonBackingOff, "planned capacity did not fit: DynamicResources: cannot allocate all claims")
	nc := &karpv1.NodeClaim{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: claim}, nc); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(nc.Status.Conditions, ConditionPlannedPodsRejected)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "DynamicResources" || c.Message != fmt.Sprintf("pod %s/gpu: DynamicResources: cannot allocate all claims", f.ns) {
		t.Errorf("NodeClaim condition %s = %+v, want True, reason DynamicResources, naming the pod and the reason", ConditionPlannedPodsRejected, c)
	}

	clk.Step(29 * time.Second)
	if got := f.provision(t, before); len(got) != 0 {
		t.Fatalf("a batch 29 s after the rejection created %v, want nothing", got)
	}
	clk.Step(time.Second)
	if got := f.provision(t, before); len(got) != 1 {
		t.Fatalf("a batch 30 s after the rejection created %d NodeClaims, want 1", len(got))
	}
	wantCondition(t, f.condition(t, pod), corev1.ConditionFalse, ReasonPlanningAgain, "its backoff passed")

	f.reject(t, pod)
	before = f.claims(t)
	clk.Step(59 * time.Second)
	if got := f.provision(t, before); len(got) != 0 {
		t.Fatalf("a batch 59 s after the second rejection created %v, want nothing", got)
	}
	clk.Step(time.Second)
	if got := f.provision(t, before); len(got) != 1 {
		t.Fatalf("a batch 60 s after the second rejection created %d NodeClaims, want 1", len(got))
	}

	f.reject(t, pod)
	f.events()
	before = f.claims(t)
	for range 3 {
		clk.Step(time.Hour)
		f.prov.Submit([]Submission{{Pod: pod}})
		if got := f.provision(t, before); len(got) != 0 {
			t.Fatalf("past the limit a batch created %v, want nothing", got)
		}
	}
	wantCondition(t, f.condition(t, pod), corev1.ConditionTrue, ReasonLaunchLimitReached,
		"planned capacity did not fit: DynamicResources: cannot allocate all claims")
	if c := f.condition(t, pod); !strings.Contains(c.Message, "3 of 3 launches rejected (--launch-limit-per-pod): nothing more is launched for this pod until it, its NodePools or its claims change") {
		t.Errorf("condition message %q does not say the limit and what lifts it", c.Message)
	}
	if got := countReason(f.events(), ReasonLaunchLimitReached); got != 1 {
		t.Errorf("%d LaunchLimitReached events, want 1", got)
	}

	np := &karpv1.NodePool{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "gpu"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}})
	if err := f.kube.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	if got := f.provision(t, before); len(got) != 1 {
		t.Fatalf("after its NodePool changed, a batch created %d NodeClaims, want 1", len(got))
	}
	wantCondition(t, f.condition(t, pod), corev1.ConditionFalse, ReasonLaunchLimitLifted, "the pod, its NodePools or its claims changed")
}

// TestAGroupSharesItsLaunches: pods of one controller count their rejected launches
// together, so a new pod of a group at its limit gets nothing; one of them landing on
// capacity planned for it frees the group.
func TestAGroupSharesItsLaunches(t *testing.T) {
	f, clk := limitedFixture(t, 3, 2)
	owned := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "trainer-5d8f", UID: types.UID("rs-uid"), Controller: ptr.To(true)}}
	}
	a, b := f.pod(t, "trainer-a", "3", owned), f.pod(t, "trainer-b", "3", owned)
	f.prov.Submit([]Submission{{Pod: a}, {Pod: b}})
	if got := f.provision(t, nil); len(got) != 2 {
		t.Fatalf("first batch created %d NodeClaims, want one each", len(got))
	}
	f.reject(t, a)
	f.reject(t, b)
	before := f.claims(t)
	clk.Step(time.Hour)
	c := f.pod(t, "trainer-c", "3", owned)
	f.prov.Submit([]Submission{{Pod: c}})
	if got := f.provision(t, before); len(got) != 0 {
		t.Fatalf("a group at its limit got %v, want nothing", got)
	}
	wantCondition(t, f.condition(t, c), corev1.ConditionTrue, ReasonLaunchLimitReached, "planned capacity did not fit: DynamicResources: cannot allocate all claims")
	if got := f.condition(t, c).Message; !strings.Contains(got, "2 of 2 launches for pods like this one (ReplicaSet "+f.ns+"/trainer-5d8f) rejected (--launch-limit-per-group)") {
		t.Errorf("the new pod's condition %q does not name its group's limit", got)
	}

	pools, err := f.prov.nodePools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A pod that never had a launch rejected landing says nothing of the group.
	f.prov.launches.Landed(c.UID)
	if v := f.prov.launches.Check(subjectOf(c, pools, NodePoolSelector{})); v.State != launchlimit.Limited {
		t.Errorf("a pod landing that was never planned freed the group: %v", v.State)
	}
	bound := f.prov.launches.Check(subjectOf(a, pools, NodePoolSelector{}))
	f.prov.launches.Landed(a.UID)
	freed := f.prov.launches.Check(subjectOf(c, pools, NodePoolSelector{}))
	if bound.State != launchlimit.Limited || freed.State != launchlimit.Free {
		t.Errorf("group before and after its pod landed: %v, %v; want Limited, Free", bound.State, freed.State)
	}
}

// TestALimitedPodStaysLimitedAcrossARestart: a provisioner that starts afresh reads the
// pod's condition and launches nothing for it.
func TestALimitedPodStaysLimitedAcrossARestart(t *testing.T) {
	f, clk := limitedFixture(t, 1, 6)
	pod := f.pod(t, "gpu", "1")
	f.prov.Submit([]Submission{{Pod: pod}})
	f.provision(t, nil)
	f.reject(t, pod)
	before := f.claims(t)
	if got := f.provision(t, before); len(got) != 0 {
		t.Fatalf("past the limit a batch created %v", got)
	}
	wantCondition(t, f.condition(t, pod), corev1.ConditionTrue, ReasonLaunchLimitReached, "planned capacity did not fit")

	restarted := New(f.kube, selling(instanceType("g.xlarge", 4, 16, 0.4)), f.tracker, noTrigger{}, f.recorder, Options{Clock: clk})
	restarted.Submit([]Submission{{Pod: pod}})
	if err := restarted.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(f.claims(t)); got != len(before) {
		t.Errorf("a restarted provisioner created %d NodeClaims for a pod at its limit, want none", got-len(before))
	}
}

// TestARestartedProvisionerCountsOn: a provisioner that starts afresh between a pod's second
// and third rejected launches reads the count from the pod's condition, and the third one
// reaches the limit.
func TestARestartedProvisionerCountsOn(t *testing.T) {
	f, clk := limitedFixture(t, 3, 6)
	pod := f.pod(t, "gpu", "1")
	f.prov.Submit([]Submission{{Pod: pod}})
	f.provision(t, nil)
	for range 2 {
		f.reject(t, pod)
		f.provision(t, f.claims(t))
		clk.Step(time.Hour)
		f.provision(t, f.claims(t))
	}
	wantCondition(t, f.condition(t, pod), corev1.ConditionFalse, ReasonPlanningAgain, "its backoff passed; planning it again; 2 of 3 launches rejected")

	launches, err := launchlimit.New(launchlimit.Options{Clock: clk, PerPod: 3, PerGroup: 6, Backoff: 30 * time.Second, MaxBackoff: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.prov = New(f.kube, selling(instanceType("g.xlarge", 4, 16, 0.4)), f.tracker, noTrigger{}, f.recorder, Options{Clock: clk, Launches: launches})
	f.reject(t, pod)
	before := f.claims(t)
	f.provision(t, before)
	clk.Step(time.Hour)
	if got := f.provision(t, before); len(got) != 0 {
		t.Fatalf("the third rejected launch, counted by a restarted provisioner, was followed by %v, want nothing", got)
	}
	wantCondition(t, f.condition(t, pod), corev1.ConditionTrue, ReasonLaunchLimitReached, "planned capacity did not fit")
}

func TestLaunchesReadBackFromTheCondition(t *testing.T) {
	owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "trainer-5d8f", Controller: ptr.To(true)}}}}
	tests := []struct {
		name         string
		v            launchlimit.Verdict
		wantMessage  string
		wantLaunches int
		wantByGroup  bool
	}{
		{
			name:         "a pod's own",
			v:            launchlimit.Verdict{State: launchlimit.BackingOff, Launches: 2, Limit: 3, Until: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Last: launchlimit.Rejection{Plugin: "P", Reason: "r"}},
			wantMessage:  "planned capacity did not fit: P: r; 2 of 3 launches rejected; planning again after 2026-12-02T03:00:00Z",
			wantLaunches: 2,
		},
		{
			name:         "a group's, at its limit",
			v:            launchlimit.Verdict{State: launchlimit.Limited, Launches: 6, Limit: 6, ByGroup: true, Last: launchlimit.Rejection{Plugin: "P", Reason: "r", Node: "n", NodeClaim: "c"}},
			wantMessage:  "planned capacity did not fit: P: r (node n of NodeClaim c); 6 of 6 launches for pods like this one (ReplicaSet ml/trainer-5d8f) rejected (--launch-limit-per-group): nothing more is launched for them until they, their NodePools or their claims change, or one of them lands on a node planned for it",
			wantLaunches: 6, wantByGroup: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := heldMessage(owned, tt.v)
			if msg != tt.wantMessage {
				t.Errorf("heldMessage = %q, want %q", msg, tt.wantMessage)
			}
			pod := owned.DeepCopy()
			pod.Status.Conditions = []corev1.PodCondition{{Type: launchlimit.PodCondition, Status: corev1.ConditionTrue, Message: msg}}
			if n, byGroup := launchesOf(pod); n != tt.wantLaunches || byGroup != tt.wantByGroup {
				t.Errorf("launchesOf = %d, %t; want %d, %t", n, byGroup, tt.wantLaunches, tt.wantByGroup)
			}
		})
	}
	if n, _ := launchesOf(&corev1.Pod{}); n != 0 {
		t.Errorf("launchesOf a pod without the condition = %d, want 0", n)
	}
}

func countReason(events []string, reason string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}
