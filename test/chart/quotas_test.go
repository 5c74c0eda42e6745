package chart

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	apps "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// TestCapacitySchedulingEnablesQuotas renders the chart with
// scheduler.capacityScheduling.enabled: the profile runs CapacityScheduling in place of
// DefaultPreemption, and the provisioner admits pods by their ElasticQuotas.
func TestCapacitySchedulingEnablesQuotas(t *testing.T) {
	set := []string{"--set", "scheduler.capacityScheduling.enabled=true"}
	codecs := serializer.NewCodecFactory(clientgoscheme.Scheme)
	obj, _, err := codecs.UniversalDeserializer().Decode(renderChart(t, "templates/configmap.yaml", set...), nil, nil)
	if err != nil {
		t.Fatalf("decoding the ConfigMap: %v", err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(obj.(*corev1.ConfigMap).Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		t.Fatalf("loading the scheduler configuration: %v", err)
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Errorf("invalid KubeSchedulerConfiguration: %v", err)
	}
	plugins := cfg.Profiles[0].Plugins
	has := func(set schedconfig.PluginSet, name string) bool {
		return slices.ContainsFunc(set.Enabled, func(p schedconfig.Plugin) bool { return p.Name == name })
	}
	for point, set := range map[string]schedconfig.PluginSet{"preFilter": plugins.PreFilter, "postFilter": plugins.PostFilter, "reserve": plugins.Reserve} {
		if !has(set, "CapacityScheduling") {
			t.Errorf("%s does not enable CapacityScheduling: %+v", point, set.Enabled)
		}
	}
	if !slices.ContainsFunc(plugins.PostFilter.Disabled, func(p schedconfig.Plugin) bool { return p.Name == "DefaultPreemption" }) {
		t.Errorf("postFilter keeps DefaultPreemption beside CapacityScheduling: %+v", plugins.PostFilter)
	}
	obj, _, err = codecs.UniversalDeserializer().Decode(renderChart(t, "templates/deployment.yaml", set...), nil, nil)
	if err != nil {
		t.Fatalf("decoding the Deployment: %v", err)
	}
	if args, _ := provisionerArgs(obj.(*apps.Deployment)); !contains(args, "--elastic-quotas") {
		t.Errorf("provisioner args %q lack --elastic-quotas", args)
	}
}
