package schedperf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const shippedExample = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceName: tailor-scheduler
  resourceNamespace: tailor
profiles:
- schedulerName: tailor-scheduler
  percentageOfNodesToScore: 100
  plugins:
    preScore:
      enabled:
      - name: NodeProvisioning
    score:
      enabled:
      - name: NodeProvisioning
        weight: 20
      disabled:
      - name: NodeResourcesBalancedAllocation
    filter:
      enabled:
      - name: NodeProvisioning
    postFilter:
      enabled:
      - name: NodeProvisioning
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
  - name: NodeProvisioning
    args:
      provisionerSocket: /var/run/tailor/provisioner.sock
      requestTimeout: 5s
`

func TestProfiles(t *testing.T) {
	const tailorWant = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  percentageOfNodesToScore: %s
  plugins:
    preScore:
      enabled:
      - name: NodeProvisioning
    score:
      enabled:
      - name: NodeProvisioning
        weight: 20
      disabled:
      - name: NodeResourcesBalancedAllocation
    filter:
      enabled:
      - name: NodeProvisioning
    postFilter:
      enabled:
      - name: NodeProvisioning
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
  - name: NodeProvisioning
    args:
      provisionerSocket: /tmp/bench/provisioner.sock
      requestTimeout: 5s
`
	const vanillaWant = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  percentageOfNodesToScore: %s
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`
	tests := []struct {
		name       string
		percentage *int32
		want       string
	}{
		{name: "as shipped", percentage: nil, want: "100"},
		{name: "adaptive", percentage: ptr.To[int32](0), want: "0"},
		{name: "a tenth", percentage: ptr.To[int32](10), want: "10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vanilla, tailor, err := Profiles([]byte(shippedExample), "/tmp/bench/provisioner.sock", tt.percentage)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(normalized(t, strings.ReplaceAll(tailorWant, "%s", tt.want)), normalized(t, string(tailor))); diff != "" {
				t.Errorf("tailor configuration (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(normalized(t, strings.ReplaceAll(vanillaWant, "%s", tt.want)), normalized(t, string(vanilla))); diff != "" {
				t.Errorf("vanilla configuration (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProfilesRejects(t *testing.T) {
	tests := []struct {
		name    string
		shipped string
		want    string
	}{
		{name: "two profiles", shipped: "profiles: [{schedulerName: a}, {schedulerName: b}]", want: "has 2 profiles, want 1"},
		{name: "no plugin args", shipped: "profiles: [{schedulerName: a}]", want: "no pluginConfig for NodeProvisioning"},
		{name: "unknown field", shipped: "profile: []", want: "parsing the shipped scheduler configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Profiles([]byte(tt.shipped), "/s", nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Profiles() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestProfilesOfShippedConfig derives both configurations from the file the benchmark reads,
// so that a change to it that the benchmark cannot follow fails here first.
func TestProfilesOfShippedConfig(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vanilla, tailor, err := Profiles(shipped, "/s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(vanilla), "NodeProvisioning") {
		t.Errorf("vanilla configuration names NodeProvisioning:\n%s", vanilla)
	}
	for _, config := range [][]byte{vanilla, tailor} {
		if strings.Contains(string(config), "Coscheduling") || strings.Contains(string(config), "PrioritySort") {
			t.Errorf("configuration keeps Coscheduling or leaves the default queue sort disabled:\n%s", config)
		}
	}
	if !strings.Contains(string(tailor), "provisionerSocket: /s") {
		t.Errorf("tailor configuration does not point the plugin at the benchmark's socket:\n%s", tailor)
	}
}

func TestEffectivePercentage(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   int32
	}{
		{name: "the profile's", config: "percentageOfNodesToScore: 50\nprofiles: [{percentageOfNodesToScore: 100}]", want: 100},
		{name: "the global one", config: "percentageOfNodesToScore: 50\nprofiles: [{schedulerName: a}]", want: 50},
		{name: "adaptive", config: "profiles: [{schedulerName: a}]", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EffectivePercentage([]byte(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("EffectivePercentage() = %d, want %d", got, tt.want)
			}
		})
	}
}

// normalized parses YAML into generic values, so that a comparison ignores field order and
// the fields a marshaled Go struct spells out empty (percentageOfNodesToScore excepted: 0
// means adaptive).
func normalized(t *testing.T, doc string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("parsing %s: %v", doc, err)
	}
	return dropEmpty(v)
}

func dropEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if k == "percentageOfNodesToScore" {
				out[k] = e
				continue
			}
			if e = dropEmpty(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(v) == 0 {
			return nil
		}
		for i, e := range v {
			v[i] = dropEmpty(e)
		}
		return v
	case string:
		if v == "" || v == "0s" {
			return nil
		}
	case float64:
		if v == 0 {
			return nil
		}
	}
	return v
}
