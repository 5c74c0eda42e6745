package disruption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// TestNodesRunningAGangAreNotConsolidated: of two underused nodes, each of which could take
// the other's pod, the one running a member of a gang stays, and takes the other's pod.
func TestNodesRunningAGangAreNotConsolidated(t *testing.T) {
	f := newFixture(t, "gang")
	f.node("a", "big.2xlarge", "1")
	f.node("b", "big.2xlarge", "1")
	// Alike but for their names, a would go first.
	f.pods[f.prefix+"-a"][0].Labels = map[string]string{gang.Label: "train"}
	f.pods[f.prefix+"-b"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "kept", "b": "deleted"}, f.state("a", "b")); diff != "" {
		t.Errorf("after a pass (-want +got):\n%s", diff)
	}
	if f.launched != 0 {
		t.Errorf("launched %d replacements, want none", f.launched)
	}
}

// TestStaticNodePoolsAreNotConsolidated: with the StaticCapacity gate, an empty node and
// two underused ones of a static NodePool stay; without it, spec.replicas changes nothing.
func TestStaticNodePoolsAreNotConsolidated(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("StaticCapacity=%t", gate), func(t *testing.T) {
			f := newFixture(t, fmt.Sprintf("static-%t", gate))
			f.pool.Spec.Replicas = ptr.To[int64](3)
			f.ctrl.opts.StaticCapacity = gate
			f.node("idle", "small.xlarge")
			f.node("a", "big.2xlarge", "1")
			f.node("b", "big.2xlarge", "1")
			f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
			f.pods[f.prefix+"-b"][0].OwnerReferences = []metav1.OwnerReference{webReplicaSet}
			f.pass()
			f.pass()
			want := map[string]string{"idle": "kept", "a": "kept", "b": "kept"}
			if !gate {
				want = map[string]string{"idle": "deleted", "a": "cordoned", "b": "cordoned"}
			}
			if diff := cmp.Diff(want, f.state("idle", "a", "b")); diff != "" {
				t.Errorf("after two passes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestALeaderHoldsThePodsItsPredecessorMayHaveMoved: a sidecar that takes over does not
// know what the one before it moved, so pods created before it led stay put until they are
// MovedPodsHold old; pods created since are judged on what it moved itself.
func TestALeaderHoldsThePodsItsPredecessorMayHaveMoved(t *testing.T) {
	f := newFixture(t, "takeover")
	f.ctrl.opts.MovedPodsHold = time.Minute
	f.ctrl.leadingSince = f.clock.Now()
	pod := func(name string, age time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{webReplicaSet},
			CreationTimestamp: metav1.NewTime(f.clock.Now().Add(-age))}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		at   time.Duration
		want bool
	}{
		{name: "created 10s before the takeover", pod: pod("young", 10*time.Second), want: true},
		{name: "the same pod once a minute old", pod: pod("young", 10*time.Second), at: 50 * time.Second, want: false},
		{name: "created 2m before the takeover", pod: pod("old", 2*time.Minute), want: false},
		{name: "created after the takeover", pod: pod("new", -5*time.Second), at: 10 * time.Second, want: false},
	}
	start := f.clock.Now()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.SetTime(start.Add(tt.at))
			if got := f.ctrl.wasMoved(tt.pod); got != tt.want {
				t.Errorf("wasMoved() = %t, want %t", got, tt.want)
			}
		})
	}
}

// TestASidecarWithoutLeaderElectionLeadsFromItsStart: a pod created after the process
// started but before the disruption controller's first pass (the sidecar is ready before
// its caches sync) was moved by no one, so it is not held, also when it was created in the
// same second as the process started (its creation timestamp, in whole seconds, then reads
// earlier than the start: CI's TestConsolidationPolicies failed on that); with leader
// election, a pod created before the controller was elected may have been moved by the
// previous leader.
func TestASidecarWithoutLeaderElectionLeadsFromItsStart(t *testing.T) {
	for _, tt := range []struct {
		name           string
		leaderElection bool
		// created is when the pod is created, after the process started at 0.6 s past a
		// whole second; its creation timestamp keeps the whole seconds.
		created time.Duration
		want    bool
	}{
		{name: "one replica, a pod created a second later", created: time.Second, want: false},
		{name: "one replica, a pod created in the same second", created: 200 * time.Millisecond, want: false},
		{name: "replicas taking turns, a pod created before the election", leaderElection: true, created: time.Second, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second).Add(600 * time.Millisecond))
			c := NewController(kube, kube, nil, nil, nil, record.NewFakeRecorder(10), clk, ControllerOptions{Interval: time.Second, MovedPodsHold: time.Hour, LeaderElection: tt.leaderElection})
			clk.Step(tt.created)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: []metav1.OwnerReference{webReplicaSet}, CreationTimestamp: metav1.NewTime(clk.Now().Truncate(time.Second))}}
			clk.Step(2 * time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if got := c.wasMoved(pod); got != tt.want {
				t.Errorf("wasMoved() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestPodsMovedByConsolidationAreNotMovedAgainWithinTheHold(t *testing.T) {
	f := newFixture(t, "hold")
	f.ctrl.opts.MovedPodsHold = time.Hour
	web := webReplicaSet
	f.node("a", "big.2xlarge", "500m")
	f.pods[f.prefix+"-a"][0].OwnerReferences = []metav1.OwnerReference{web}
	f.node("b", "big.2xlarge", "1")
	in, err := f.ClusterInput(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	cluster, _, err := f.ctrl.view(f.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var a Candidate
	for _, cand := range cluster.Candidates {
		if cand.Node == f.prefix+"-a" {
			a = cand
		}
	}
	if err := f.ctrl.execute(f.ctx, Decision{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []Candidate{a}}); err != nil {
		t.Fatal(err)
	}
	// The ReplicaSet makes up for the evicted pod; the scheduler puts it on b.
	f.clock.Step(time.Second)
	moved := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-2", UID: "uid-web-2", OwnerReferences: []metav1.OwnerReference{web},
			CreationTimestamp: metav1.NewTime(f.clock.Now())},
		Spec: corev1.PodSpec{NodeName: f.prefix + "-b", Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}},
	}
	f.pods[f.prefix+"-b"] = append(f.pods[f.prefix+"-b"], moved)
	f.pass()
	if diff := cmp.Diff(map[string]string{"a": "deleted", "b": "kept"}, f.state("a", "b")); diff != "" {
		t.Errorf("within the hold (-want +got):\n%s", diff)
	}
	// A later decision moves another pod of the same ReplicaSet: the pod moved first is no
	// less moved for it.
	f.clock.Step(time.Minute)
	f.node("c", "big.2xlarge", "500m")
	f.pods[f.prefix+"-c"][0].OwnerReferences = []metav1.OwnerReference{web}
	if err := f.ctrl.deleteOriginals(f.ctx, Decision{Reason: karpv1.DisruptionReasonUnderutilized, Originals: []Candidate{{
		Node: f.prefix + "-c", NodeClaim: f.prefix + "-c", NodePool: f.pool.Name, Pods: f.pods[f.prefix+"-c"],
	}}}, nil); err != nil {
		t.Fatal(err)
	}
	delete(f.pods, f.prefix+"-c")
	f.clock.Step(30 * time.Minute)
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "kept"}, f.state("b")); diff != "" {
		t.Errorf("within the hold, after another pod of the ReplicaSet moved (-want +got):\n%s", diff)
	}
	if f.launched != 0 {
		t.Errorf("launched %d replacements for a node holding a moved pod, want 0", f.launched)
	}
	f.clock.Step(time.Hour)
	f.pass()
	if diff := cmp.Diff(map[string]string{"b": "cordoned"}, f.state("b")); diff != "" {
		t.Errorf("after the hold, b is replaced by a smaller node (-want +got):\n%s", diff)
	}
}

func TestReplacementsAreNotConsolidatedWithinTheHold(t *testing.T) {
	f := newFixture(t, "replacement-hold")
	f.ctrl.opts.MovedPodsHold = time.Hour
	// x was launched by an earlier replacement; its pods did not all come.
	f.ctrl.replacements[f.prefix+"-x"] = f.clock.Now()
	f.node("x", "big.2xlarge", "1")
	f.pass()
	if diff := cmp.Diff(map[string]string{"x": "kept"}, f.state("x")); diff != "" {
		t.Errorf("within the hold (-want +got):\n%s", diff)
	}
	f.clock.Step(time.Hour)
	f.pass()
	if diff := cmp.Diff(map[string]string{"x": "cordoned"}, f.state("x")); diff != "" {
		t.Errorf("after the hold, x is replaced by a smaller node (-want +got):\n%s", diff)
	}
}

// TestOfferingPriceIsTheWholeNode checks that consolidation (its savings and the spot-to-spot
// threshold) weighs a node at its instance price plus its node costs.
func TestOfferingPriceIsTheWholeNode(t *testing.T) {
	pool := &packing.NodePool{InstanceTypes: []*cloudprovider.InstanceType{{
		Name: "m5.large",
		Offerings: []cloudprovider.Offering{
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04, NodeCosts: cloudprovider.NodeCosts{Volumes: 0.002, PublicIPv4: 0.005}},
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: cloudprovider.NodeCosts{Volumes: 0.002}},
		},
	}}}
	labels := func(zone, capacityType string) map[string]string {
		return map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: zone, karpv1.CapacityTypeLabelKey: capacityType}
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{name: "spot with a public address", labels: labels("zone-a", karpv1.CapacityTypeSpot), want: 0.047},
		{name: "on-demand", labels: labels("zone-a", karpv1.CapacityTypeOnDemand), want: 0.098},
		{name: "unknown offering", labels: labels("zone-b", karpv1.CapacityTypeSpot), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := offeringPrice(pool, tt.labels); got < tt.want-1e-12 || got > tt.want+1e-12 {
				t.Errorf("offeringPrice() = %v, want %v", got, tt.want)
			}
		})
	}
}
