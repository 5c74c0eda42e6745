package scheme

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config"
)

// TestSchedulerLoadsArgs decodes a KubeSchedulerConfiguration with kube-scheduler's own
// loader: the args arrive typed, with defaults filled.
func TestSchedulerLoadsArgs(t *testing.T) {
	AddToScheduler()
	path := filepath.Join(t.TempDir(), "config.yaml")
	err := os.WriteFile(path, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: tailor-batch
  plugins:
    postFilter:
      enabled:
      - name: NodeProvisioning
  pluginConfig:
  - name: NodeProvisioning
    args:
      nodePools: [batch]
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		t.Fatalf("LoadConfigFromFile() error = %v", err)
	}
	var got *config.NodeProvisioningArgs
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == "NodeProvisioning" {
			got, _ = pc.Args.(*config.NodeProvisioningArgs)
		}
	}
	want := &config.NodeProvisioningArgs{
		ProvisionerSocket: "/var/run/tailor/provisioner.sock",
		RequestTimeout:    metav1.Duration{Duration: 5 * time.Second},
		NodePools:         []string{"batch"},
	}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "TypeMeta" }, cmp.Ignore())); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}
