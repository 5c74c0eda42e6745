package provisioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
)

func TestEarlyIntakePlansCapacityOnlyForPodsTheRegisteredNodesCannotTake(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, selling(instanceType("m.2xlarge", 8, 32, 0.3)), pool("general"))
	f.prov.earlyIntake = true
	general := NodePoolSelector{Names: []string{"general"}}

	before := f.pod(t, "before", "1500m")
	if f.prov.Intake(before) {
		t.Fatal("a pod was taken in before any submission made its scheduler profile known")
	}
	// The scheduler hands a pod over: its profile's NodePools are known from then on, and
	// the batch takes in the profile's pods created before.
	seed := f.pod(t, "seed", "1500m")
	f.prov.Submit([]Submission{{Pod: seed, Profile: "tailor-scheduler", NodePools: general}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if !f.tracker.Planned(before.UID) {
		t.Error("the pod created before its profile was known was not planned with the first batch")
	}
	// A registered node with room for two of the pods (3 of its 4 CPUs).
	// The API server taints a new node not-ready: it is ready now.
	existing := f.node(t, "existing", "aws:///us-east-1a/i-existing", "us-east-1a", "4")
	existing.Spec.Taints = nil
	if err := f.kube.Update(ctx, existing); err != nil {
		t.Fatal(err)
	}

	var early []*corev1.Pod
	for i := range 5 {
		pod := f.pod(t, fmt.Sprintf("early-%d", i), "1500m")
		if !f.prov.Intake(pod) {
			t.Fatalf("pod %s was not taken in", pod.Name)
		}
		early = append(early, pod)
	}
	for name, mutate := range map[string]func(*corev1.Pod){
		"may-preempt": func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](1000) },
		"bound":       func(p *corev1.Pod) { p.Spec.NodeName = "existing" },
		"other-sched": func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" },
		"gated":       func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}} },
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, UID: types.UID(name)}, Spec: corev1.PodSpec{SchedulerName: "tailor-scheduler"}}
		mutate(pod)
		if f.prov.Intake(pod) {
			t.Errorf("pod %s was taken in", name)
		}
	}
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	planned, left := 0, 0
	for _, pod := range early {
		if f.tracker.Planned(pod.UID) {
			planned++
		}
		if e, ok := f.prov.expected[pod.UID]; ok && e.node == "existing" {
			left++
		}
	}
	if planned != 3 || left != 2 {
		t.Errorf("early pods: %d planned onto NodeClaims and %d left to the scheduler on the registered node, want 3 and 2", planned, left)
	}

	// The room left to the scheduler stays taken: a later early pod gets capacity of its own.
	late := f.pod(t, "late", "1500m")
	f.prov.Intake(late)
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if !f.tracker.Planned(late.UID) {
		t.Error("a later early pod was left to the scheduler on room already counted for others")
	}

	// The scheduler finds no room for a pod early intake left to it after all, and hands it
	// over: it is planned like any other.
	var doubted *corev1.Pod
	for _, pod := range early {
		if _, ok := f.prov.expected[pod.UID]; ok {
			doubted = pod
			break
		}
	}
	if doubted == nil {
		t.Fatal("no early pod is left to the scheduler")
	}
	f.prov.Submit([]Submission{{Pod: doubted, Profile: "tailor-scheduler", NodePools: general}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.prov.expected[doubted.UID]; ok || !f.tracker.Planned(doubted.UID) {
		t.Errorf("pod %s handed over by the scheduler: still expected on the registered node or not planned", doubted.Name)
	}

	// The scheduler has not reached the other pod within the hold: the next batch takes it in
	// again, and the one after looks for room for it anew.
	var waiting *corev1.Pod
	for _, pod := range early {
		if _, ok := f.prov.expected[pod.UID]; ok {
			waiting = pod
		}
	}
	if waiting == nil {
		t.Fatal("no early pod is left to the scheduler any more")
	}
	later := time.Now().Add(ExpectedHold + time.Second)
	f.prov.clock = clocktesting.NewFakeClock(later)
	f.prov.Intake(f.pod(t, "trigger", "100m"))
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if s, ok := f.prov.pending[waiting.UID]; !ok || !s.Early {
		t.Fatalf("pod %s, still unbound after the hold, was not taken in again", waiting.Name)
	}
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if e, ok := f.prov.expected[waiting.UID]; !ok || !e.at.Equal(later) || e.node != "existing" {
		t.Errorf("pod %s taken in again: expected %+v, want left to the scheduler on the registered node from now", waiting.Name, e)
	}
}

func TestEarlyPodsNoNodePoolCanTakeWaitForTheScheduler(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, selling(instanceType("m.xlarge", 4, 16, 0.15)), pool("general"))
	f.prov.earlyIntake = true
	seed := f.pod(t, "seed", "1")
	f.prov.Submit([]Submission{{Pod: seed, Profile: "tailor-scheduler"}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	f.events()

	huge := f.pod(t, "huge", "64")
	if !f.prov.Intake(huge) {
		t.Fatal("the pod was not taken in")
	}
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if f.tracker.Planned(huge.UID) {
		t.Error("a pod no instance type can hold was planned")
	}
	if diff := cmp.Diff([]string(nil), f.events()); diff != "" {
		t.Errorf("events for a pod the scheduler has not tried (-want +got):\n%s", diff)
	}
	// Once the scheduler hands it over, the batch says why it cannot be provisioned.
	f.prov.Submit([]Submission{{Pod: huge, Profile: "tailor-scheduler"}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if events := f.events(); len(events) != 1 {
		t.Errorf("events after the scheduler handed the pod over: %q, want one FailedProvisioning", events)
	}
}

// TestEarlyPodsAreNotLeftOnHeldNodes: the scheduler plugin keeps every pod off a node until
// the pods planned onto it are bound, so early intake does not count its room.
func TestEarlyPodsAreNotLeftOnHeldNodes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, selling(instanceType("m.xlarge", 4, 16, 0.15)), pool("general"))
	var names []string
	for _, name := range []string{"held", "free"} {
		node := f.node(t, name, "aws:///us-east-1a/i-"+name, "us-east-1a", "4")
		node.Spec.Taints = nil
		if err := f.kube.Update(ctx, node); err != nil {
			t.Fatal(err)
		}
		nc := f.nodeClaim(t, "general", func(s *karpv1.NodeClaimStatus) {
			s.ProviderID, s.NodeName = node.Spec.ProviderID, node.Name
			s.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
		})
		names = append(names, nc.Name)
	}
	planned := f.pod(t, "planned", "1")
	f.tracker.Plan(names[0], "held", []nomination.Pod{{Namespace: planned.Namespace, Name: planned.Name, UID: planned.UID}})
	early := f.pod(t, "early", "1")
	unbound := map[types.UID]*corev1.Pod{planned.UID: planned, early.UID: early}

	in, _, err := f.prov.input(ctx, NodePoolSelector{}, []*corev1.Pod{early}, unbound, inputOptions{existing: true})
	if err != nil {
		t.Fatal(err)
	}
	schedulable := map[string]bool{}
	for _, n := range in.Nodes {
		schedulable[n.Node.Name] = n.Schedulable
	}
	if diff := cmp.Diff(map[string]bool{"held": false, "free": true}, schedulable); diff != "" {
		t.Errorf("registered nodes early pods may be left on (-want +got):\n%s", diff)
	}
}
