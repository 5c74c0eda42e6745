package drift

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
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

// fixture stores an EC2NodeClass resolving to ami-1 (amd64), a NodePool using it that
// allows the instance types given, and one amd64 spot NodeClaim of each type launched on
// ami-1 from the NodePool's current template and the class's current spec.
func fixture(t *testing.T, name string, types ...string) (*karpv1.NodePool, []*karpv1.NodeClaim) {
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
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types},
	}
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			Requirements: reqs, NodeClassRef: ref, ExpireAfter: karpv1.MustParseNillableDuration("720h"),
		}}},
	}
	// Hashed as the API server stored them, defaults included, as the launch sees them.
	for _, obj := range []client.Object{class, np} {
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(ctx, obj) })
	}
	setAMIs(t, name, ami("ami-1", "amd64"))
	var claims []*karpv1.NodeClaim
	for i, it := range types {
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName: name + "-",
				Labels: map[string]string{
					karpv1.NodePoolLabelKey: name, corev1.LabelArchStable: "amd64",
					karpv1.CapacityTypeLabelKey: "spot", corev1.LabelInstanceTypeStable: it,
				},
				Annotations: map[string]string{
					karpv1.NodePoolHashAnnotationKey:           np.Hash(),
					karpv1.NodePoolHashVersionAnnotationKey:    karpv1.NodePoolHashVersion,
					awsv1.EC2NodeClassHashAnnotationKey:        class.Hash(),
					awsv1.EC2NodeClassHashVersionAnnotationKey: awsv1.EC2NodeClassHashVersion,
				},
			},
			Spec: karpv1.NodeClaimSpec{Requirements: reqs, NodeClassRef: ref, ExpireAfter: np.Spec.Template.Spec.ExpireAfter},
		}
		if err := kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(ctx, nc) })
		nc.Status.ProviderID, nc.Status.ImageID = fmt.Sprintf("aws:///us-east-1a/i-%017x", i+1), "ami-1"
		if err := kube.Status().Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, nc)
	}
	return np, claims
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

func updateNodePool(t *testing.T, np *karpv1.NodePool, change func(*karpv1.NodePool)) {
	t.Helper()
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	change(np)
	if err := kube.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
}

func updateClass(t *testing.T, name string, change func(*awsv1.EC2NodeClassSpec)) {
	t.Helper()
	class := &awsv1.EC2NodeClass{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, class); err != nil {
		t.Fatal(err)
	}
	change(&class.Spec)
	if err := kube.Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
}

// expectDrifted waits for each NodeClaim's Drifted to be what want says for its instance
// type; one that should have none ("") must keep none for two seconds meanwhile.
func expectDrifted(t *testing.T, ncs []*karpv1.NodeClaim, want map[string]string, when string) {
	t.Helper()
	start := time.Now()
	for {
		got := map[string]string{}
		for _, nc := range ncs {
			it := nc.Labels[corev1.LabelInstanceTypeStable]
			got[it] = drifted(t, nc)
			if want[it] == "" && got[it] != "" {
				t.Fatalf("%s: %s has Drifted %q, want none", when, it, got[it])
			}
		}
		diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(_, v string) bool { return v == "" }))
		switch {
		case diff == "" && time.Since(start) >= 2*time.Second:
			return
		case time.Since(start) > 20*time.Second:
			t.Fatalf("%s: Drifted by instance type (-want +got):\n%s", when, diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAChangedNodePoolTemplateDriftsItsNodeClaimsUntilReverted(t *testing.T) {
	np, ncs := fixture(t, "template", "m5.large")
	nc := ncs[0]
	startController(t)

	// In line: no condition is written at all.
	time.Sleep(time.Second)
	if got := drifted(t, nc); got != "" {
		t.Fatalf("a NodeClaim made from the current template has Drifted %q", got)
	}
	updateNodePool(t, np, func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "payments"} })
	eventually(t, nc, "True NodePoolDrifted", "after the template gained a label")
	updateNodePool(t, np, func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = nil })
	eventually(t, nc, "False NotDrifted", "after the label was removed again")
}

func TestANewAMIForTheNodesArchitectureDriftsTheNodeClaim(t *testing.T) {
	_, ncs := fixture(t, "ami", "m5.large")
	nc := ncs[0]
	startController(t)

	// ami-1 now serves arm64 only: the amd64 node runs an AMI the class no longer picks.
	setAMIs(t, "ami", ami("ami-2", "amd64"), ami("ami-1", "arm64"))
	eventually(t, nc, "True AMIDrifted", "after the class resolved a new amd64 AMI")
	setAMIs(t, "ami", ami("ami-1", "amd64"), ami("ami-3", "arm64"))
	eventually(t, nc, "False NotDrifted", "after the class resolved ami-1 for amd64 again")
}

func TestASubnetOrSecurityGroupLeftOutDriftsTheNodeClaim(t *testing.T) {
	_, ncs := fixture(t, "network", "m5.large")
	nc := ncs[0]
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

func setInstanceTypes(types ...string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		for i, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable {
				np.Spec.Template.Spec.Requirements[i].Values = types
			}
		}
	}
}

func TestANodePoolChangeDriftsOnlyTheNodesItNoLongerDescribes(t *testing.T) {
	startController(t)
	taint := corev1.Taint{Key: "example.com/dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}
	for _, tt := range []struct {
		name   string
		change func(*karpv1.NodePool)
		// want is each instance type's Drifted condition, "" for none.
		want map[string]string
	}{
		{
			name:   "widened-requirements",
			change: setInstanceTypes("m5.large", "c5.large", "r5.large"),
			want:   map[string]string{"m5.large": "", "c5.large": ""},
		},
		{
			name:   "narrowed-requirements",
			change: setInstanceTypes("m5.large"),
			want:   map[string]string{"m5.large": "", "c5.large": "True RequirementsDrifted"},
		},
		{
			name: "requirement-on-a-label-the-nodes-lack",
			change: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyRegion, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1"}})
			},
			want: map[string]string{"m5.large": "", "c5.large": ""},
		},
		{
			name:   "template-label",
			change: func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "payments"} },
			want:   map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"},
		},
		{
			name: "template-annotation",
			change: func(np *karpv1.NodePool) {
				np.Spec.Template.ObjectMeta.Annotations = map[string]string{"example.com/owner": "payments"}
			},
			want: map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"},
		},
		{
			name:   "taint",
			change: func(np *karpv1.NodePool) { np.Spec.Template.Spec.Taints = []corev1.Taint{taint} },
			want:   map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"},
		},
		{
			name:   "startup-taint",
			change: func(np *karpv1.NodePool) { np.Spec.Template.Spec.StartupTaints = []corev1.Taint{taint} },
			want:   map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"},
		},
		{
			name:   "expire-after",
			change: func(np *karpv1.NodePool) { np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("48h") },
			want:   map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"},
		},
		{
			name: "termination-grace-period",
			change: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
			},
			want: map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"},
		},
		{
			name:   "node-class-ref",
			change: func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "another-class" },
			want:   map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"},
		},
		{
			name: "weight-limits-and-budgets",
			change: func(np *karpv1.NodePool) {
				np.Spec.Weight = ptr.To[int32](50)
				np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("100")}
				np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
			},
			want: map[string]string{"m5.large": "", "c5.large": ""},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			np, ncs := fixture(t, "pool-"+tt.name, "m5.large", "c5.large")
			expectDrifted(t, ncs, map[string]string{}, "before the change")
			updateNodePool(t, np, tt.change)
			expectDrifted(t, ncs, tt.want, "after the change")
		})
	}
}

func TestAnEC2NodeClassStaticFieldDriftsItsNodeClaims(t *testing.T) {
	startController(t)
	const drifted = "True NodeClassDrifted"
	for _, tt := range []struct {
		name   string
		change func(*awsv1.EC2NodeClassSpec)
		want   string
	}{
		{name: "user-data", change: func(s *awsv1.EC2NodeClassSpec) { s.UserData = ptr.To("echo hello") }, want: drifted},
		{name: "kubelet", change: func(s *awsv1.EC2NodeClassSpec) { s.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](20)} }, want: drifted},
		{name: "tags", change: func(s *awsv1.EC2NodeClassSpec) { s.Tags = map[string]string{"team": "payments"} }, want: drifted},
		{
			name: "block-device-mappings",
			change: func(s *awsv1.EC2NodeClassSpec) {
				size := resource.MustParse("100Gi")
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: &size}, RootVolume: true}}
			},
			want: drifted,
		},
		{name: "metadata-options", change: func(s *awsv1.EC2NodeClassSpec) { s.MetadataOptions.HTTPTokens = ptr.To("optional") }, want: drifted},
		{name: "detailed-monitoring", change: func(s *awsv1.EC2NodeClassSpec) { s.DetailedMonitoring = ptr.To(true) }, want: drifted},
		{name: "associate-public-ip-address", change: func(s *awsv1.EC2NodeClassSpec) { s.AssociatePublicIPAddress = ptr.To(true) }, want: drifted},
		{
			name:   "instance-store-policy",
			change: func(s *awsv1.EC2NodeClassSpec) { s.InstanceStorePolicy = ptr.To(awsv1.InstanceStorePolicyRAID0) },
			want:   drifted,
		},
		{name: "context", change: func(s *awsv1.EC2NodeClassSpec) { s.Context = ptr.To("cr-context") }, want: drifted},
		{name: "ami-family", change: func(s *awsv1.EC2NodeClassSpec) { s.AMIFamily = ptr.To(awsv1.AMIFamilyCustom) }, want: drifted},
		// The family the alias implies, spelled out, is the same class.
		{name: "ami-family-of-the-alias", change: func(s *awsv1.EC2NodeClassSpec) { s.AMIFamily = ptr.To(awsv1.AMIFamilyAL2023) }},
		// Selector terms drift a node by what they resolve to, in the class's status.
		{
			name: "selector-terms",
			change: func(s *awsv1.EC2NodeClassSpec) {
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20250101"}}
				s.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-0a"}}
				s.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "nodes"}}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ncs := fixture(t, "class-"+tt.name, "m5.large")
			expectDrifted(t, ncs, map[string]string{}, "before the change")
			updateClass(t, "class-"+tt.name, tt.change)
			expectDrifted(t, ncs, map[string]string{"m5.large": tt.want}, "after the change")
		})
	}
}

func TestAHashOfAnotherVersionIsStampedAgainInsteadOfDrifting(t *testing.T) {
	np, ncs := fixture(t, "version", "m5.large", "c5.large")
	class := &awsv1.EC2NodeClass{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "version"}, class); err != nil {
		t.Fatal(err)
	}
	// m5.large carries hashes of an older version; c5.large was made before hashes had
	// versions, with the hash of the whole template and none for its class.
	ncs[0].Annotations[karpv1.NodePoolHashAnnotationKey] = "0123456789abcdef"
	ncs[0].Annotations[karpv1.NodePoolHashVersionAnnotationKey] = "v0"
	ncs[0].Annotations[awsv1.EC2NodeClassHashAnnotationKey] = "fedcba9876543210"
	ncs[0].Annotations[awsv1.EC2NodeClassHashVersionAnnotationKey] = "v0"
	ncs[1].Annotations[karpv1.NodePoolHashAnnotationKey] = "0123456789abcdef"
	delete(ncs[1].Annotations, karpv1.NodePoolHashVersionAnnotationKey)
	delete(ncs[1].Annotations, awsv1.EC2NodeClassHashAnnotationKey)
	delete(ncs[1].Annotations, awsv1.EC2NodeClassHashVersionAnnotationKey)
	for _, nc := range ncs {
		if err := kube.Update(context.Background(), nc); err != nil {
			t.Fatal(err)
		}
	}
	startController(t)

	want := map[string]string{
		karpv1.NodePoolHashAnnotationKey:           np.Hash(),
		karpv1.NodePoolHashVersionAnnotationKey:    karpv1.NodePoolHashVersion,
		awsv1.EC2NodeClassHashAnnotationKey:        class.Hash(),
		awsv1.EC2NodeClassHashVersionAnnotationKey: awsv1.EC2NodeClassHashVersion,
	}
	for _, nc := range ncs {
		var got map[string]string
		_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			current := &karpv1.NodeClaim{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), current); err != nil {
				return false, err
			}
			got = map[string]string{}
			for k := range want {
				got[k] = current.Annotations[k]
			}
			return cmp.Equal(want, got), nil
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("hash annotations of %s (-want +got):\n%s", nc.Labels[corev1.LabelInstanceTypeStable], diff)
		}
	}
	expectDrifted(t, ncs, map[string]string{}, "after stamping")
	// The stamped hashes are the ones static drift compares with.
	updateNodePool(t, np, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Effect: corev1.TaintEffectNoSchedule}}
	})
	expectDrifted(t, ncs, map[string]string{"m5.large": "True NodePoolDrifted", "c5.large": "True NodePoolDrifted"}, "after a taint was added")
}
