package nodepool

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// cfg and kube reach the API server directly; each test runs the controller in a manager
// against the same server, recording its events there.
var (
	cfg  *rest.Config
	kube client.Client
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	testenv.Main(m, &cfg, &kube)
}

// startController runs the controller in a manager, as the sidecar does, until the test ends.
func startController(t *testing.T) {
	t.Helper()
	mgr := testenv.NewManager(t, cfg)
	if err := NewController(mgr.GetClient(), mgr.GetEventRecorderFor("tailor-provisioner")).Register(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
}

func TestStatusSumsTheResourcesOfItsNodeClaims(t *testing.T) {
	startController(t)
	ctx := context.Background()
	readyClass(t, "sums")
	create(t, nodePool("sums", "sums"))
	launched := create(t, nodeClaim("sums", corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("58"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"), "nvidia.com/gpu": resource.MustParse("1"),
	}))
	launching := create(t, nodeClaim("sums", nil)) // counts what it requests until launched
	create(t, nodeClaim("other", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}))

	steps := []struct {
		name   string
		change func(t *testing.T)
		want   map[string]string
	}{{
		name:   "a launched and a launching NodeClaim",
		change: func(*testing.T) {},
		want:   map[string]string{"cpu": "3500m", "memory": "9Gi", "pods": "60", "ephemeral-storage": "20Gi", "nvidia.com/gpu": "1", "nodes": "2"},
	}, {
		name: "the launching NodeClaim launches with more than it requested",
		change: func(t *testing.T) {
			launch(t, launching, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")})
		},
		want: map[string]string{"cpu": "6", "memory": "24Gi", "pods": "58", "ephemeral-storage": "20Gi", "nvidia.com/gpu": "1", "nodes": "2"},
	}, {
		name: "the NodeClaim with the GPU is deleted",
		change: func(t *testing.T) {
			if err := kube.Delete(ctx, launched); err != nil {
				t.Fatal(err)
			}
		},
		want: map[string]string{"cpu": "4", "memory": "16Gi", "nodes": "1"},
	}}
	for _, step := range steps {
		step.change(t)
		var got map[string]string
		eventually(t, func() bool {
			got = resourcesOf(t, "sums")
			return cmp.Equal(step.want, got)
		})
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Fatalf("%s: status.resources (-want +got):\n%s", step.name, diff)
		}
	}

	// Nothing changed, so reconciling again writes nothing.
	before := get(t, "sums")
	if _, err := NewController(kube, record.NewFakeRecorder(10)).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(before)}); err != nil {
		t.Fatal(err)
	}
	if after := get(t, "sums"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("a reconcile without change wrote the NodePool (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
	}
}

// TestStatusSumsThePricesOfItsNodeClaims sums each NodeClaim's price into status.price:
// as planned until it launches, then as launched.
func TestStatusSumsThePricesOfItsNodeClaims(t *testing.T) {
	startController(t)
	readyClass(t, "prices")
	create(t, nodePool("prices", "prices"))
	planned := func(price string) *karpv1.NodeClaim {
		nc := nodeClaim("prices", nil)
		nc.Annotations = map[string]string{cloudprovider.PlannedPriceAnnotationKey: price}
		return nc
	}
	create(t, planned(`{"instance":0.09,"volumes":0.002192,"publicIPv4":0.005,"monitoring":0,"daemonSets":0.01}`))
	launching := create(t, planned(`{"instance":0.0384,"volumes":0.002192,"publicIPv4":0.005,"monitoring":0,"daemonSets":0.0016}`))
	create(t, nodeClaim("prices", nil)) // no price: left out

	priceOf := func() *karpv1.Price { return get(t, "prices").Status.Price }
	want := &karpv1.Price{PerHour: "0.154384", Instance: "0.1284", Volumes: "0.004384", PublicIPv4: "0.01", DaemonSets: "0.0116"}
	eventually(t, func() bool { return cmp.Equal(want, priceOf()) })
	if diff := cmp.Diff(want, priceOf()); diff != "" {
		t.Fatalf("planned: status.price (-want +got):\n%s", diff)
	}

	// Launched as a dearer type: its price as launched counts.
	launching.Status.Price = &karpv1.Price{PerHour: "0.087192", Instance: "0.076", Volumes: "0.002192", PublicIPv4: "0.005", DaemonSets: "0.004"}
	if err := kube.Status().Update(context.Background(), launching); err != nil {
		t.Fatal(err)
	}
	want = &karpv1.Price{PerHour: "0.194384", Instance: "0.166", Volumes: "0.004384", PublicIPv4: "0.01", DaemonSets: "0.014"}
	eventually(t, func() bool { return cmp.Equal(want, priceOf()) })
	if diff := cmp.Diff(want, priceOf()); diff != "" {
		t.Fatalf("launched: status.price (-want +got):\n%s", diff)
	}

	// The API server refuses a price that is not a decimal number, naming the field.
	launching.Status.Price = &karpv1.Price{PerHour: "$0.08"}
	err := kube.Status().Update(context.Background(), launching)
	if err == nil || !strings.Contains(err.Error(), "status.price.perHour") {
		t.Errorf("status.price.perHour $0.08: %v, want a refusal naming the field", err)
	}
}

func TestNodeClassReadyFollowsTheEC2NodeClass(t *testing.T) {
	startController(t)
	create(t, nodePool("follows", "late"))
	type cond struct{ Type, Status, Reason, Message string }
	steps := []struct {
		name   string
		change func(t *testing.T)
		want   []cond
	}{{
		name:   "the class does not exist",
		change: func(*testing.T) {},
		want: []cond{
			{"NodeClassReady", "False", "NodeClassNotFound", `EC2NodeClass "late" not found`},
			{"Ready", "False", "NodeClassNotFound", `EC2NodeClass "late" not found`},
			{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		},
	}, {
		name:   "the class exists but is not resolved yet",
		change: func(t *testing.T) { create(t, ec2NodeClass("late")) },
		want: []cond{
			{"NodeClassReady", "Unknown", "AwaitingNodeClass", `EC2NodeClass "late" has not been resolved yet`},
			{"Ready", "Unknown", "AwaitingNodeClass", `EC2NodeClass "late" has not been resolved yet`},
			{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		},
	}, {
		name: "its subnets cannot be resolved",
		change: func(t *testing.T) {
			setClassReady(t, "late", metav1.ConditionFalse, "no subnets match the subnetSelectorTerms")
		},
		want: []cond{
			{"NodeClassReady", "False", "NodeClassNotReady", `EC2NodeClass "late" is not ready: no subnets match the subnetSelectorTerms`},
			{"Ready", "False", "NodeClassNotReady", `EC2NodeClass "late" is not ready: no subnets match the subnetSelectorTerms`},
			{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		},
	}, {
		name: "nor its security groups",
		change: func(t *testing.T) {
			setClassReady(t, "late", metav1.ConditionFalse, "no security groups match the securityGroupSelectorTerms")
		},
		want: []cond{
			{"NodeClassReady", "False", "NodeClassNotReady", `EC2NodeClass "late" is not ready: no security groups match the securityGroupSelectorTerms`},
			{"Ready", "False", "NodeClassNotReady", `EC2NodeClass "late" is not ready: no security groups match the securityGroupSelectorTerms`},
			{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		},
	}, {
		name:   "the class becomes ready",
		change: func(t *testing.T) { setClassReady(t, "late", metav1.ConditionTrue, "") },
		want: []cond{
			{"NodeClassReady", "True", "NodeClassReady", ""},
			{"Ready", "True", "Ready", ""},
			{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		},
	}, {
		name: "the class stops being ready",
		change: func(t *testing.T) {
			setClassReady(t, "late", metav1.ConditionFalse, "no AMI matches the amiSelectorTerms")
		},
		want: []cond{
			{"NodeClassReady", "False", "NodeClassNotReady", `EC2NodeClass "late" is not ready: no AMI matches the amiSelectorTerms`},
			{"Ready", "False", "NodeClassNotReady", `EC2NodeClass "late" is not ready: no AMI matches the amiSelectorTerms`},
			{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		},
	}}
	for _, step := range steps {
		step.change(t)
		var got []cond
		eventually(t, func() bool {
			got = nil
			for _, c := range get(t, "follows").Status.Conditions {
				got = append(got, cond{c.Type, string(c.Status), c.Reason, c.Message})
			}
			sort.Slice(got, func(i, j int) bool { return got[i].Type < got[j].Type })
			return cmp.Equal(step.want, got)
		})
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Fatalf("%s: conditions (-want +got):\n%s", step.name, diff)
		}
	}

	// One event per turn to False, none when only the message changed while False. Events
	// reach the API server in order, so once the last has, any extra one would be there.
	last := `EC2NodeClass "late" is not ready: no AMI matches the amiSelectorTerms`
	want := []event{
		{Type: "Warning", Reason: ReasonNodeClassNotReady, Message: last, Count: 1},
		{Type: "Warning", Reason: ReasonNodeClassNotReady, Message: `EC2NodeClass "late" is not ready: no subnets match the subnetSelectorTerms`, Count: 1},
		{Type: "Warning", Reason: ReasonNodeClassNotReady, Message: `EC2NodeClass "late" not found`, Count: 1},
	}
	checkEvents(t, "follows", ReasonNodeClassNotReady, last, want)
}

func TestLimitsReachedIsRecordedOnceOnTheTransition(t *testing.T) {
	startController(t)
	readyClass(t, "limited")
	np := nodePool("limited", "limited")
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	create(t, np)
	steps := []struct {
		name     string
		capacity corev1.ResourceList
		want     map[string]string
	}{
		{"under the limits", resources("2", "4Gi"), map[string]string{"cpu": "2", "memory": "4Gi", "nodes": "1"}},
		{"at the cpu limit", resources("2", "4Gi"), map[string]string{"cpu": "4", "memory": "8Gi", "nodes": "2"}},
		{"over the cpu limit", resources("1", "1Gi"), map[string]string{"cpu": "5", "memory": "9Gi", "nodes": "3"}},
		{"at the memory limit", resources("0", "7Gi"), map[string]string{"cpu": "5", "memory": "16Gi", "nodes": "4"}},
	}
	for _, step := range steps {
		create(t, nodeClaim("limited", step.capacity))
		var got map[string]string
		eventually(t, func() bool {
			got = resourcesOf(t, "limited")
			return cmp.Equal(step.want, got)
		})
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Fatalf("%s: status.resources (-want +got):\n%s", step.name, diff)
		}
	}
	last := "NodePool limited reached its memory limit: 16Gi of 16Gi"
	want := []event{
		{Type: "Warning", Reason: ReasonLimitsReached, Message: "NodePool limited reached its cpu limit: 4 of 4", Count: 1},
		{Type: "Warning", Reason: ReasonLimitsReached, Message: last, Count: 1},
	}
	checkEvents(t, "limited", ReasonLimitsReached, last, want)
}

// event is what the tests compare of an Event.
type event struct {
	Type, Reason, Message string
	Count                 int32
}

// checkEvents waits for the event with message last on the NodePool, then compares every
// event with the reason. Events are matched by UID: a NodePool of an earlier run of the test
// had the same name.
func checkEvents(t *testing.T, nodePool, reason, last string, want []event) {
	t.Helper()
	var got []event
	eventually(t, func() bool {
		list := &corev1.EventList{}
		if err := kube.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		got = nil
		seen := false
		uid := get(t, nodePool).UID
		for _, e := range list.Items {
			if e.InvolvedObject.UID == uid && e.Reason == reason {
				got = append(got, event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count})
				seen = seen || e.Message == last
			}
		}
		sort.Slice(got, func(i, j int) bool { return got[i].Message < got[j].Message })
		return seen
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s events of NodePool %s (-want +got):\n%s", reason, nodePool, diff)
	}
}

func resources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

func nodePool(name, class string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class},
		}}},
	}
}

// nodeClaim is a NodeClaim of the NodePool, launched with capacity unless that is nil; a
// NodeClaim not launched requests 1500m of cpu, 1Gi of memory and 2 pods.
func nodeClaim(nodePool string, capacity corev1.ResourceList) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: nodePool + "-", Labels: map[string]string{karpv1.NodePoolLabelKey: nodePool}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nodePool},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("2"),
			}},
		},
		Status: karpv1.NodeClaimStatus{Capacity: capacity},
	}
}

func ec2NodeClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "NodeRole",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}
}

// readyClass creates a Ready EC2NodeClass.
func readyClass(t *testing.T, name string) {
	t.Helper()
	create(t, ec2NodeClass(name))
	setClassReady(t, name, metav1.ConditionTrue, "")
}

func setClassReady(t *testing.T, name string, status metav1.ConditionStatus, message string) {
	t.Helper()
	class := &awsv1.EC2NodeClass{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, class); err != nil {
		t.Fatal(err)
	}
	reason := "Resolved"
	if status != metav1.ConditionTrue {
		reason = "ResolutionFailed"
	}
	meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{Type: awsv1.ConditionTypeReady, Status: status, Reason: reason, Message: message})
	if err := kube.Status().Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
}

// create stores obj, and a NodeClaim's status too, which creation drops.
func create[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	ctx := context.Background()
	var capacity corev1.ResourceList
	if nc, ok := any(obj).(*karpv1.NodeClaim); ok {
		capacity = nc.Status.Capacity
	}
	if err := kube.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(ctx, obj) })
	if nc, ok := any(obj).(*karpv1.NodeClaim); ok && capacity != nil {
		launch(t, nc, capacity)
	}
	return obj
}

// launch gives a NodeClaim the capacity of its instance.
func launch(t *testing.T, nc *karpv1.NodeClaim, capacity corev1.ResourceList) {
	t.Helper()
	nc.Status.Capacity = capacity
	if err := kube.Status().Update(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, name string) *karpv1.NodePool {
	t.Helper()
	np := &karpv1.NodePool{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, np); err != nil {
		t.Fatal(err)
	}
	return np
}

func resourcesOf(t *testing.T, nodePool string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, q := range get(t, nodePool).Status.Resources {
		out[string(name)] = q.String()
	}
	return out
}

// eventually polls done until it holds or 20 seconds pass; the caller then reports what it saw.
func eventually(t *testing.T, done func() bool) {
	t.Helper()
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return done(), nil
	})
}
