package drift

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var (
	cfg  *rest.Config
	kube client.Client
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	os.Exit(testenv.Run(m, func(c *rest.Config) error {
		cfg = c
		var err error
		kube, err = client.New(cfg, client.Options{Scheme: apischeme.New()})
		return err
	}))
}

// startController runs the controller in a manager, as the sidecar does, until the test ends.
func startController(t *testing.T) {
	t.Helper()
	mgr := testenv.NewManager(t, cfg)
	if err := NewController(mgr.GetClient()).Register(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
}

func ami(id, arch string) awsv1.AMI {
	return awsv1.AMI{ID: id, Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}}
}

// setAMIs makes the class resolve to amis.
func setAMIs(t *testing.T, name string, amis ...awsv1.AMI) {
	t.Helper()
	class := &awsv1.EC2NodeClass{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, class); err != nil {
		t.Fatal(err)
	}
	class.Status.AMIs = amis
	if err := kube.Status().Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
}

// fixture stores an EC2NodeClass resolving to ami-1 (amd64), a NodePool using it, and an
// amd64 NodeClaim of that NodePool launched on ami-1 from its current template.
func fixture(t *testing.T, name string) (*karpv1.NodePool, *karpv1.NodeClaim) {
	t.Helper()
	ctx := context.Background()
	class := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "NodeRole",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}
	ref := &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: name}
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			Requirements: reqs, NodeClassRef: ref, ExpireAfter: karpv1.MustParseNillableDuration("720h"),
		}}},
	}
	for _, obj := range []client.Object{class, np} {
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(ctx, obj) })
	}
	setAMIs(t, name, ami("ami-1", "amd64"))
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: name + "-",
			Labels:       map[string]string{karpv1.NodePoolLabelKey: name, corev1.LabelArchStable: "amd64"},
			Annotations:  map[string]string{karpv1.NodePoolHashAnnotationKey: provisioning.TemplateHash(np)},
		},
		Spec: karpv1.NodeClaimSpec{Requirements: reqs, NodeClassRef: ref, ExpireAfter: np.Spec.Template.Spec.ExpireAfter},
	}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(ctx, nc) })
	nc.Status.ProviderID, nc.Status.ImageID = "aws:///us-east-1a/i-0000000000000df01", "ami-1"
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	return np, nc
}

// setNetwork makes the class resolve to subnets and security groups.
func setNetwork(t *testing.T, name string, subnets, groups []string) {
	t.Helper()
	class := &awsv1.EC2NodeClass{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, class); err != nil {
		t.Fatal(err)
	}
	class.Status.Subnets, class.Status.SecurityGroups = nil, nil
	for _, s := range subnets {
		class.Status.Subnets = append(class.Status.Subnets, awsv1.Subnet{ID: s, Zone: "us-east-1a"})
	}
	for _, g := range groups {
		class.Status.SecurityGroups = append(class.Status.SecurityGroups, awsv1.SecurityGroup{ID: g})
	}
	if err := kube.Status().Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
}

// drifted is the Drifted condition's status and reason, "" when it has none.
func drifted(t *testing.T, nc *karpv1.NodeClaim) string {
	t.Helper()
	got := &karpv1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeDrifted); c != nil {
		return string(c.Status) + " " + c.Reason
	}
	return ""
}

func eventually(t *testing.T, nc *karpv1.NodeClaim, want, when string) {
	t.Helper()
	var got string
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		got = drifted(t, nc)
		return got == want, nil
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: Drifted (-want +got):\n%s", when, diff)
	}
}

func updateTemplate(t *testing.T, np *karpv1.NodePool, change func(*karpv1.NodeClaimTemplate)) {
	t.Helper()
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	change(&np.Spec.Template)
	if err := kube.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
}

func TestAChangedNodePoolTemplateDriftsItsNodeClaimsUntilReverted(t *testing.T) {
	np, nc := fixture(t, "template")
	startController(t)

	// In line: no condition is written at all.
	time.Sleep(time.Second)
	if got := drifted(t, nc); got != "" {
		t.Fatalf("a NodeClaim made from the current template has Drifted %q", got)
	}
	updateTemplate(t, np, func(tmpl *karpv1.NodeClaimTemplate) { tmpl.ObjectMeta.Labels = map[string]string{"team": "payments"} })
	eventually(t, nc, "True NodePoolDrifted", "after the template gained a label")
	updateTemplate(t, np, func(tmpl *karpv1.NodeClaimTemplate) { tmpl.ObjectMeta.Labels = nil })
	eventually(t, nc, "False NotDrifted", "after the label was removed again")
}

func TestANewAMIForTheNodesArchitectureDriftsTheNodeClaim(t *testing.T) {
	_, nc := fixture(t, "ami")
	startController(t)

	// ami-1 now serves arm64 only: the amd64 node runs an AMI the class no longer picks.
	setAMIs(t, "ami", ami("ami-2", "amd64"), ami("ami-1", "arm64"))
	eventually(t, nc, "True AMIDrifted", "after the class resolved a new amd64 AMI")
	setAMIs(t, "ami", ami("ami-1", "amd64"), ami("ami-3", "arm64"))
	eventually(t, nc, "False NotDrifted", "after the class resolved ami-1 for amd64 again")
}

func TestASubnetOrSecurityGroupLeftOutDriftsTheNodeClaim(t *testing.T) {
	_, nc := fixture(t, "network")
	setNetwork(t, "network", []string{"subnet-a", "subnet-b"}, []string{"sg-1", "sg-2"})
	nc.Annotations[awsv1.SubnetAnnotationKey] = "subnet-a"
	nc.Annotations[awsv1.SecurityGroupsAnnotationKey] = "sg-1,sg-2"
	if err := kube.Update(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	startController(t)

	time.Sleep(time.Second)
	if got := drifted(t, nc); got != "" {
		t.Fatalf("a NodeClaim in the class's subnets and security groups has Drifted %q", got)
	}
	setNetwork(t, "network", []string{"subnet-b"}, []string{"sg-1", "sg-2"})
	eventually(t, nc, "True SubnetDrifted", "after the class stopped selecting the node's subnet")
	setNetwork(t, "network", []string{"subnet-a", "subnet-b"}, []string{"sg-2", "sg-1"})
	eventually(t, nc, "False NotDrifted", "after the class selected the subnet again, groups in another order")
	setNetwork(t, "network", []string{"subnet-a", "subnet-b"}, []string{"sg-1", "sg-3"})
	eventually(t, nc, "True SecurityGroupDrifted", "after the class replaced a security group")
}
