// Package schedperf measures tailor-scheduler's throughput on existing nodes against
// kube-scheduler's with the same profile minus Tailor's plugin, with upstream's scheduler_perf
// benchmark (BenchmarkSchedulerThroughput, run by `make bench-scheduler`). This file and
// results.go hold what the benchmark derives and reports; the benchmark itself is in the
// package's tests, so that only `go test -bench` starts an API server.
package schedperf

import (
	"encoding/json"
	"fmt"
	"slices"

	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/tailor-autoscaler/tailor/plugin/nodeprovisioning"
)

// profileName is the profile both configurations run: scheduler_perf's pods ask for the
// default scheduler, and it reads the scheduler's metrics of that profile.
const profileName = "default-scheduler"

// Profiles derives the two configurations the benchmark compares from the one Tailor ships
// (manifests/scheduler/config.yaml). tailor is the shipped profile with the plugin pointed
// at socket, under scheduler_perf's profile name and without leader election; vanilla is
// the same profile without NodeProvisioning at any extension point or in pluginConfig.
// percentage, when set, replaces the profile's percentageOfNodesToScore (0: the scheduler's
// adaptive default). The shipped configuration must hold exactly one profile.
func Profiles(shipped []byte, socket string, percentage *int32) (vanilla, tailor []byte, err error) {
	var cfg configv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(shipped, &cfg); err != nil {
		return nil, nil, fmt.Errorf("parsing the shipped scheduler configuration: %w", err)
	}
	if len(cfg.Profiles) != 1 {
		return nil, nil, fmt.Errorf("the shipped scheduler configuration has %d profiles, want 1", len(cfg.Profiles))
	}
	cfg.LeaderElection = configv1.KubeSchedulerConfiguration{}.LeaderElection
	cfg.LeaderElection.LeaderElect = ptr.To(false)
	cfg.ClientConnection = configv1.KubeSchedulerConfiguration{}.ClientConnection
	profile := &cfg.Profiles[0]
	profile.SchedulerName = ptr.To(profileName)
	if percentage != nil {
		profile.PercentageOfNodesToScore = ptr.To(*percentage)
	}
	withoutPlugins(profile, func(name string) bool { return gangPlugins[name] })
	found := false
	for i, pc := range profile.PluginConfig {
		if pc.Name != nodeprovisioning.Name {
			continue
		}
		found = true
		args := map[string]any{}
		if len(pc.Args.Raw) > 0 {
			if err := json.Unmarshal(pc.Args.Raw, &args); err != nil {
				return nil, nil, fmt.Errorf("parsing %s args: %w", nodeprovisioning.Name, err)
			}
		}
		args["provisionerSocket"] = socket
		if profile.PluginConfig[i].Args.Raw, err = json.Marshal(args); err != nil {
			return nil, nil, fmt.Errorf("encoding %s args: %w", nodeprovisioning.Name, err)
		}
		profile.PluginConfig[i].Args.Object = nil
	}
	if !found {
		return nil, nil, fmt.Errorf("the shipped profile has no pluginConfig for %s", nodeprovisioning.Name)
	}
	if tailor, err = yaml.Marshal(cfg); err != nil {
		return nil, nil, fmt.Errorf("encoding the tailor configuration: %w", err)
	}

	withoutPlugins(profile, func(name string) bool { return name == nodeprovisioning.Name })
	if vanilla, err = yaml.Marshal(cfg); err != nil {
		return nil, nil, fmt.Errorf("encoding the vanilla configuration: %w", err)
	}
	return vanilla, tailor, nil
}

// gangPlugins are the scheduler-plugins plugins of the shipped profile. The benchmark leaves
// them out of both configurations: it measures what NodeProvisioning costs, and
// scheduler_perf's API server serves no PodGroups or ElasticQuotas for them to watch.
var gangPlugins = map[string]bool{"Coscheduling": true, "CapacityScheduling": true}

// withoutPlugins takes the plugins out of the profile, at every extension point and in
// pluginConfig. A queue sort left without its plugin goes back to the default, PrioritySort.
func withoutPlugins(profile *configv1.KubeSchedulerProfile, out func(name string) bool) {
	isOut := func(p configv1.Plugin) bool { return out(p.Name) }
	profile.PluginConfig = slices.DeleteFunc(profile.PluginConfig, func(pc configv1.PluginConfig) bool { return out(pc.Name) })
	p := profile.Plugins
	if p == nil {
		return
	}
	for _, set := range []*configv1.PluginSet{
		&p.PreEnqueue, &p.QueueSort, &p.PreFilter, &p.Filter, &p.PostFilter, &p.PreScore, &p.Score,
		&p.Reserve, &p.Permit, &p.PreBind, &p.Bind, &p.PostBind, &p.MultiPoint,
	} {
		set.Enabled = slices.DeleteFunc(set.Enabled, isOut)
		set.Disabled = slices.DeleteFunc(set.Disabled, isOut)
	}
	if len(p.QueueSort.Enabled) == 0 {
		p.QueueSort.Disabled = nil
	}
}

// EffectivePercentage is the percentageOfNodesToScore a configuration runs with: the
// profile's, else the global one, else 0 (adaptive).
func EffectivePercentage(config []byte) (int32, error) {
	var cfg configv1.KubeSchedulerConfiguration
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return 0, fmt.Errorf("parsing scheduler configuration: %w", err)
	}
	for _, p := range cfg.Profiles {
		if p.PercentageOfNodesToScore != nil {
			return *p.PercentageOfNodesToScore, nil
		}
	}
	return ptr.Deref(cfg.PercentageOfNodesToScore, 0), nil
}
