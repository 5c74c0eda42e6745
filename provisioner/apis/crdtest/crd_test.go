// Package crdtest checks the generated CRDs on a real API server: valid Karpenter v1
// manifests are accepted with their defaults, invalid ones are refused with messages that
// name the field and the fix.
package crdtest

import (
	"context"
	"fmt"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

func create(t *testing.T, manifest string) error {
	t.Helper()
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := localstack.Decode([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := kube.Create(context.Background(), o); err != nil {
			return err
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}
	return nil
}

const nodeClassRef = `
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}`

func nodePool(name, spec string) string {
	return fmt.Sprintf("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: %s}\nspec:\n%s", name, spec)
}

func TestNodePoolValidation(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		wantErr []string
	}{
		{
			name: "the Karpenter getting-started NodePool is accepted",
			spec: `  template:
    spec:
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: kubernetes.io/os, operator: In, values: [linux]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2"]}` + nodeClassRef + `
      expireAfter: 720h
  limits: {cpu: 1000}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m`,
		},
		{
			name: "Gte, Lte, minValues and budgets with schedules are accepted",
			spec: `  weight: 50
  template:
    metadata:
      labels: {team: payments}
    spec:
      requirements:
      - {key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: ["4"]}
      - {key: karpenter.k8s.aws/instance-cpu, operator: Lte, values: ["32"]}
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, m6i, m7i], minValues: 2}` + nodeClassRef + `
  disruption:
    consolidateAfter: Never
    budgets:
    - nodes: "20%"
    - nodes: "0"
      schedule: "0 9 * * mon-fri"
      duration: 8h
      reasons: [Drifted]`,
		},
		{
			name:    "In without values names the fix",
			spec:    "  template:\n    spec:\n      requirements:\n      - {key: team, operator: In}" + nodeClassRef,
			wantErr: []string{"spec.template.spec.requirements[0]", "operator In needs at least one value: add values or use Exists"},
		},
		{
			name:    "Gt takes exactly one integer",
			spec:    "  template:\n    spec:\n      requirements:\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [\"2\", \"4\"]}" + nodeClassRef,
			wantErr: []string{"spec.template.spec.requirements[0]", "operators Gt, Lt, Gte and Lte take exactly one non-negative integer in values"},
		},
		{
			name:    "minValues above the number of values is refused",
			spec:    "  template:\n    spec:\n      requirements:\n      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5], minValues: 3}" + nodeClassRef,
			wantErr: []string{"spec.template.spec.requirements[0]", "minValues is larger than the number of values"},
		},
		{
			name:    "an unknown operator is refused",
			spec:    "  template:\n    spec:\n      requirements:\n      - {key: team, operator: Near, values: [a]}" + nodeClassRef,
			wantErr: []string{"spec.template.spec.requirements[0].operator", `Unsupported value: "Near"`},
		},
		{
			name:    "kubernetes.io/hostname cannot be required",
			spec:    "  template:\n    spec:\n      requirements:\n      - {key: kubernetes.io/hostname, operator: In, values: [a]}" + nodeClassRef,
			wantErr: []string{"spec.template.spec.requirements[0].key", "kubernetes.io/hostname is set by the kubelet"},
		},
		{
			name:    "template labels in the karpenter.sh domain are refused",
			spec:    "  template:\n    metadata:\n      labels: {karpenter.sh/nodepool: x}\n    spec:\n      requirements: []" + nodeClassRef,
			wantErr: []string{"spec.template.metadata.labels", "labels in the karpenter.sh domain are set by Tailor"},
		},
		{
			name:    "a budget schedule needs a duration",
			spec:    "  template:\n    spec:\n      requirements: []" + nodeClassRef + "\n  disruption:\n    consolidateAfter: 30s\n    budgets:\n    - {nodes: \"1\", schedule: \"@daily\"}",
			wantErr: []string{"spec.disruption.budgets", "a budget with schedule needs duration"},
		},
		{
			name:    "budget nodes must be a count or a percentage",
			spec:    "  template:\n    spec:\n      requirements: []" + nodeClassRef + "\n  disruption:\n    consolidateAfter: 30s\n    budgets:\n    - {nodes: \"110%\"}",
			wantErr: []string{"spec.disruption.budgets[0].nodes", "should match"},
		},
		{
			name:    "weight is between 1 and 100",
			spec:    "  weight: 101\n  template:\n    spec:\n      requirements: []" + nodeClassRef,
			wantErr: []string{"spec.weight", "should be less than or equal to 100"},
		},
		{
			name: "a static NodePool with limits.nodes is accepted",
			spec: "  replicas: 3\n  limits: {nodes: 5}\n  template:\n    spec:\n      requirements: []" + nodeClassRef,
		},
		{
			name:    "a static NodePool has no weight",
			spec:    "  replicas: 3\n  weight: 10\n  template:\n    spec:\n      requirements: []" + nodeClassRef,
			wantErr: []string{"spec", "a static NodePool (spec.replicas) has no weight: remove spec.weight"},
		},
		{
			name:    "a static NodePool takes no cpu limit",
			spec:    "  replicas: 3\n  limits: {cpu: 100, nodes: 5}\n  template:\n    spec:\n      requirements: []" + nodeClassRef,
			wantErr: []string{"spec", "a static NodePool (spec.replicas) is limited by limits.nodes only: remove the other limits"},
		},
		{
			name:    "replicas are not negative",
			spec:    "  replicas: -1\n  template:\n    spec:\n      requirements: []" + nodeClassRef,
			wantErr: []string{"spec.replicas", "should be greater than or equal to 0"},
		},
		{
			name:    "the node class reference needs a kind",
			spec:    "  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: \"\", name: default}",
			wantErr: []string{"spec.template.spec.nodeClassRef.kind", "kind must be set, for example EC2NodeClass"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := create(t, nodePool(fmt.Sprintf("pool-%d", i), tt.spec))
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestNodePoolDefaults(t *testing.T) {
	if err := create(t, nodePool("defaults", "  template:\n    spec:\n      requirements: []"+nodeClassRef)); err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("karpenter.sh/v1")
	got.SetKind("NodePool")
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "defaults"}, got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"consolidateAfter":    "0s",
		"consolidationPolicy": "WhenEmptyOrUnderutilized",
		"budgets":             []any{map[string]any{"nodes": "10%"}},
	}
	disruption, _, _ := unstructured.NestedMap(got.Object, "spec", "disruption")
	if fmt.Sprint(want) != fmt.Sprint(disruption) {
		t.Errorf("spec.disruption = %v, want %v", disruption, want)
	}
	expire, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "expireAfter")
	if expire != "720h" {
		t.Errorf("spec.template.spec.expireAfter = %q, want 720h", expire)
	}
}

func nodeClass(name, spec string) string {
	return fmt.Sprintf("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: %s}\nspec:\n%s", name, spec)
}

const selectors = `
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]`

func TestEC2NodeClassValidation(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		wantErr []string
	}{
		{
			name: "the Karpenter getting-started EC2NodeClass is accepted",
			spec: "  role: KarpenterNodeRole-demo\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + `
  tags: {team: payments}
  kubelet: {maxPods: 110, systemReserved: {cpu: 100m, memory: 100Mi}, evictionHard: {memory.available: 5%}}
  blockDeviceMappings:
  - deviceName: /dev/xvda
    ebs: {volumeSize: 100Gi, volumeType: gp3, encrypted: true}
    rootVolume: true`,
		},
		{
			name:    "role and instanceProfile together are refused",
			spec:    "  role: r\n  instanceProfile: p\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors,
			wantErr: []string{"spec", "set exactly one of role or instanceProfile"},
		},
		{
			name:    "neither role nor instanceProfile is refused",
			spec:    "  amiSelectorTerms: [{alias: al2023@latest}]" + selectors,
			wantErr: []string{"spec", "set exactly one of role or instanceProfile"},
		},
		{
			name:    "an alias cannot be combined with an id",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest, id: ami-123}]" + selectors,
			wantErr: []string{"spec.amiSelectorTerms", "an AMI selector term with alias cannot also have id"},
		},
		{
			name:    "an unknown alias family is refused",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: ubuntu@latest}]" + selectors,
			wantErr: []string{"spec.amiSelectorTerms[0].alias", "alias family must be al2023, al2, bottlerocket, windows2019 or windows2022"},
		},
		{
			name: "windows2022@latest is accepted",
			spec: "  role: r\n  amiSelectorTerms: [{alias: windows2022@latest}]" + selectors,
		},
		{
			name: "windows2019@latest is accepted",
			spec: "  role: r\n  amiSelectorTerms: [{alias: windows2019@latest}]" + selectors,
		},
		{
			name: "amiFamily Windows2022 with an id term is accepted",
			spec: "  role: r\n  amiFamily: Windows2022\n  amiSelectorTerms: [{id: ami-0123}]" + selectors,
		},
		{
			name:    "a pinned Windows alias is refused, naming the fix",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: windows2022@2026.11.12}]" + selectors,
			wantErr: []string{"spec.amiSelectorTerms[0].alias", "a Windows alias takes only the version latest (EKS publishes no pinned Windows releases): write windows2019@latest or windows2022@latest"},
		},
		{
			name:    "an unknown amiFamily names the values it takes",
			spec:    "  role: r\n  amiFamily: Windows2025\n  amiSelectorTerms: [{id: ami-0123}]" + selectors,
			wantErr: []string{"spec.amiFamily", `supported values: "AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022", "Custom"`},
		},
		{
			name:    "amiFamily is required without an alias",
			spec:    "  role: r\n  amiSelectorTerms: [{id: ami-0123}]" + selectors,
			wantErr: []string{"spec", "amiFamily is required when amiSelectorTerms has no alias"},
		},
		{
			name:    "a subnet selector term needs tags or id",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{}]\n  securityGroupSelectorTerms: [{id: sg-1}]",
			wantErr: []string{"spec.subnetSelectorTerms", "each subnet selector term needs tags or id"},
		},
		{
			name: "capacity reservations selected by id and by tags with an owner are accepted",
			spec: "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + `
  capacityReservationSelectorTerms:
  - id: cr-56fac701cc1951b03
  - tags: {application: foobar}
    ownerID: "012345678901"`,
		},
		{
			name:    "a capacity reservation selector term needs id or tags",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  capacityReservationSelectorTerms: [{ownerID: \"012345678901\"}]",
			wantErr: []string{"spec.capacityReservationSelectorTerms", "each capacity reservation selector term needs id or tags"},
		},
		{
			name:    "a capacity reservation selector term with id cannot also have tags",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  capacityReservationSelectorTerms: [{tags: {a: b}}, {id: cr-1, tags: {a: b}}]",
			wantErr: []string{"spec.capacityReservationSelectorTerms", "a capacity reservation selector term with id cannot also have tags or ownerID: split it into two terms"},
		},
		{
			name:    "a capacity reservation selector term with id cannot also have ownerID",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  capacityReservationSelectorTerms: [{id: cr-1, ownerID: \"012345678901\"}]",
			wantErr: []string{"spec.capacityReservationSelectorTerms", "a capacity reservation selector term with id cannot also have tags or ownerID"},
		},
		{
			name:    "a capacity reservation id looks like cr-...",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  capacityReservationSelectorTerms: [{id: sg-1}]",
			wantErr: []string{"spec.capacityReservationSelectorTerms[0].id", "should match '^cr-[0-9a-z]+$'"},
		},
		{
			name:    "an ownerID is a 12-digit account",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  capacityReservationSelectorTerms: [{tags: {a: b}, ownerID: \"1234\"}]",
			wantErr: []string{"spec.capacityReservationSelectorTerms[0].ownerID", "should match '^[0-9]{12}$'"},
		},
		{
			name:    "capacity reservation selector tags need values",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  capacityReservationSelectorTerms: [{tags: {a: \"\"}}]",
			wantErr: []string{"spec.capacityReservationSelectorTerms[0].tags", "selector tags need non-empty keys and values"},
		},
		{
			name:    "ownership tags are reserved",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  tags: {kubernetes.io/cluster/demo: owned}",
			wantErr: []string{"spec.tags", "tag keys starting with kubernetes.io/cluster are set by Tailor"},
		},
		{
			name:    "kubelet reservations take known keys",
			spec:    "  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]" + selectors + "\n  kubelet: {systemReserved: {gpu: \"1\"}}",
			wantErr: []string{"spec.kubelet.systemReserved", "systemReserved keys must be cpu, memory, ephemeral-storage or pid"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := create(t, nodeClass(fmt.Sprintf("class-%d", i), tt.spec))
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestNodeClaimSpecIsImmutable(t *testing.T) {
	kube, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := create(t, `apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: immutable}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]`+strings.ReplaceAll(nodeClassRef, "      ", "  ")); err != nil {
		t.Fatal(err)
	}
	nc := &unstructured.Unstructured{}
	nc.SetAPIVersion("karpenter.sh/v1")
	nc.SetKind("NodeClaim")
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "immutable"}, nc); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(nc.Object, []any{map[string]any{"key": "team", "operator": "Exists"}}, "spec", "requirements"); err != nil {
		t.Fatal(err)
	}
	checkErr(t, kube.Update(context.Background(), nc), []string{"spec", "spec of a NodeClaim cannot change"})
}

// TestStaticNodePoolsScaleAndStayStatic scales a static NodePool through its scale
// subresource, as kubectl scale does, and refuses to make it dynamic or a dynamic one
// static.
func TestStaticNodePoolsScaleAndStayStatic(t *testing.T) {
	ctx := context.Background()
	kube, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := "  template:\n    spec:\n      requirements: []" + nodeClassRef
	if err := create(t, nodePool("static", "  replicas: 2\n"+spec)); err != nil {
		t.Fatal(err)
	}
	if err := create(t, nodePool("dynamic", spec)); err != nil {
		t.Fatal(err)
	}
	pool := func(name string) *unstructured.Unstructured {
		np := &unstructured.Unstructured{}
		np.SetAPIVersion("karpenter.sh/v1")
		np.SetKind("NodePool")
		np.SetName(name)
		return np
	}
	scale := func(name string) client.SubResourceUpdateOption {
		return client.WithSubResourceBody(&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}})
	}
	if err := kube.SubResource("scale").Update(ctx, pool("static"), scale("static")); err != nil {
		t.Fatalf("scaling the static NodePool: %v", err)
	}
	got := pool("static")
	if err := kube.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
		t.Fatal(err)
	}
	if replicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); replicas != 5 {
		t.Errorf("spec.replicas = %d after scaling to 5", replicas)
	}
	unstructured.RemoveNestedField(got.Object, "spec", "replicas")
	checkErr(t, kube.Update(ctx, got), []string{"spec.replicas cannot be added to or removed from a NodePool"})
	checkErr(t, kube.SubResource("scale").Update(ctx, pool("dynamic"), scale("dynamic")),
		[]string{"spec.replicas cannot be added to or removed from a NodePool"})
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("want the manifest accepted, got: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want the manifest refused with %q, it was accepted", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err.Error(), w)
		}
	}
}
