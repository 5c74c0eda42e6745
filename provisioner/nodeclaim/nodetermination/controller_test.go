package nodetermination

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drain"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/lifecycle"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var (
	cfg  *rest.Config
	kube client.Client
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	testenv.Main(m, &cfg, &kube)
}

// cloud is an instance that is already gone when asked to terminate; it records what it
// was asked and what was drained. Its nodes have no volumes attached, unless withVolumes
// has startControllers give it a drainer that reads the VolumeAttachments through the
// controllers' cache.
type cloud struct {
	mu          sync.Mutex
	terminated  []string
	drained     []string
	withVolumes bool
	volumes     *drain.Drainer
}

func (c *cloud) Delete(_ context.Context, nc *karpv1.NodeClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.terminated = append(c.terminated, nc.Status.ProviderID)
	return cloudprovider.NewNodeClaimNotFoundError(errors.New("terminated"))
}

// Get reports every instance live: these drains are never held by a budget.
func (c *cloud) Get(_ context.Context, providerID string) (*karpv1.NodeClaim, error) {
	return &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: providerID}}, nil
}

func (c *cloud) Drain(_ context.Context, node string, _, _ time.Time) (drain.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drained = append(c.drained, node)
	return drain.Result{}, nil
}

func (c *cloud) VolumesAttached(ctx context.Context, node string) ([]string, error) {
	if c.volumes == nil {
		return nil, nil
	}
	return c.volumes.VolumesAttached(ctx, node)
}

func (c *cloud) calls() (terminated, drained []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.terminated...), append([]string(nil), c.drained...)
}

// startControllers runs registration (lifecycle), this controller and termination in one
// manager with the sidecar's indexes, until the test ends.
func startControllers(t *testing.T, c *cloud) {
	t.Helper()
	mgr := testenv.NewManager(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	if err := nodeclaim.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	if c.withVolumes {
		c.volumes = drain.New(mgr.GetClient(), mgr.GetAPIReader(), kubernetes.NewForConfigOrDie(cfg))
	}
	recorder := mgr.GetEventRecorderFor("tailor-provisioner")
	clk := clocktesting.NewFakeClock(time.Now())
	for _, r := range []interface{ Register(ctrl.Manager) error }{
		lifecycle.NewController(mgr.GetClient(), nil, recorder, clk),
		NewController(mgr.GetClient(), recorder),
		termination.NewController(mgr.GetClient(), mgr.GetAPIReader(), c, c, recorder, clk),
	} {
		if err := r.Register(mgr); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	// The drainer reads VolumeAttachments through the cache, as the controllers do once
	// it has synced.
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the manager's cache did not sync")
	}
}

// launched stores a NodeClaim whose instance runs as providerID, awaiting node name.
func launched(t *testing.T, name, providerID, node string) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		},
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID, nc.Status.NodeName = providerID, node
	nodeclaim.SetCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, lifecycle.ReasonLaunched, "")
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func joined(t *testing.T, name, providerID string, finalizers ...string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}},
	}
	if err := kube.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	return node
}

func eventually(t *testing.T, what string, done func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return done(), nil
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func gone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}
}

func TestDeletingANodeTerminatesItsNodeClaimThenTheNodeGoes(t *testing.T) {
	c := &cloud{}
	const providerID = "aws:///us-east-1a/i-0000000000000d001"
	nc := launched(t, "delete-node", providerID, "ip-10-0-0-1.ec2.internal")
	node := joined(t, "ip-10-0-0-1.ec2.internal", providerID)
	startControllers(t, c)
	ctx := context.Background()

	eventually(t, "registration puts the termination finalizer on the node", func() bool {
		return kube.Get(ctx, client.ObjectKeyFromObject(node), node) == nil && controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer)
	})
	if err := kube.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NodeClaim is terminated and released", gone(nc))
	eventually(t, "the node is released and gone", gone(node))
	terminated, drained := c.calls()
	if diff := cmp.Diff([]string{providerID}, terminated); diff != "" {
		t.Errorf("instances terminated (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{node.Name}, drained); diff != "" {
		t.Errorf("nodes drained (-want +got):\n%s", diff)
	}
}

func TestANodeWithoutNodeClaimIsReleasedAtOnce(t *testing.T) {
	c := &cloud{}
	node := joined(t, "ip-10-0-0-2.ec2.internal", "aws:///us-east-1a/i-0000000000000d002", karpv1.TerminationFinalizer)
	startControllers(t, c)
	if err := kube.Delete(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node is released and gone", gone(node))
	if terminated, drained := c.calls(); len(terminated)+len(drained) != 0 {
		t.Errorf("terminated %v and drained %v for a node without NodeClaim", terminated, drained)
	}
}

func TestANodeWhoseNodeClaimWentWithoutItIsReleased(t *testing.T) {
	c := &cloud{}
	const providerID = "aws:///us-east-1a/i-0000000000000d003"
	node := joined(t, "ip-10-0-0-3.ec2.internal", providerID, karpv1.TerminationFinalizer)
	// The NodeClaim names another node, so its termination does not touch this one.
	nc := launched(t, "other-node", providerID, "ip-10-0-0-99.ec2.internal")
	startControllers(t, c)
	ctx := context.Background()
	if err := kube.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NodeClaim is terminated and released", gone(nc))
	eventually(t, "the node is released once its NodeClaim is gone", gone(node))
}

// attachment stores a VolumeAttachment of a persistent volume to a node, attached or not.
func attachment(t *testing.T, name, node, pv string, attached bool) *storagev1.VolumeAttachment {
	t.Helper()
	ctx := context.Background()
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "ebs.csi.aws.com",
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
		},
	}
	if err := kube.Create(ctx, va); err != nil {
		t.Fatal(err)
	}
	va.Status.Attached = attached
	if err := kube.Status().Update(ctx, va); err != nil {
		t.Fatal(err)
	}
	return va
}

func TestTheInstanceWaitsForTheNodesVolumesToDetach(t *testing.T) {
	c := &cloud{withVolumes: true}
	const providerID = "aws:///us-east-1a/i-0000000000000d004"
	const nodeName = "ip-10-0-0-4.ec2.internal"
	nc := launched(t, "volumes", providerID, nodeName)
	node := joined(t, nodeName, providerID)
	data := attachment(t, "data", nodeName, "pv-data", true)
	// Neither a volume detached already nor one attached to another node holds it.
	attachment(t, "detached", nodeName, "pv-detached", false)
	attachment(t, "elsewhere", "ip-10-0-0-5.ec2.internal", "pv-elsewhere", true)
	startControllers(t, c)
	ctx := context.Background()

	attached, err := c.volumes.VolumesAttached(ctx, nodeName)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"pv-data"}, attached); diff != "" {
		t.Errorf("volumes attached to %s (-want +got):\n%s", nodeName, diff)
	}
	eventually(t, "registration puts the termination finalizer on the node", func() bool {
		return kube.Get(ctx, client.ObjectKeyFromObject(node), node) == nil && controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer)
	})
	if err := kube.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	// Each pass drains, then looks at the volumes: a second drain means the first pass
	// found pv-data attached and waited.
	eventually(t, "the node is drained twice, or its instance terminated", func() bool {
		terminated, drained := c.calls()
		return len(drained) >= 2 || len(terminated) > 0
	})
	if terminated, _ := c.calls(); len(terminated) != 0 {
		t.Fatalf("instances %v terminated while pv-data was attached to the node", terminated)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
		t.Fatalf("the NodeClaim must stay while its node's volume is attached: %v", err)
	}

	data.Status.Attached = false
	if err := kube.Status().Update(ctx, data); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NodeClaim is terminated and released once the volume detached", gone(nc))
	eventually(t, "the node is released and gone", gone(node))
	if terminated, _ := c.calls(); !cmp.Equal([]string{providerID}, terminated) {
		t.Errorf("instances terminated: %v, want %s", terminated, providerID)
	}
}
