package simulate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Manifests of every kind Load reads, one YAML document each.
const (
	nodeClassYAML = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: TailorNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
`
	nodePoolYAML = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  limits: {cpu: "100"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`
	nodeYAML = `apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {karpenter.sh/nodepool: general}
spec: {providerID: "aws:///us-east-1a/i-a"}
status:
  capacity: {cpu: "4", memory: 16Gi}
  allocatable: {cpu: 3920m, memory: 15Gi}
`
	cordonedNodeYAML = `apiVersion: v1
kind: Node
metadata: {name: node-b}
spec: {unschedulable: true}
status:
  allocatable: {cpu: "2", memory: 8Gi}
`
	nodeClaimYAML = `apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: general-abc
  labels: {karpenter.sh/nodepool: general}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
status:
  providerID: "aws:///us-east-1a/i-a"
  capacity: {cpu: "4"}
`
	inFlightClaimYAML = `apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: general-def
  labels: {karpenter.sh/nodepool: general}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  taints: [{key: dedicated, value: batch, effect: NoSchedule}]
status:
  providerID: "aws:///us-east-1b/i-b"
  capacity: {cpu: "8"}
  allocatable: {cpu: 7910m, memory: 30Gi}
`
	pendingPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: pending, namespace: default}
spec:
  containers: [{name: app, image: pause, resources: {requests: {cpu: 500m}}}]
`
	boundPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: bound, namespace: default}
spec:
  nodeName: node-a
  containers: [{name: app, image: pause}]
`
	inFlightPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: starting, namespace: batch}
spec:
  nodeName: general-def
  containers: [{name: app, image: pause}]
`
	succeededPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: done, namespace: default}
spec:
  containers: [{name: app, image: pause}]
status: {phase: Succeeded}
`
	daemonSetYAML = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: pause}]
`
	claimYAML = `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  storageClassName: gp3
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
`
	volumeYAML = `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
`
	storageClassYAML = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
`
)

var everyKind = []string{
	nodeClassYAML, nodePoolYAML, nodeYAML, cordonedNodeYAML, nodeClaimYAML, inFlightClaimYAML,
	pendingPodYAML, boundPodYAML, inFlightPodYAML, succeededPodYAML, daemonSetYAML, claimYAML, volumeYAML, storageClassYAML,
}

// inputSummary is what a test reads of a packing.Input: names, flags and quantities.
type inputSummary struct {
	Pods           []string
	NodePools      []poolSummary
	Nodes          []nodeSummary
	DaemonSets     []string
	Claims         []string
	PersistentVols []string
	StorageClasses []string
}

type poolSummary struct {
	Name          string
	InstanceTypes int
	Remaining     map[string]string
}

type nodeSummary struct {
	Name        string
	NodeClaim   string
	Pods        []string
	Schedulable bool
	Taints      int
}

func summarize(in packing.Input) inputSummary {
	var s inputSummary
	s.Pods = podNames(in.Pods)
	for _, np := range in.NodePools {
		p := poolSummary{Name: np.NodePool.Name, InstanceTypes: len(np.InstanceTypes)}
		if np.Remaining != nil {
			p.Remaining = map[string]string{}
			for k, v := range np.Remaining {
				p.Remaining[string(k)] = v.String()
			}
		}
		s.NodePools = append(s.NodePools, p)
	}
	for _, n := range in.Nodes {
		ns := nodeSummary{Name: n.Node.Name, Pods: podNames(n.Pods), Schedulable: n.Schedulable, Taints: len(n.Node.Spec.Taints)}
		if n.NodeClaim != nil {
			ns.NodeClaim = n.NodeClaim.Name
		}
		s.Nodes = append(s.Nodes, ns)
	}
	for _, d := range in.DaemonSets {
		s.DaemonSets = append(s.DaemonSets, d.Namespace+"/"+d.Name)
	}
	for _, c := range in.Volumes.Claims {
		s.Claims = append(s.Claims, c.Namespace+"/"+c.Name)
	}
	for _, v := range in.Volumes.PersistentVols {
		s.PersistentVols = append(s.PersistentVols, v.Name)
	}
	for _, c := range in.Volumes.StorageClasses {
		s.StorageClasses = append(s.StorageClasses, c.Name)
	}
	return s
}

func testCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.LoadFile(filepath.Join("testdata", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// writeFiles writes each content to its own file in a temporary directory and returns
// the paths.
func writeFiles(t *testing.T, contents ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, c := range contents {
		p := filepath.Join(dir, "manifest-"+string(rune('a'+i))+".yaml")
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// asList is the documents as one v1 List in JSON.
func asList(t *testing.T, docs ...string) string {
	t.Helper()
	var items []json.RawMessage
	for _, d := range docs {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, j)
	}
	out, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// yamlList is the documents as one v1 List in YAML.
func yamlList(docs ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for _, d := range docs {
		for i, line := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
			if i == 0 {
				b.WriteString("- " + line + "\n")
			} else {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	return b.String()
}

func nodeClassOf(t *testing.T, doc string) *awsv1.EC2NodeClass {
	t.Helper()
	class := &awsv1.EC2NodeClass{}
	if err := yaml.UnmarshalStrict([]byte(doc), class); err != nil {
		t.Fatal(err)
	}
	return class
}

func multiDoc(docs ...string) string { return "---\n" + strings.Join(docs, "---\n# a comment\n") }

func TestLoadReadsEveryKind(t *testing.T) {
	// The summary of everyKind: the bound pod runs on node-a, whose NodeClaim is paired by
	// provider id; general-def has no Node, so it is a node in flight with its pod; the
	// succeeded pod is not planned. Remaining cpu is 100 less node-a's 4 and general-def's 8.
	want := inputSummary{
		Pods:      []string{"default/pending"},
		NodePools: []poolSummary{{Name: "general", InstanceTypes: 6, Remaining: map[string]string{"cpu": "88"}}},
		Nodes: []nodeSummary{
			{Name: "node-a", NodeClaim: "general-abc", Pods: []string{"default/bound"}, Schedulable: true},
			{Name: "node-b", Pods: []string{}, Schedulable: false},
			{Name: "general-def", NodeClaim: "general-def", Pods: []string{"batch/starting"}, Schedulable: true, Taints: 1},
		},
		DaemonSets:     []string{"kube-system/agent"},
		Claims:         []string{"default/data"},
		PersistentVols: []string{"pv-1"},
		StorageClasses: []string{"gp3"},
	}
	half := len(everyKind) / 2
	tests := []struct {
		name  string
		files []string
		stdin string
	}{
		{name: "multi-document YAML", files: []string{multiDoc(everyKind...)}},
		{name: "v1 List in JSON", files: []string{asList(t, everyKind...)}},
		{name: "v1 List in YAML", files: []string{yamlList(everyKind...)}},
		{name: "stream of JSON objects", files: []string{jsonStream(t, everyKind...)}},
		{name: "one object per file", files: everyKind},
		{name: "files and standard input", files: []string{multiDoc(everyKind[:half]...), Stdin}, stdin: asList(t, everyKind[half:]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			for i, p := range writeFiles(t, tt.files...) {
				if tt.files[i] == Stdin {
					p = Stdin
				}
				paths = append(paths, p)
			}
			in, err := load(paths, strings.NewReader(tt.stdin), testCatalog(t), aws.OfflineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, summarize(in)); diff != "" {
				t.Errorf("Load() (-want +got):\n%s", diff)
			}
		})
	}
}

func jsonStream(t *testing.T, docs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range docs {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteString("\n")
	}
	return b.String()
}

func TestLoadBuildsInstanceTypesFromTheCatalog(t *testing.T) {
	cat := testCatalog(t)
	in, err := load(writeFiles(t, multiDoc(nodeClassYAML, nodePoolYAML)), nil, cat, aws.OfflineOptions{ReservedENIs: 1})
	if err != nil {
		t.Fatal(err)
	}
	want, err := aws.CatalogInstanceTypes(cat, nodeClassOf(t, nodeClassYAML), aws.OfflineOptions{ReservedENIs: 1})
	if err != nil {
		t.Fatal(err)
	}
	quantityEqual := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	if diff := cmp.Diff(want, in.NodePools[0].InstanceTypes, quantityEqual); diff != "" {
		t.Errorf("instance types (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	const typoKind = "apiVersion: v1\nkind: Podd\nmetadata: {name: p, namespace: default}\n"
	tests := []struct {
		name  string
		files []string
		// wantErr may say FILE0 and FILE1 for the paths of the files.
		wantErr string
	}{
		{
			name:    "misspelt kind",
			files:   []string{multiDoc(nodeClassYAML, typoKind)},
			wantErr: `FILE0: document 2: kind "Podd" of apiVersion "v1" is not known; simulate reads ` + supportedKinds,
		},
		{
			name:    "misspelt apiVersion",
			files:   []string{strings.Replace(nodePoolYAML, "karpenter.sh/v1", "karpenter.sh/v1beta1", 1)},
			wantErr: `FILE0: document 1: kind "NodePool" of apiVersion "karpenter.sh/v1beta1" is not known; simulate reads ` + supportedKinds,
		},
		{
			name:    "misspelt kind in a List",
			files:   []string{asList(t, pendingPodYAML, typoKind)},
			wantErr: `FILE0: document 1, items[1]: kind "Podd" of apiVersion "v1" is not known; simulate reads ` + supportedKinds,
		},
		{
			name:    "no kind",
			files:   []string{"metadata: {name: p}\n"},
			wantErr: "FILE0: document 1: apiVersion and kind must be set; simulate reads " + supportedKinds,
		},
		{
			name:    "kind not simulated",
			files:   []string{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"},
			wantErr: `FILE0: document 1: kind "Deployment" of apiVersion "apps/v1" is not simulated; simulate reads ` + supportedKinds,
		},
		{
			name:    "typed list",
			files:   []string{"apiVersion: v1\nkind: PodList\nitems: []\n"},
			wantErr: `FILE0: document 1: kind "PodList" of apiVersion "v1" is not read; use a v1 List`,
		},
		{
			name:    "List in a List",
			files:   []string{asList(t, "apiVersion: v1\nkind: List\nitems: []\n")},
			wantErr: "FILE0: document 1, items[0]: a List inside a List is not read; put its items in the outer List",
		},
		{
			name:    "misspelt field",
			files:   []string{strings.Replace(pendingPodYAML, "containers:", "containerz:", 1)},
			wantErr: `FILE0: document 1: decoding Pod: strict decoding error: unknown field "spec.containerz"`,
		},
		{
			name:    "YAML syntax",
			files:   []string{"apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"},
			wantErr: "FILE0: document 1: decoding: yaml: line 3: did not find expected node content",
		},
		{
			name:    "bad document separator",
			files:   []string{nodeClassYAML + "--- nodepool\n" + nodePoolYAML},
			wantErr: "FILE0: document 1: invalid Yaml document separator: nodepool",
		},
		{
			name:    "bad JSON stream",
			files:   []string{`{"apiVersion": "v1", "kind": "Pod"} {"apiVersion": `},
			wantErr: "FILE0: document 2: decoding JSON: unexpected EOF",
		},
		{
			name:    "object given twice",
			files:   []string{multiDoc(pendingPodYAML), multiDoc(nodeClassYAML, pendingPodYAML)},
			wantErr: "FILE1: document 2: Pod default/pending is also in FILE0: document 1; give each object once",
		},
		{
			name:    "pod bound to a node not listed",
			files:   []string{boundPodYAML},
			wantErr: `pod default/bound is bound to node "node-a", which is not in the manifests: add the Node, or clear spec.nodeName to plan the pod`,
		},
		{
			name:    "NodePool without nodeClassRef",
			files:   []string{"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: general}\n"},
			wantErr: `NodePool "general": spec.template.spec.nodeClassRef is not set: name an EC2NodeClass of group karpenter.k8s.aws`,
		},
		{
			name:    "NodePool of another kind of node class",
			files:   []string{strings.Replace(nodePoolYAML, "group: karpenter.k8s.aws, kind: EC2NodeClass", "group: karpenter.azure.com, kind: AKSNodeClass", 1)},
			wantErr: `NodePool "general": spec.template.spec.nodeClassRef is a karpenter.azure.com AKSNodeClass; simulate launches from EC2NodeClasses of group karpenter.k8s.aws`,
		},
		{
			name:    "NodePool without its EC2NodeClass",
			files:   []string{nodePoolYAML},
			wantErr: `NodePool "general" refers to EC2NodeClass "default", which is not in the manifests: add it`,
		},
		{
			name:    "EC2NodeClass the provider refuses",
			files:   []string{multiDoc(strings.Replace(nodeClassYAML, "role:", "amiFamily: AL2\n  role:", 1), nodePoolYAML)},
			wantErr: `instance types of NodePool "general": EC2NodeClass "default": spec.amiFamily AL2 contradicts the alias of amiSelectorTerms (AL2023): remove amiFamily or set it to AL2023 or Custom`,
		},
		{
			name:    "two NodeClaims of one node",
			files:   []string{multiDoc(nodeYAML, nodeClaimYAML, strings.Replace(nodeClaimYAML, "general-abc", "general-xyz", 1))},
			wantErr: `NodeClaims "general-abc" and "general-xyz" both belong to Node "node-a": give each node one NodeClaim`,
		},
		{
			name:    "standard input twice",
			files:   []string{Stdin, Stdin},
			wantErr: "standard input (-) is given more than once",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := writeFiles(t, tt.files...)
			for i := range paths {
				if tt.files[i] == Stdin {
					paths[i] = Stdin
				}
			}
			_, err := load(paths, strings.NewReader(""), testCatalog(t), aws.OfflineOptions{})
			want := tt.wantErr
			for i, p := range paths {
				want = strings.ReplaceAll(want, "FILE"+string(rune('0'+i)), p)
			}
			if err == nil || err.Error() != want {
				t.Errorf("Load() error = %v\nwant %s", err, want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := Load([]string{missing}, testCatalog(t), aws.OfflineOptions{})
	if want := "reading manifests: open " + missing + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("Load() error = %v, want %q", err, want)
	}
}

func TestLoadRemaining(t *testing.T) {
	node := func(name, pool, capacity, allocatable string) string {
		return "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n  labels: {karpenter.sh/nodepool: " + pool + "}\n" +
			"status:\n  capacity: {" + capacity + "}\n  allocatable: {" + allocatable + "}\n"
	}
	claim := func(name, pool, nodeName, capacity, requests string) string {
		return "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: " + name + "\n  labels: {karpenter.sh/nodepool: " + pool + "}\n" +
			"spec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  resources: {requests: {" + requests + "}}\n" +
			"status:\n  nodeName: " + nodeName + "\n  capacity: {" + capacity + "}\n"
	}
	pool := func(limits string) string {
		return strings.Replace(nodePoolYAML, `limits: {cpu: "100"}`, "limits: {"+limits+"}", 1)
	}
	tests := []struct {
		name  string
		docs  []string
		want  map[string]string
		unset bool
	}{
		{name: "no limits", docs: []string{pool("")}, unset: true},
		{name: "limits and no nodes", docs: []string{pool("cpu: 10, memory: 100Gi")}, want: map[string]string{"cpu": "10", "memory": "100Gi"}},
		{
			name: "capacity of the NodePool's nodes",
			docs: []string{pool("cpu: 10, memory: 100Gi"), node("n1", "general", "cpu: 4, memory: 16Gi", "cpu: 3, memory: 15Gi"), node("n2", "general", "cpu: 2, memory: 4Gi", "cpu: 1")},
			want: map[string]string{"cpu": "4", "memory": "80Gi"},
		},
		{
			name: "allocatable of a node without capacity",
			docs: []string{pool("cpu: 10"), node("n1", "general", "", "cpu: 3")},
			want: map[string]string{"cpu": "7"},
		},
		{
			name: "nodes of other NodePools left out",
			docs: []string{pool("cpu: 10"), node("n1", "other", "cpu: 4", "cpu: 3")},
			want: map[string]string{"cpu": "10"},
		},
		{
			name: "NodeClaim of a listed node counted once",
			docs: []string{pool("cpu: 10"), node("n1", "general", "cpu: 4", "cpu: 3"), claim("c1", "general", "n1", "cpu: 4", "cpu: 1")},
			want: map[string]string{"cpu": "6"},
		},
		{
			name: "NodeClaims without a listed node: capacity, else requests",
			docs: []string{pool("cpu: 10"), claim("c1", "general", "n1", "cpu: 4", "cpu: 1"), claim("c2", "general", "n2", "", "cpu: 2")},
			want: map[string]string{"cpu": "4"},
		},
		{
			name: "beyond the limits",
			docs: []string{pool("cpu: 2"), node("n1", "general", "cpu: 4", "cpu: 3")},
			want: map[string]string{"cpu": "-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs := append([]string{nodeClassYAML}, tt.docs...)
			in, err := load(writeFiles(t, multiDoc(docs...)), nil, testCatalog(t), aws.OfflineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := in.NodePools[0].Remaining
			if tt.unset {
				if got != nil {
					t.Errorf("Remaining = %v, want nil for a NodePool without limits", got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, summarize(in).NodePools[0].Remaining); diff != "" {
				t.Errorf("Remaining (-want +got):\n%s", diff)
			}
		})
	}
}
