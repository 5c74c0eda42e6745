package crdtest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func nodeOverlay(name, spec string) string {
	return fmt.Sprintf("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: %s}\nspec:\n%s", name, spec)
}

func TestNodeOverlayValidation(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		wantErr []string
	}{
		{
			name: "a price for some instance types is accepted",
			spec: `  weight: 10
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
  - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
  price: "0.0415"`,
		},
		{
			name: "an adjustment by amount and one by percentage are accepted",
			spec: "  requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [\"8\"]}]\n  priceAdjustment: \"-0.05\"",
		},
		{
			name: "a percentage adjustment and an extended resource are accepted",
			spec: "  priceAdjustment: \"+10%\"\n  capacity: {example.com/fpga: \"1\", nvidia.com/gpu: \"4\"}",
		},
		{
			name:    "price and priceAdjustment together name the fix",
			spec:    "  price: \"1\"\n  priceAdjustment: \"+1\"",
			wantErr: []string{"spec", "price and priceAdjustment cannot both be set: price replaces the offering's price, priceAdjustment changes it; keep one"},
		},
		{
			name:    "an adjustment without a sign is refused",
			spec:    "  priceAdjustment: \"10%\"",
			wantErr: []string{"spec.priceAdjustment", "should match"},
		},
		{
			name:    "a negative price is refused",
			spec:    "  price: \"-1\"",
			wantErr: []string{"spec.price", "should match"},
		},
		{
			name:    "cpu capacity names the field and why",
			spec:    "  capacity: {cpu: \"4\", example.com/fpga: \"1\"}",
			wantErr: []string{"spec.capacity", "capacity overrides only extended resources: cpu, memory, pods and ephemeral-storage come from the instance type and cannot be overridden"},
		},
		{
			name:    "ephemeral-storage capacity is refused",
			spec:    "  capacity: {ephemeral-storage: 100Gi}",
			wantErr: []string{"spec.capacity", "capacity overrides only extended resources"},
		},
		{
			name:    "In without values names the fix",
			spec:    "  requirements: [{key: node.kubernetes.io/instance-type, operator: In}]\n  price: \"1\"",
			wantErr: []string{"spec.requirements", "operator In and NotIn need at least one value: add values or use Exists"},
		},
		{
			name:    "an unknown operator is refused",
			spec:    "  requirements: [{key: node.kubernetes.io/instance-type, operator: Near, values: [m5.large]}]\n  price: \"1\"",
			wantErr: []string{"spec.requirements", "operator must be In, NotIn, Exists, DoesNotExist, Gt or Lt"},
		},
		{
			name:    "Gt with two values is refused",
			spec:    "  requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [\"1\", \"2\"]}]\n  price: \"1\"",
			wantErr: []string{"spec.requirements", "operators Gt and Lt take exactly one integer value"},
		},
		{
			name:    "the hostname selects no instance type",
			spec:    "  requirements: [{key: kubernetes.io/hostname, operator: Exists}]\n  price: \"1\"",
			wantErr: []string{"spec.requirements", "kubernetes.io/hostname is set by the kubelet and selects no instance type"},
		},
		{
			name:    "weight is at most 10000",
			spec:    "  weight: 10001\n  price: \"1\"",
			wantErr: []string{"spec.weight", "should be less than or equal to 10000"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := create(t, nodeOverlay(fmt.Sprintf("overlay-%d", i), tt.spec))
			checkErr(t, err, tt.wantErr)
		})
	}
}

// TestNodeOverlayPrinterColumns reads a NodeOverlay as kubectl get does.
func TestNodeOverlayPrinterColumns(t *testing.T) {
	if err := create(t, nodeOverlay("columns", "  weight: 10\n  priceAdjustment: \"-20%\"")); err != nil {
		t.Fatal(err)
	}
	columns, cells := table(t, "/apis/karpenter.sh/v1alpha1/nodeoverlays/columns")
	wantColumns := []column{{"Name", 0}, {"Weight", 0}, {"Price", 0}, {"Adjustment", 0}, {"Ready", 0}, {"Age", 0}}
	if diff := cmp.Diff(wantColumns, columns); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"columns", float64(10), nil, "-20%", nil, "<age>"}, cells); diff != "" {
		t.Errorf("cells (-want +got):\n%s", diff)
	}
}
