package simulate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const overlayBaseYAML = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: TailorNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.large]}
`

const webPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
`

const fpgaPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: fpga, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m, example.com/fpga: "1"}, limits: {example.com/fpga: "1"}}}]
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// planned is what a plan bought: the instance type of each NodeClaim and the pods left
// unschedulable.
type planned struct {
	Types         []string
	Unschedulable []string
}

func summary(out Output) planned {
	var p planned
	for _, nc := range out.NodeClaims {
		p.Types = append(p.Types, nc.InstanceType)
	}
	for _, u := range out.Unschedulable {
		p.Unschedulable = append(p.Unschedulable, u.Pod)
	}
	return p
}

func TestNodeOverlaysChangeWhatIsBought(t *testing.T) {
	tests := []struct {
		name     string
		pod      string
		overlays string
		want     planned
	}{
		{name: "without overlay the cheapest type is bought", pod: webPodYAML, want: planned{Types: []string{"c5.large"}}},
		{
			name: "an overlay that raises the cheapest type's price buys the other",
			pod:  webPodYAML,
			overlays: `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: c5-penalty}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}]
  priceAdjustment: "+20%"
`,
			want: planned{Types: []string{"m5.large"}},
		},
		{
			name: "an overlay that lowers the other type's price below the cheapest buys it",
			pod:  webPodYAML,
			overlays: `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: m5-savings-plan}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  price: "0.06"
`,
			want: planned{Types: []string{"m5.large"}},
		},
		{
			name: "an overlay for another NodePool changes nothing",
			pod:  webPodYAML,
			overlays: `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: batch-only}
spec:
  requirements: [{key: karpenter.sh/nodepool, operator: In, values: [batch]}, {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}]
  priceAdjustment: "+1"
`,
			want: planned{Types: []string{"c5.large"}},
		},
		{name: "a pod asking for an extended resource no type has is unschedulable", pod: fpgaPodYAML, want: planned{Unschedulable: []string{"default/fpga"}}},
		{
			name: "an overlay adding the extended resource to one type lets it be planned there",
			pod:  fpgaPodYAML,
			overlays: `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fpga}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  capacity: {example.com/fpga: "1"}
`,
			want: planned{Types: []string{"m5.large"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"-f", writeFile(t, "base.yaml", overlayBaseYAML+"---\n"+tt.pod)}
			if tt.overlays != "" {
				args = append(args, "-f", writeFile(t, "overlays.yaml", tt.overlays))
			}
			out, _ := run(t, args...)
			if diff := cmp.Diff(tt.want, summary(out)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInvalidNodeOverlayIsAnError(t *testing.T) {
	path := writeFile(t, "overlays.yaml", `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: gpu}
spec:
  capacity: {memory: 1Gi}
`)
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"-f", writeFile(t, "base.yaml", overlayBaseYAML+"---\n"+webPodYAML), "-f", path}, &stdout, &stderr)
	want := path + `: document 1: NodeOverlay "gpu": spec.capacity sets memory, which comes from the instance type: set only extended resources such as example.com/device`
	got := ""
	if err != nil {
		got = err.Error()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}
