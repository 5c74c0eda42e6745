package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

func TestCorpusListsEveryManifest(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(Dir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk, listed []string
	for _, f := range files {
		onDisk = append(onDisk, filepath.Base(f))
	}
	for _, c := range Cases() {
		listed = append(listed, c.File)
	}
	slices.Sort(listed)
	if diff := cmp.Diff(onDisk, listed); diff != "" {
		t.Errorf("manifests in testdata (-on disk +in Cases):\n%s", diff)
	}
}

// TestCorpusOnTheAPIServer creates every manifest of the corpus on a real API server with
// Tailor's CRDs: accepted ones are accepted whole, the others refused with the message named.
func TestCorpusOnTheAPIServer(t *testing.T) {
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Cases() {
		t.Run(c.File, func(t *testing.T) {
			objs := decode(t, c)
			var refused error
			for _, o := range objs {
				if err := kube.Create(context.Background(), o, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
					refused = err
					break
				}
				t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
			}
			if len(c.Rejected) == 0 {
				if refused != nil {
					t.Fatalf("want the manifests accepted (%s), got: %v", c.Differs, refused)
				}
				return
			}
			if refused == nil {
				t.Fatalf("want the manifests refused with %q, they were accepted", c.Rejected)
			}
			for _, w := range c.Rejected {
				if !strings.Contains(refused.Error(), w) {
					t.Errorf("refusal %q does not say %q", refused.Error(), w)
				}
			}
		})
	}
}

// planPods is the small pod set planned against each NodePool: more pods than the smallest
// kubelet maxPods of the corpus, tolerating every taint.
const planPods = 24

// TestCorpusPlans plans pods against each accepted NodePool and EC2NodeClass pair with the
// simulate package, and checks that every NodeClaim keeps to its NodePool: its instance types
// and offering meet the requirements, each key with minValues has that many values among its
// types, and it holds no more pods than the kubelet's maxPods and podsPerCore let a node of
// any of its types run.
func TestCorpusPlans(t *testing.T) {
	cat, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	// What a case asserts of its plan beyond what every case does; each returns findings.
	planChecks := map[string]func(in packing.Input, plan packing.Plan) []string{
		"docs-complete.yaml": evictionSoftNotHeldBack,
		"custom-family.yaml": customFamilyPodDensity,
	}
	for _, c := range Cases() {
		objs := decode(t, c)
		if len(c.Rejected) > 0 || !hasNodeClass(objs) {
			continue
		}
		t.Run(c.File, func(t *testing.T) {
			raw, err := c.Read(OfflineVars())
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), c.File)
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			in, err := simulate.Load([]string{path}, cat, aws.OfflineOptions{VMMemoryOverheadPercent: 0.075})
			if err != nil {
				t.Fatal(err)
			}
			in.Pods = smallPods(planPods)
			plan := packing.Solve(in)
			for _, nc := range plan.NewNodeClaims {
				t.Logf("%s: %d pods on %s %s %s, %d instance types listed", nc.NodePool.Name, len(nc.Pods), nc.Cheapest.InstanceType, nc.Cheapest.Zone, nc.Cheapest.CapacityType, len(nc.InstanceTypes))
			}
			var findings []string
			for _, u := range plan.Unschedulable {
				findings = append(findings, fmt.Sprintf("pod %s unschedulable: %s", u.Pod.Name, u.Reason))
			}
			for i, nc := range plan.NewNodeClaims {
				for _, f := range checkNodeClaim(nc, kubeletOf(t, objs, nc.NodePool)) {
					findings = append(findings, fmt.Sprintf("NodeClaim %d (%s in %s, %d pods): %s", i, nc.Cheapest.InstanceType, nc.Cheapest.Zone, len(nc.Pods), f))
				}
			}
			if check, ok := planChecks[c.File]; ok {
				findings = append(findings, check(in, plan)...)
			}
			if len(findings) > 0 {
				t.Errorf("plan of %d pods on %d NodeClaims:\n  %s", planPods, len(plan.NewNodeClaims), strings.Join(findings, "\n  "))
			}
		})
	}
}

// checkNodeClaim returns what a planned NodeClaim does against its NodePool.
func checkNodeClaim(nc packing.NewNodeClaim, kubelet *awsv1.KubeletConfiguration) []string {
	var findings []string
	reqs := nc.NodePool.Spec.Template.Spec.Requirements
	own := requirements.SingleValueLabels(reqs)
	labelsOf := func(it *cloudprovider.InstanceType, offering map[string]string) func(string) (string, bool) {
		return func(key string) (string, bool) {
			for _, m := range []map[string]string{offering, it.Labels, own} {
				if v, ok := m[key]; ok {
					return v, true
				}
			}
			return "", false
		}
	}
	// Zone and capacity type vary by offering: the listed types are checked without them,
	// the offering the plan expects with them.
	var typeReqs []karpv1.NodeSelectorRequirementWithMinValues
	for _, r := range reqs {
		if r.Key != corev1.LabelTopologyZone && r.Key != karpv1.CapacityTypeLabelKey {
			typeReqs = append(typeReqs, r)
		}
	}
	seen := map[string]map[string]bool{}
	for _, it := range nc.InstanceTypes {
		if !requirements.MatchesFunc(typeReqs, labelsOf(it, nil)) {
			findings = append(findings, fmt.Sprintf("instance type %s does not meet the requirements", it.Name))
		}
		if it.Name == nc.Cheapest.InstanceType {
			offering := map[string]string{corev1.LabelTopologyZone: nc.Cheapest.Zone, karpv1.CapacityTypeLabelKey: nc.Cheapest.CapacityType}
			if !requirements.MatchesFunc(reqs, labelsOf(it, offering)) {
				findings = append(findings, fmt.Sprintf("offering %s %s does not meet the requirements", nc.Cheapest.Zone, nc.Cheapest.CapacityType))
			}
		}
		pods := it.Capacity.Pods().Value()
		if int64(len(nc.Pods)) > pods {
			findings = append(findings, fmt.Sprintf("instance type %s runs %d pods", it.Name, pods))
		}
		if kubelet != nil && kubelet.MaxPods != nil && pods > int64(*kubelet.MaxPods) {
			findings = append(findings, fmt.Sprintf("instance type %s has %d pods, above kubelet maxPods %d", it.Name, pods, *kubelet.MaxPods))
		}
		if kubelet != nil && kubelet.PodsPerCore != nil && pods > int64(*kubelet.PodsPerCore)*it.Capacity.Cpu().Value() {
			findings = append(findings, fmt.Sprintf("instance type %s has %d pods, above kubelet podsPerCore %d", it.Name, pods, *kubelet.PodsPerCore))
		}
		for key := range requirements.MinValues(reqs) {
			v, _ := labelsOf(it, map[string]string{corev1.LabelInstanceTypeStable: it.Name})(key)
			if seen[key] == nil {
				seen[key] = map[string]bool{}
			}
			seen[key][v] = true
		}
	}
	if !slices.ContainsFunc(nc.InstanceTypes, func(it *cloudprovider.InstanceType) bool { return it.Name == nc.Cheapest.InstanceType }) {
		findings = append(findings, fmt.Sprintf("the expected instance type %s is not listed", nc.Cheapest.InstanceType))
	}
	for key, want := range requirements.MinValues(reqs) {
		if got := len(seen[key]); got < want {
			findings = append(findings, fmt.Sprintf("%d values of %s among %d instance types, minValues %d", got, key, len(nc.InstanceTypes), want))
		}
	}
	return findings
}

// evictionSoftNotHeldBack asserts the difference of docs-complete.yaml: with evictionHard
// memory.available 5% and evictionSoft 500Mi, a 4 GiB node holds back 5% of its memory, less
// than 500Mi, on top of kubeReserved and systemReserved (100Mi each); Karpenter would hold
// back 500Mi.
func evictionSoftNotHeldBack(in packing.Input, _ packing.Plan) []string {
	for _, it := range in.NodePools[0].InstanceTypes {
		if it.Name != "c5.large" {
			continue
		}
		capacity := it.Capacity.Memory().Value()
		want := 200<<20 + capacity*5/100
		if got := it.Overhead.Memory().Value(); got != want {
			return []string{fmt.Sprintf("c5.large (%s of memory) holds back %s, want %s: 100Mi kubeReserved, 100Mi systemReserved and 5%% of memory (evictionSoft left out)",
				resource.NewQuantity(capacity, resource.BinarySI), resource.NewQuantity(got, resource.BinarySI), resource.NewQuantity(want, resource.BinarySI))}
		}
		return nil
	}
	return []string{"c5.large is not among the NodePool's instance types"}
}

// customFamilyPodDensity: as in Karpenter, amiFamily Custom keeps the ENI limit (29 pods on a
// c5.large) and podsPerCore applies, so a c5.large with podsPerCore 4 runs 8 pods.
func customFamilyPodDensity(in packing.Input, _ packing.Plan) []string {
	for _, it := range in.NodePools[0].InstanceTypes {
		if it.Name == "c5.large" {
			if got := it.Capacity.Pods().Value(); got != 8 {
				return []string{fmt.Sprintf("c5.large of amiFamily Custom runs %d pods, want 8 (podsPerCore 4 × 2 vCPUs)", got)}
			}
			return nil
		}
	}
	return []string{"c5.large is not among the NodePool's instance types"}
}

// kubeletOf is the kubelet configuration of the NodePool's EC2NodeClass among objs.
func kubeletOf(t *testing.T, objs []*unstructured.Unstructured, np *karpv1.NodePool) *awsv1.KubeletConfiguration {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "EC2NodeClass" || o.GetName() != np.Spec.Template.Spec.NodeClassRef.Name {
			continue
		}
		class := &awsv1.EC2NodeClass{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, class); err != nil {
			t.Fatal(err)
		}
		return class.Spec.Kubelet
	}
	return nil
}

func smallPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: fmt.Sprintf("small-%d", i), UID: types.UID(fmt.Sprintf("small-%d", i))},
			Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}}}},
			},
		}
	}
	return pods
}

func decode(t *testing.T, c Case) []*unstructured.Unstructured {
	t.Helper()
	raw, err := c.Read(OfflineVars())
	if err != nil {
		t.Fatal(err)
	}
	objs, err := localstack.Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", c.File, err)
	}
	return objs
}

func hasNodeClass(objs []*unstructured.Unstructured) bool {
	return slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "EC2NodeClass" })
}
