package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

var systemTaint = corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// TestPodIsNominatedToThePlannedNodeAndBoundThere follows a pod from handoff to binding: the
// plugin submits it with the filter context, the sidecar's nomination reaches the scheduler,
// which records it on the pod, and the pod is bound to that node once it registers.
func TestPodIsNominatedToThePlannedNodeAndBoundThere(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	socket := filepath.Join(t.TempDir(), "provisioner.sock")
	tracker := nomination.NewTracker(clock.RealClock{})
	submitted := make(chan provisioning.Submission, 10)
	startSidecar(t, socket, tracker, submitted)
	createNode(t, cs, "system-a", "2", systemTaint)
	startScheduler(t, socket)

	pod := createPod(t, cs, ns, "web", "tailor-scheduler", "1", "")
	sub := nextSubmission(t, submitted, 20*time.Second)
	if sub.Pod.UID != pod.UID || sub.Profile != "tailor-scheduler" {
		t.Fatalf("submitted pod %s of profile %q, want %s of tailor-scheduler", sub.Pod.Name, sub.Profile, pod.Name)
	}
	if !strings.Contains(sub.SchedulerMessage, "0/1 nodes are available: 1 node(s): node(s) had untolerated taint") {
		t.Errorf("scheduler message %q does not carry the filter results", sub.SchedulerMessage)
	}

	tracker.Plan("general-abc", "planned-a", []nomination.Pod{{Namespace: ns, Name: pod.Name, UID: pod.UID}})
	waitPod(t, cs, ns, pod.Name, "nominated to planned-a", func(p *corev1.Pod) bool { return p.Status.NominatedNodeName == "planned-a" })

	createNode(t, cs, "planned-a", "4")
	got := waitPod(t, cs, ns, pod.Name, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	if got.Spec.NodeName != "planned-a" {
		t.Errorf("pod bound to %q, want planned-a", got.Spec.NodeName)
	}
}

// TestPreemptionRunsFirst: a pod that preemption can place is nominated by preemption and
// never handed to the provisioner.
func TestPreemptionRunsFirst(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	socket := filepath.Join(t.TempDir(), "provisioner.sock")
	submitted := make(chan provisioning.Submission, 10)
	startSidecar(t, socket, nomination.NewTracker(clock.RealClock{}), submitted)
	createNode(t, cs, "preempt-a", "1")
	startScheduler(t, socket)

	priorityClass(t, cs, "it-low", 0)
	priorityClass(t, cs, "it-high", 1000)
	createPod(t, cs, ns, "low", "tailor-scheduler", "1", "it-low")
	waitPod(t, cs, ns, "low", "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName == "preempt-a" })
	createPod(t, cs, ns, "high", "tailor-scheduler", "1", "it-high")
	got := waitPod(t, cs, ns, "high", "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	if got.Spec.NodeName != "preempt-a" {
		t.Errorf("high-priority pod bound to %q, want preempt-a", got.Spec.NodeName)
	}
	select {
	case s := <-submitted:
		t.Errorf("pod %s was handed to the provisioner though preemption could place it", s.Pod.Name)
	default:
	}
}

// TestProfilesScopeNodePools: pods of the tailor-batch profile are submitted with that
// profile's NodePool restriction.
func TestProfilesScopeNodePools(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	socket := filepath.Join(t.TempDir(), "provisioner.sock")
	submitted := make(chan provisioning.Submission, 10)
	startSidecar(t, socket, nomination.NewTracker(clock.RealClock{}), submitted)
	createNode(t, cs, "system-b", "2", systemTaint)
	startScheduler(t, socket)

	createPod(t, cs, ns, "job", "tailor-batch", "1", "")
	sub := nextSubmission(t, submitted, 20*time.Second)
	if diff := cmp.Diff([]string{"batch"}, sub.NodePools.Names); sub.Profile != "tailor-batch" || diff != "" {
		t.Errorf("submission of profile %q with NodePools %v, want tailor-batch restricted to [batch]", sub.Profile, sub.NodePools.Names)
	}
}

// TestSchedulingGoesOnWithoutTheSidecar: with no sidecar listening, pods still land on nodes
// with room, and a pod that needs a new node is handed over once the sidecar appears.
func TestSchedulingGoesOnWithoutTheSidecar(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	socket := filepath.Join(t.TempDir(), "provisioner.sock")
	createNode(t, cs, "room-a", "2")
	startScheduler(t, socket)

	createPod(t, cs, ns, "fits", "tailor-scheduler", "1", "")
	waitPod(t, cs, ns, "fits", "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName == "room-a" })
	big := createPod(t, cs, ns, "big", "tailor-scheduler", "8", "")
	time.Sleep(2 * time.Second)

	submitted := make(chan provisioning.Submission, 10)
	startSidecar(t, socket, nomination.NewTracker(clock.RealClock{}), submitted)
	sub := nextSubmission(t, submitted, 20*time.Second)
	if sub.Pod.UID != big.UID {
		t.Errorf("submitted %s, want big", sub.Pod.Name)
	}
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("pod big bound to %q, want it pending for a new node", p.Spec.NodeName)
	}
}

// TestPodsOfAControllerGoWhereConsolidationReservedRoom: a node reserved for one more pod of
// a controller takes the next pod of that controller, though the scheduler's own scores
// prefer the larger, emptier node; once the node runs the pods reserved, the next pod goes
// by the default scores again.
func TestPodsOfAControllerGoWhereConsolidationReservedRoom(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	socket := filepath.Join(t.TempDir(), "provisioner.sock")
	startSidecar(t, socket, nomination.NewTracker(clock.RealClock{}), make(chan provisioning.Submission, 10))
	createNode(t, cs, "roomy-a", "16")
	createNode(t, cs, "reserved-a", "4")
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4f", UID: "6f1c9a52-reserved-rs", Controller: ptr.To(true)}
	value, err := reservation.Encode(reservation.Reservation{
		Until: metav1.NewTime(time.Now().Add(time.Hour)), Pods: map[types.UID]int{owner.UID: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, reservation.AnnotationKey, value)
	if _, err := cs.CoreV1().Nodes().Patch(context.Background(), "reserved-a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	startScheduler(t, socket)

	var got []string
	for _, name := range []string{"web-moved", "web-next"} {
		createPod(t, cs, ns, name, "tailor-scheduler", "1", "", owner)
		p := waitPod(t, cs, ns, name, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		got = append(got, p.Spec.NodeName)
	}
	if diff := cmp.Diff([]string{"reserved-a", "roomy-a"}, got); diff != "" {
		t.Errorf("nodes of web-moved and web-next (-want +got):\n%s", diff)
	}
}
