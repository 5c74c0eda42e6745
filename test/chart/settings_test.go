package chart

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// TestKarpenterSettingsBecomeItsEnvironment renders the chart with the settings.* values of
// Karpenter's chart and checks the provisioner gets them as Karpenter's environment variables.
func TestKarpenterSettingsBecomeItsEnvironment(t *testing.T) {
	out := renderChart(t, "templates/deployment.yaml", "--values", filepath.Join("testdata", "karpenter-settings.yaml"))
	codecs := serializer.NewCodecFactory(clientgoscheme.Scheme)
	obj, _, err := codecs.UniversalDeserializer().Decode(out, nil, nil)
	if err != nil {
		t.Fatalf("decoding the Deployment: %v", err)
	}
	args, env := provisionerArgs(obj.(*apps.Deployment))
	want := map[string]string{
		"CLUSTER_NAME": "prod", "CLUSTER_ENDPOINT": "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com",
		"ISOLATED_VPC": "true", "INTERRUPTION_QUEUE": "prod-interruptions", "RESERVED_ENIS": "1", "ENABLE_PREFIX_DELEGATION": "false",
		"VM_MEMORY_OVERHEAD_PERCENT": "0.05", "BATCH_IDLE_DURATION": "2s", "BATCH_MAX_DURATION": "20s",
		"FEATURE_GATES":     "NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=true,StaticCapacity=false",
		"MIN_VALUES_POLICY": "BestEffort",
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("provisioner environment (-want +got):\n%s", diff)
	}
	if !contains(args, "--log-level=debug") {
		t.Errorf("provisioner args %q lack --log-level=debug for logLevel: debug", args)
	}
}

// renderChart renders one template of the chart with helm, built as hack/lib.sh builds it,
// for the Kubernetes version the binaries are built from (as hack/update-chart.sh does).
func renderChart(t *testing.T, template string, args ...string) []byte {
	t.Helper()
	root := testenv.Root()
	tool := exec.CommandContext(t.Context(), "bash", "-c", "source hack/lib.sh && helm_tool && module_version k8s.io/kubernetes")
	tool.Dir = root
	lines, err := tool.Output()
	if err != nil {
		t.Fatalf("building helm: %v", err)
	}
	// Helm, then the Kubernetes version.
	tools := strings.Fields(string(lines))
	if len(tools) != 2 {
		t.Fatalf("hack/lib.sh printed %q, want helm's path and the Kubernetes version", lines)
	}
	cmd := exec.CommandContext(t.Context(), tools[0], append([]string{"template", "tailor", filepath.Join(root, "manifests", "charts", "tailor"),
		"--namespace", namespace, "--kube-version", tools[1], "--show-only", template}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v: %s", err, stderr.String())
	}
	return out.Bytes()
}

// provisionerArgs are the provisioner container's args and its environment's plain values.
func provisionerArgs(d *apps.Deployment) ([]string, map[string]string) {
	env := map[string]string{}
	var args []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "provisioner" {
			continue
		}
		args = c.Args
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
	}
	return args, env
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}

// TestPrefixDelegationBecomesTheVPCCNIVariable sets settings.vpcPrefixDelegation and checks the
// provisioner gets ENABLE_PREFIX_DELEGATION, the variable the VPC CNI reads for the same mode.
func TestPrefixDelegationBecomesTheVPCCNIVariable(t *testing.T) {
	codecs := serializer.NewCodecFactory(clientgoscheme.Scheme)
	for _, tt := range []struct {
		set  []string
		want string
	}{
		{set: nil, want: "false"},
		{set: []string{"--set", "settings.vpcPrefixDelegation=true"}, want: "true"},
	} {
		obj, _, err := codecs.UniversalDeserializer().Decode(renderChart(t, "templates/deployment.yaml", tt.set...), nil, nil)
		if err != nil {
			t.Fatalf("decoding the Deployment: %v", err)
		}
		_, env := provisionerArgs(obj.(*apps.Deployment))
		if diff := cmp.Diff(tt.want, env["ENABLE_PREFIX_DELEGATION"]); diff != "" {
			t.Errorf("ENABLE_PREFIX_DELEGATION with %q (-want +got):\n%s", tt.set, diff)
		}
	}
}
