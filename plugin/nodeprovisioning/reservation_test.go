package nodeprovisioning

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

func TestScoreSteersPodsToTheirReservedNodes(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const web, api types.UID = "rs-web", "rs-api"
	pod := func(name string, controller types.UID) *v1.Pod {
		p := st.MakePod().Namespace("default").Name(name).UID(name).Obj()
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(controller), UID: controller, Controller: ptr.To(true)}}
		return p
	}
	reserved := func(name, value string) *v1.Node {
		return st.MakeNode().Name(name).Annotation(reservation.AnnotationKey, value).Obj()
	}
	encode := func(until time.Time, pods map[types.UID]int) string {
		v, err := reservation.Encode(reservation.Reservation{Until: metav1.NewTime(until), Pods: pods})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	later := now.Add(10 * time.Minute)

	tests := []struct {
		name string
		pod  *v1.Pod
		// nodes, each with the pods it runs.
		nodes    []*v1.Node
		running  map[string][]*v1.Pod
		wantSkip bool
		want     map[string]int64
	}{
		{
			name:     "a pod without a controller skips scoring",
			pod:      st.MakePod().Namespace("default").Name("bare").UID("bare").Obj(),
			nodes:    []*v1.Node{reserved("a", encode(later, map[types.UID]int{web: 1}))},
			wantSkip: true,
		},
		{
			name:     "a pod no node is reserved for skips scoring",
			pod:      pod("web-1", web),
			nodes:    []*v1.Node{reserved("a", encode(later, map[types.UID]int{api: 3})), st.MakeNode().Name("b").Obj()},
			wantSkip: true,
		},
		{
			name: "the node reserved for more pods of the controller scores highest, the others zero",
			pod:  pod("web-1", web),
			nodes: []*v1.Node{
				reserved("a", encode(later, map[types.UID]int{web: 2})),
				reserved("b", encode(later, map[types.UID]int{api: 2})),
				st.MakeNode().Name("c").Obj(),
			},
			running: map[string][]*v1.Pod{"a": {pod("web-0", web)}},
			want:    map[string]int64{"a": fwk.MaxNodeScore, "b": 0, "c": 0},
		},
		{
			name: "a node already running the pods reserved for the controller is no longer preferred",
			pod:  pod("web-2", web),
			nodes: []*v1.Node{
				reserved("a", encode(later, map[types.UID]int{web: 2})),
				reserved("b", encode(later, map[types.UID]int{web: 1})),
			},
			running: map[string][]*v1.Pod{"a": {pod("web-0", web), pod("web-1", web)}},
			want:    map[string]int64{"a": 0, "b": fwk.MaxNodeScore},
		},
		{
			name:     "a lapsed reservation is ignored",
			pod:      pod("web-1", web),
			nodes:    []*v1.Node{reserved("a", encode(now, map[types.UID]int{web: 1}))},
			wantSkip: true,
		},
		{
			name:     "a reservation that cannot be read is ignored",
			pod:      pod("web-1", web),
			nodes:    []*v1.Node{reserved("a", `{"pods": 3}`)},
			wantSkip: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &NodeProvisioning{clock: clocktesting.NewFakeClock(now)}
			var infos []fwk.NodeInfo
			for _, n := range tt.nodes {
				info := framework.NewNodeInfo(tt.running[n.Name]...)
				info.SetNode(n)
				infos = append(infos, info)
			}
			state := framework.NewCycleState()
			status := pl.PreScore(context.Background(), state, tt.pod, infos)
			if tt.wantSkip {
				if !status.IsSkip() {
					t.Fatalf("PreScore = %v, want Skip", status)
				}
				return
			}
			if !status.IsSuccess() {
				t.Fatalf("PreScore = %v, want success", status)
			}
			got := map[string]int64{}
			for _, info := range infos {
				score, status := pl.Score(context.Background(), state, tt.pod, info)
				if !status.IsSuccess() {
					t.Fatalf("Score(%s) = %v", info.Node().Name, status)
				}
				got[info.Node().Name] = score
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterKeepsTheRoomReservedForOtherControllers(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const web, api types.UID = "rs-web", "rs-api"
	pod := func(name string, controller types.UID, cpu string) *v1.Pod {
		p := st.MakePod().Namespace("default").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "1Gi"}).Obj()
		if controller != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(controller), UID: controller, Controller: ptr.To(true)}}
		}
		return p
	}
	// A node of 4 CPUs runs one api pod of 1 CPU and keeps room for two web pods of 1 CPU.
	reserved := func(until time.Time, maxPods string) *v1.Node {
		value, err := reservation.Encode(reservation.Reservation{
			Until:    metav1.NewTime(until),
			Pods:     map[types.UID]int{web: 2},
			Requests: map[types.UID]v1.ResourceList{web: {v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return st.MakeNode().Name("a").Annotation(reservation.AnnotationKey, value).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "16Gi", v1.ResourcePods: maxPods}).Obj()
	}
	later := now.Add(10 * time.Minute)
	kept := fwk.NewStatus(fwk.Unschedulable, "node keeps room for 2 pod(s) consolidation moves onto it")

	tests := []struct {
		name string
		pod  *v1.Pod
		node *v1.Node
		// running are the node's pods besides the api pod.
		running []*v1.Pod
		want    *fwk.Status
	}{
		{name: "a pod of another controller that fits beside the room kept", pod: pod("api-1", api, "1"), node: reserved(later, "110")},
		{name: "a pod of another controller that would take the room kept", pod: pod("api-1", api, "1500m"), node: reserved(later, "110"), want: kept},
		{name: "a pod without a controller that would take the room kept", pod: pod("bare", "", "2"), node: reserved(later, "110"), want: kept},
		{name: "a pod of the controller the room is kept for", pod: pod("web-1", web, "1"), node: reserved(later, "110")},
		{
			name:    "the room of the web pods that have landed is free again",
			pod:     pod("api-1", api, "2"),
			node:    reserved(later, "110"),
			running: []*v1.Pod{pod("web-1", web, "1")},
			want:    fwk.NewStatus(fwk.Unschedulable, "node keeps room for 1 pod(s) consolidation moves onto it"),
		},
		{name: "the last pod slots are kept too", pod: pod("api-1", api, "100m"), node: reserved(later, "3"), want: kept},
		{name: "a lapsed reservation keeps nothing", pod: pod("api-1", api, "3"), node: reserved(now, "110")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &NodeProvisioning{provisioner: &fakeProvisioner{}, clock: clocktesting.NewFakeClock(now)}
			info := framework.NewNodeInfo(append([]*v1.Pod{pod("api-0", api, "1")}, tt.running...)...)
			info.SetNode(tt.node)

			got := pl.Filter(context.Background(), nil, tt.pod, info)

			if diff := cmp.Diff(tt.want.Code(), got.Code()); diff != "" {
				t.Errorf("status code (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.Message(), got.Message()); diff != "" {
				t.Errorf("status message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReservationCount(t *testing.T) {
	reserved := func(name string) *v1.Node {
		return st.MakeNode().Name(name).Annotation(reservation.AnnotationKey, "{}").Obj()
	}
	plain := func(name string) *v1.Node { return st.MakeNode().Name(name).Obj() }
	tests := []struct {
		name     string
		synced   bool
		events   func(c *reservationCount)
		wantNone bool
	}{
		{name: "no node is reserved", synced: true, events: func(c *reservationCount) { c.update(plain("a")) }, wantNone: true},
		{name: "a node is reserved", synced: true, events: func(c *reservationCount) { c.update(plain("a")); c.update(reserved("b")) }},
		{name: "a malformed reservation counts: it is logged when read", synced: true, events: func(c *reservationCount) {
			c.update(st.MakeNode().Name("a").Annotation(reservation.AnnotationKey, `{"pods": 3}`).Obj())
		}},
		{name: "the reservation is lifted", synced: true, events: func(c *reservationCount) { c.update(reserved("a")); c.update(plain("a")) }, wantNone: true},
		{name: "the reserved node is deleted", synced: true, events: func(c *reservationCount) { c.update(reserved("a")); c.delete(reserved("a")) }, wantNone: true},
		{name: "the reserved node is deleted while the watch was down", synced: true, events: func(c *reservationCount) {
			c.update(reserved("a"))
			c.delete(cache.DeletedFinalStateUnknown{Key: "a", Obj: reserved("a")})
		}, wantNone: true},
		{name: "one of two reserved nodes is lifted", synced: true, events: func(c *reservationCount) {
			c.update(reserved("a"))
			c.update(reserved("b"))
			c.update(plain("a"))
		}},
		{name: "before the initial list is seen nothing is known", synced: false, events: func(c *reservationCount) { c.update(plain("a")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &reservationCount{synced: func() bool { return tt.synced }, nodes: sets.New[string]()}
			tt.events(c)
			if got := c.none(); got != tt.wantNone {
				t.Errorf("none() = %v, want %v", got, tt.wantNone)
			}
		})
	}
	var unknown *reservationCount
	if unknown.none() {
		t.Error("a nil count reports no reserved node, want it to know nothing")
	}
}

// TestReservationCountFollowsTheInformer counts from a node informer: nodes listed before it
// started, and a reservation written and lifted afterwards.
func TestReservationCountFollowsTheInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := clientsetfake.NewClientset(st.MakeNode().Name("a").Annotation(reservation.AnnotationKey, "{}").Obj(), st.MakeNode().Name("b").Obj())
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := trackReservations(factory.Core().V1().Nodes().Informer())
	if err != nil {
		t.Fatal(err)
	}
	if c.none() {
		t.Fatal("none() before the informer started, want it to know nothing")
	}
	factory.Start(ctx.Done())
	waitFor := func(what string, want bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			return c.none() == want, nil
		}); err != nil {
			t.Fatalf("%s: none() stayed %v", what, !want)
		}
	}
	waitFor("node a is reserved", false)

	a, err := cs.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(a.Annotations, reservation.AnnotationKey)
	if _, err := cs.CoreV1().Nodes().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the reservation is lifted", true)

	b := st.MakeNode().Name("b").Annotation(reservation.AnnotationKey, "{}").Obj()
	if _, err := cs.CoreV1().Nodes().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("node b is reserved", false)
}

// TestNothingReservedSkipsReadingNodes: while the count knows of no reserved node, Filter and
// PreScore do not read the nodes' annotations, not even a reservation the count has not
// caught up with yet.
func TestNothingReservedSkipsReadingNodes(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const web, api types.UID = "rs-web", "rs-api"
	value, err := reservation.Encode(reservation.Reservation{
		Until:    metav1.NewTime(now.Add(10 * time.Minute)),
		Pods:     map[types.UID]int{web: 4},
		Requests: map[types.UID]v1.ResourceList{web: {v1.ResourceCPU: resource.MustParse("1")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	node := st.MakeNode().Name("a").Annotation(reservation.AnnotationKey, value).
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "16Gi", v1.ResourcePods: "110"}).Obj()
	pod := func(name string, controller types.UID) *v1.Pod {
		p := st.MakePod().Namespace("default").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj()
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(controller), UID: controller, Controller: ptr.To(true)}}
		return p
	}
	info := framework.NewNodeInfo()
	info.SetNode(node)
	pl := &NodeProvisioning{
		provisioner:  &fakeProvisioner{},
		clock:        clocktesting.NewFakeClock(now),
		reservations: &reservationCount{synced: func() bool { return true }, nodes: sets.New[string]()},
	}
	if status := pl.Filter(context.Background(), nil, pod("api-0", api), info); !status.IsSuccess() {
		t.Errorf("Filter = %v, want success", status)
	}
	if status := pl.PreScore(context.Background(), framework.NewCycleState(), pod("web-0", web), []fwk.NodeInfo{info}); !status.IsSkip() {
		t.Errorf("PreScore = %v, want Skip", status)
	}
}
