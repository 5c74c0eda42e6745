package crdtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
)

// column is what kubectl shows of a Table column: its name, and whether it shows only with
// -o wide (priority 1).
type column struct {
	Name     string
	Priority int32
}

// table fetches the object at path as the API server's Table, kubectl get's view of it: the
// columns and the one row's cells, Age as "<age>" once it reads as a duration.
func table(t *testing.T, path string) ([]column, []any) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	tbl := &metav1.Table{}
	if err := json.Unmarshal(body, tbl); err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("GET %s: %d rows, want 1", path, len(tbl.Rows))
	}
	var columns []column
	cells := tbl.Rows[0].Cells
	for i, c := range tbl.ColumnDefinitions {
		columns = append(columns, column{c.Name, c.Priority})
		if age, ok := cells[i].(string); c.Name == "Age" && ok && strings.HasSuffix(age, "s") {
			cells[i] = "<age>"
		}
	}
	return columns, cells
}

// TestPrinterColumnsAreKarpenters reads a NodeClaim, a NodePool and an EC2NodeClass as
// kubectl get (and get -o wide) does: the columns are Karpenter v1's, in its order, each
// filled from the field Karpenter fills it from.
// TestPrinterColumnsAreKarpenters checks the columns of kubectl get: Karpenter v1's, and
// Tailor's wide Price of NodeClaims and NodePools last.
func TestPrinterColumnsAreKarpenters(t *testing.T) {
	ctx := context.Background()
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ready := func(types ...string) []metav1.Condition {
		var out []metav1.Condition
		for _, ty := range types {
			out = append(out, metav1.Condition{Type: ty, Status: metav1.ConditionTrue, Reason: ty, LastTransitionTime: metav1.Now()})
		}
		return out
	}
	if err := create(t, nodeClass("columns", "  role: KarpenterNodeRole-demo\n  amiSelectorTerms: [{alias: al2023@latest}]"+selectors)); err != nil {
		t.Fatal(err)
	}
	class := &awsv1.EC2NodeClass{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "columns"}, class); err != nil {
		t.Fatal(err)
	}
	class.Status.Conditions = ready(awsv1.ConditionTypeReady)
	if err := kube.Status().Update(ctx, class); err != nil {
		t.Fatal(err)
	}

	if err := create(t, nodePool("columns", `  weight: 10
  template:
    spec:
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]`+nodeClassRef)); err != nil {
		t.Fatal(err)
	}
	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "columns"}, np); err != nil {
		t.Fatal(err)
	}
	nodes := int64(3)
	np.Status.Nodes = &nodes
	np.Status.Resources = corev1.ResourceList{"cpu": resource.MustParse("12"), "memory": resource.MustParse("48Gi"), "nodes": resource.MustParse("3")}
	np.Status.Conditions = ready(karpv1.ConditionTypeReady)
	np.Status.Price = &karpv1.Price{PerHour: "0.6123", Instance: "0.6"}
	if err := kube.Status().Update(ctx, np); err != nil {
		t.Fatal(err)
	}

	if err := create(t, `apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: columns-x7k2p
  labels: {karpenter.sh/nodepool: columns, node.kubernetes.io/instance-type: m7i.xlarge, karpenter.sh/capacity-type: spot, topology.kubernetes.io/zone: us-east-1b}
spec:
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]`+strings.ReplaceAll(nodeClassRef, "      ", "  ")); err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "columns-x7k2p"}, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.NodeName = "ip-10-0-12-34.ec2.internal"
	nc.Status.ProviderID = "aws:///us-east-1b/i-0123456789abcdef0"
	nc.Status.ImageID = "ami-0123456789abcdef0"
	nc.Status.Conditions = ready(karpv1.ConditionTypeReady, karpv1.ConditionTypeDrifted)
	nc.Status.Price = &karpv1.Price{PerHour: "0.2041", Instance: "0.2019", Volumes: "0.0022"}
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		kind        string
		path        string
		wantColumns []column
		wantCells   []any
	}{
		{
			kind: "NodeClaim",
			path: "/apis/karpenter.sh/v1/nodeclaims/columns-x7k2p",
			wantColumns: []column{
				{"Name", 0}, {"Type", 0}, {"Capacity", 0}, {"Zone", 0}, {"Node", 0}, {"Ready", 0}, {"Age", 0},
				{"ImageID", 1}, {"ID", 1}, {"NodePool", 1}, {"NodeClass", 1}, {"Drifted", 1}, {"Price", 1},
			},
			wantCells: []any{
				"columns-x7k2p", "m7i.xlarge", "spot", "us-east-1b", "ip-10-0-12-34.ec2.internal", "True", "<age>",
				"ami-0123456789abcdef0", "aws:///us-east-1b/i-0123456789abcdef0", "columns", "default", "True", "0.2041",
			},
		},
		{
			kind:        "NodePool",
			path:        "/apis/karpenter.sh/v1/nodepools/columns",
			wantColumns: []column{{"Name", 0}, {"NodeClass", 0}, {"Nodes", 0}, {"Ready", 0}, {"Age", 0}, {"Weight", 1}, {"CPU", 1}, {"Memory", 1}, {"Price", 1}},
			// JSON numbers decode as float64.
			wantCells: []any{"columns", "default", "3", "True", "<age>", float64(10), "12", "48Gi", "0.6123"},
		},
		{
			kind:        "EC2NodeClass",
			path:        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/columns",
			wantColumns: []column{{"Name", 0}, {"Ready", 0}, {"Age", 0}, {"Role", 1}},
			wantCells:   []any{"columns", "True", "<age>", "KarpenterNodeRole-demo"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			columns, cells := table(t, tt.path)
			if diff := cmp.Diff(tt.wantColumns, columns); diff != "" {
				t.Errorf("columns of kubectl get %s (-want +got):\n%s", strings.ToLower(tt.kind), diff)
			}
			if diff := cmp.Diff(tt.wantCells, cells); diff != "" {
				t.Errorf("row of kubectl get %s (-want +got):\n%s", strings.ToLower(tt.kind), diff)
			}
		})
	}
}
