package nomination

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// TestReconcileRecordsNominatedOnceTheNodeNameIsKnown follows a NodeClaim from creation to
// launch on the API server and checks which of its pods are told the node they are
// nominated to: those this process planned and that still wait, once.
func TestReconcileRecordsNominatedOnceTheNodeNameIsKnown(t *testing.T) {
	const node = "ip-10-0-0-7.ec2.internal"
	tests := []struct {
		name string
		// plannedHere says the tracker learnt the plan before the launch, as the leader that
		// made it does; otherwise the tracker is a new leader's that first sees the claim launched.
		plannedHere bool
		// bindFirst binds the second pod before the launch.
		bindFirst bool
		// want are the pods told they are nominated.
		want []string
	}{{
		name:        "the leader that planned the pods nominates both",
		plannedHere: true,
		want:        []string{"first", "second"},
	}, {
		name:        "a pod bound before the launch is not nominated",
		plannedHere: true,
		bindFirst:   true,
		want:        []string{"first"},
	}, {
		name: "a new leader does not nominate again what its predecessor did",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "nominated-"}}
			if err := kube.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
			var pods []Pod
			for _, name := range []string{"first", "second"} {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
				}
				if err := kube.Create(ctx, p); err != nil {
					t.Fatal(err)
				}
				pods = append(pods, Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID})
			}
			value, err := EncodePods(pods)
			if err != nil {
				t.Fatal(err)
			}
			nc := &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "general-", Annotations: map[string]string{PlannedPodsAnnotationKey: value}},
				Spec: karpv1.NodeClaimSpec{
					NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
				},
			}
			if err := kube.Create(ctx, nc); err != nil {
				t.Fatal(err)
			}
			tr := NewTracker(clock.RealClock{})
			recorder := &eventLog{}
			c := NewController(kube, tr, recorder)
			reconcileClaim := func() {
				t.Helper()
				if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.plannedHere {
				tr.Plan(nc.Name, "", pods)
				reconcileClaim()
			}
			if tt.bindFirst {
				if err := kube.SubResource("binding").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "second"}},
					&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "second"}, Target: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-0-9.ec2.internal"}}); err != nil {
					t.Fatal(err)
				}
			}
			if got := recorder.take(); len(got) != 0 {
				t.Errorf("events before the launch %q, want none", got)
			}
			nc.Status.NodeName = node
			if err := kube.Status().Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
			reconcileClaim()
			reconcileClaim() // a second look at the same launch records nothing more
			var want []event
			for _, name := range tt.want {
				want = append(want, event{Object: "Pod v1 " + ns.Name + "/" + name, Type: corev1.EventTypeNormal, Reason: ReasonNominated,
					Message: fmt.Sprintf("nominated to node %s of NodeClaim %s", node, nc.Name)})
			}
			if diff := cmp.Diff(want, recorder.take()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// event is one recorded event; Object names its involved object as "Kind apiVersion namespace/name".
type event struct{ Object, Type, Reason, Message string }

// eventLog is a recorder that keeps the involved objects' references, which FakeRecorder drops.
type eventLog struct {
	mu     sync.Mutex
	events []event
}

var _ record.EventRecorder = &eventLog{}

func (l *eventLog) Event(obj runtime.Object, eventType, reason, message string) {
	ref, ok := obj.(*corev1.ObjectReference)
	if !ok {
		panic(fmt.Sprintf("event on %T, want an ObjectReference", obj))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event{Object: ref.Kind + " " + ref.APIVersion + " " + ref.Namespace + "/" + ref.Name, Type: eventType, Reason: reason, Message: message})
}

func (l *eventLog) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	l.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	l.Eventf(obj, eventType, reason, format, args...)
}

// take returns the events recorded since the last take, sorted by object.
func (l *eventLog) take() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	sort.Slice(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out
}
