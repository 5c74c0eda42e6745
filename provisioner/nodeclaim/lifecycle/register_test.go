package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// startController runs the lifecycle controller in a manager with the sidecar's indexes
// until the test ends. It launches nothing: the tests store NodeClaims already launched.
func startController(t *testing.T) {
	t.Helper()
	mgr := testenv.NewManager(t, restConfig)
	if err := nodeclaim.RegisterIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	c := NewController(mgr.GetClient(), nil, mgr.GetEventRecorderFor("tailor-provisioner"), clocktesting.NewFakeClock(time.Now()))
	if err := c.Register(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
}

// launchedClaim stores a NodeClaim as the launch leaves it: labelled and annotated, with the
// instance's provider ID and node name and the Launched condition.
func launchedClaim(t *testing.T, nc *karpv1.NodeClaim, providerID string) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	// The running controller may mark the launch as begun meanwhile: the status is written
	// on the latest version.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			return err
		}
		nc.Status.ProviderID, nc.Status.NodeName = providerID, nc.Name+".ec2.internal"
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, ReasonLaunched, "")
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, reasonNodeNotFound, messageNodeNotFound)
		return kube.Status().Update(ctx, nc)
	})
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// joinedNode stores the Node a kubelet registers for the instance. The API server taints
// it not-ready; a Ready one has its not-ready taint lifted, as the node lifecycle controller
// does.
func joinedNode(t *testing.T, node *corev1.Node, providerID string, ready bool) {
	t.Helper()
	ctx := context.Background()
	node.Spec.ProviderID = providerID
	if err := kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if !ready {
		return
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	if err := kube.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if err := kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// condition is a NodeClaim condition without its times and generation.
type condition struct{ Type, Status, Reason, Message string }

func conditionsOf(nc *karpv1.NodeClaim) []condition {
	var out []condition
	for _, c := range nc.Status.Conditions {
		out = append(out, condition{c.Type, string(c.Status), c.Reason, c.Message})
	}
	return out
}

// synced is what registration makes of a Node, and of its NodeClaim's conditions.
type synced struct {
	Labels      map[string]string
	Annotations map[string]string
	Taints      []corev1.Taint
	Owners      []metav1.OwnerReference
	Finalizers  []string
	Conditions  []condition
}

// eventuallySynced waits until the node and its NodeClaim read as want, and reports the
// last difference if they never do.
func eventuallySynced(t *testing.T, nodeName, claimName string, want synced) {
	t.Helper()
	var diff string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		node, nc := &corev1.Node{}, &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			return false, err
		}
		if err := kube.Get(ctx, client.ObjectKey{Name: claimName}, nc); err != nil {
			return false, err
		}
		got := synced{node.Labels, node.Annotations, node.Spec.Taints, node.OwnerReferences, node.Finalizers, conditionsOf(nc)}
		diff = cmp.Diff(want, got)
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("node %s and NodeClaim %s (-want +got):\n%s", nodeName, claimName, diff)
	}
}

// TestRegistrationSyncsTheNodeClaimOntoItsNode registers Nodes as kubelets do and checks
// what registration makes of them, as Karpenter v1's: the NodeClaim's labels (its template's,
// those of its single-valued requirements and of the instance) and annotations (its
// template's and the hashes, not Tailor's bookkeeping) override the node's, its taints and
// startup taints are added unless the node says it manages its own, the unregistered taint
// goes, and the node is owned by the NodeClaim and held by the termination finalizer.
func TestRegistrationSyncsTheNodeClaimOntoItsNode(t *testing.T) {
	startController(t)
	unregistered := karpv1.UnregisteredNoExecuteTaint
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	agent := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}
	kubelets := map[string]string{corev1.LabelHostname: "ip-10-0-0-1", corev1.LabelArchStable: "amd64"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	launchedConditions := func(initialized condition, ready condition) []condition {
		return []condition{
			{"Launched", "True", "Launched", ""},
			{"Registered", "True", "Registered", ""},
			initialized,
			ready,
		}
	}

	tests := []struct {
		name string
		// claimLabels, claimAnnotations and the taints are the NodeClaim's, as the
		// provisioner makes them from the NodePool template and the launch adds to them.
		claimLabels      map[string]string
		claimAnnotations map[string]string
		taints, startup  []corev1.Taint
		// nodeLabels, nodeAnnotations and nodeTaints are the kubelet's, from its flags; the
		// API server adds the not-ready taint, lifted once the node is ready.
		nodeLabels      map[string]string
		nodeAnnotations map[string]string
		nodeTaints      []corev1.Taint
		ready           bool
		want            synced
	}{
		{
			name: "template labels and annotations reach the node, the NodeClaim's values win",
			claimLabels: map[string]string{
				"team": "payments", karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: "spot",
				corev1.LabelInstanceTypeStable: "m7i.large", corev1.LabelTopologyZone: "us-east-1a",
			},
			claimAnnotations: map[string]string{
				"example.com/cost-center": "1234", karpv1.DoNotDisruptAnnotationKey: "true",
				karpv1.NodePoolHashAnnotationKey: "42", karpv1.NodePoolHashVersionAnnotationKey: "v3",
				awsv1.EC2NodeClassHashAnnotationKey: "7", "tailor.sh/planned-pods": `[{"name":"web-0"}]`,
				awsv1.LaunchTemplateAnnotationKey: "tailor-abc",
			},
			nodeLabels:      with(kubelets, "team", "kubelet-default"),
			nodeAnnotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			nodeTaints:      []corev1.Taint{unregistered},
			ready:           true,
			want: synced{
				Labels: with(kubelets, "team", "payments", karpv1.NodePoolLabelKey, "default", karpv1.CapacityTypeLabelKey, "spot",
					corev1.LabelInstanceTypeStable, "m7i.large", corev1.LabelTopologyZone, "us-east-1a",
					karpv1.NodeRegisteredLabelKey, "true", karpv1.NodeInitializedLabelKey, "true"),
				Annotations: map[string]string{
					"node.alpha.kubernetes.io/ttl": "0", "example.com/cost-center": "1234", karpv1.DoNotDisruptAnnotationKey: "true",
					karpv1.NodePoolHashAnnotationKey: "42", karpv1.NodePoolHashVersionAnnotationKey: "v3", awsv1.EC2NodeClassHashAnnotationKey: "7",
				},
				Conditions: launchedConditions(condition{"Initialized", "True", "Initialized", ""}, condition{"Ready", "True", "Ready", ""}),
			},
		},
		{
			name:        "taints and startup taints the kubelet did not register with are added, its own stay",
			claimLabels: map[string]string{karpv1.NodePoolLabelKey: "gpu"},
			taints:      []corev1.Taint{gpu, {Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}},
			startup:     []corev1.Taint{agent},
			nodeLabels:  kubelets,
			nodeTaints:  []corev1.Taint{unregistered, {Key: "dedicated", Value: "kubelet", Effect: corev1.TaintEffectNoSchedule}},
			ready:       true,
			want: synced{
				Labels: with(kubelets, karpv1.NodePoolLabelKey, "gpu", karpv1.NodeRegisteredLabelKey, "true"),
				Taints: []corev1.Taint{{Key: "dedicated", Value: "kubelet", Effect: corev1.TaintEffectNoSchedule}, gpu, agent},
				Conditions: launchedConditions(
					condition{"Initialized", "Unknown", "StartupTaintsExist", `StartupTaint "example.com/agent-not-ready:NoExecute" still exists`},
					condition{"Ready", "Unknown", "ReconcilingDependents", "Initialized=Unknown"}),
			},
		},
		{
			name:        "a node labelled do-not-sync-taints keeps its taints, without the unregistered one",
			claimLabels: map[string]string{karpv1.NodePoolLabelKey: "custom"},
			taints:      []corev1.Taint{gpu},
			startup:     []corev1.Taint{agent},
			nodeLabels:  with(kubelets, karpv1.NodeDoNotSyncTaintsLabelKey, "true"),
			nodeTaints:  []corev1.Taint{unregistered, {Key: "example.com/custom", Effect: corev1.TaintEffectNoSchedule}},
			want: synced{
				Labels: with(kubelets, karpv1.NodeDoNotSyncTaintsLabelKey, "true", karpv1.NodePoolLabelKey, "custom", karpv1.NodeRegisteredLabelKey, "true"),
				Taints: []corev1.Taint{{Key: "example.com/custom", Effect: corev1.TaintEffectNoSchedule}, notReady},
				Conditions: launchedConditions(
					condition{"Initialized", "Unknown", "NodeNotReady", "Node status is NotReady"},
					condition{"Ready", "Unknown", "ReconcilingDependents", "Initialized=Unknown"}),
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providerID := fmt.Sprintf("aws:///us-east-1a/i-00000000000005%03d", i)
			name := fmt.Sprintf("sync-%d", i)
			// The node first, so that registration finds it as the kubelet left it.
			joinedNode(t, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name + ".ec2.internal", Labels: tt.nodeLabels, Annotations: tt.nodeAnnotations},
				Spec:       corev1.NodeSpec{Taints: tt.nodeTaints},
			}, providerID, tt.ready)
			nc := launchedClaim(t, &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tt.claimLabels, Annotations: tt.claimAnnotations},
				Spec:       karpv1.NodeClaimSpec{Taints: tt.taints, StartupTaints: tt.startup},
			}, providerID)
			tt.want.Owners = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptr.To(true)}}
			tt.want.Finalizers = []string{karpv1.TerminationFinalizer}
			eventuallySynced(t, nc.Status.NodeName, nc.Name, tt.want)
		})
	}
}

// TestRegistrationRefusesTwoNodesOfOneInstance: two Nodes with the NodeClaim's provider ID
// register neither, and say so on the NodeClaim as Karpenter does.
func TestRegistrationRefusesTwoNodesOfOneInstance(t *testing.T) {
	const providerID = "aws:///us-east-1a/i-0000000000000dup"
	for _, name := range []string{"twice-a", "twice-b"} {
		joinedNode(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, providerID, false)
	}
	nc := launchedClaim(t, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "twice"}}, providerID)
	// Started once both nodes are stored, so that its cache holds both from the start.
	startController(t)
	want := []condition{
		{"Launched", "True", "Launched", ""},
		{"Registered", "False", "MultipleNodesFound", "Invariant violated, matched multiple nodes"},
		{"Initialized", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
		{"Ready", "False", "UnhealthyDependents", "Registered=False, Initialized=Unknown"},
	}
	var diff string
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
			return false, err
		}
		diff = cmp.Diff(want, conditionsOf(got))
		return diff == "", nil
	}); err != nil {
		t.Fatalf("conditions (-want +got):\n%s", diff)
	}
	for _, name := range []string{"twice-a", "twice-b"} {
		node := &corev1.Node{}
		if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, node); err != nil {
			t.Fatal(err)
		}
		if _, ok := node.Labels[karpv1.NodeRegisteredLabelKey]; ok {
			t.Errorf("node %s was registered", name)
		}
	}
}
