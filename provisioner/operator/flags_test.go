package operator

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestKarpenterEnvironmentSetsFlagsNotGiven(t *testing.T) {
	type settings struct {
		ClusterName, ClusterEndpoint, InterruptionQueue string
		IsolatedVPC, PrefixDelegation                   bool
		ReservedENIs                                    int
		VMMemoryOverheadPercent                         float64
		BatchIdle, BatchMax                             time.Duration
		SpotToSpot, NodeRepair                          bool
		Unbuilt                                         []string
		LogLevel                                        LogLevel
		MinValuesPolicy                                 MinValuesPolicy
	}
	defaults := settings{VMMemoryOverheadPercent: 0.075, BatchIdle: time.Second, BatchMax: 10 * time.Second,
		MinValuesPolicy: MinValuesStrict}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want func(*settings)
		err  string
	}{
		{name: "no environment keeps the flags' defaults", want: func(*settings) {}},
		{name: "every Karpenter setting from the environment", env: map[string]string{
			"CLUSTER_NAME": "prod", "CLUSTER_ENDPOINT": "https://api.prod", "INTERRUPTION_QUEUE": "prod-queue",
			"ISOLATED_VPC": "true", "RESERVED_ENIS": "1", "ENABLE_PREFIX_DELEGATION": "true", "VM_MEMORY_OVERHEAD_PERCENT": "0.05",
			"BATCH_IDLE_DURATION": "2s", "BATCH_MAX_DURATION": "20s",
			"FEATURE_GATES": "SpotToSpotConsolidation=true,NodeRepair=true,NodeOverlay=true,ReservedCapacity=false,CapacityBuffer=true",
			"LOG_LEVEL":     "debug", "MIN_VALUES_POLICY": "BestEffort",
		}, want: func(s *settings) {
			*s = settings{ClusterName: "prod", ClusterEndpoint: "https://api.prod", InterruptionQueue: "prod-queue",
				IsolatedVPC: true, PrefixDelegation: true, ReservedENIs: 1, VMMemoryOverheadPercent: 0.05, BatchIdle: 2 * time.Second, BatchMax: 20 * time.Second,
				SpotToSpot: true, NodeRepair: true, Unbuilt: []string{GateCapacityBuffer}, LogLevel: LogDebug, MinValuesPolicy: MinValuesBestEffort}
		}},
		{name: "flags win over the environment",
			env:  map[string]string{"CLUSTER_NAME": "from-env", "BATCH_IDLE_DURATION": "5s", "FEATURE_GATES": "SpotToSpotConsolidation=true", "MIN_VALUES_POLICY": "BestEffort"},
			args: []string{"--cluster-name=from-flag", "--batch-idle-duration=3s", "--feature-gates=SpotToSpotConsolidation=false", "--min-values-policy=Strict"},
			want: func(s *settings) { s.ClusterName, s.BatchIdle = "from-flag", 3*time.Second }},
		{name: "the prefix delegation flag wins over the VPC CNI's variable",
			env:  map[string]string{"ENABLE_PREFIX_DELEGATION": "true"},
			args: []string{"--vpc-prefix-delegation=false"},
			want: func(*settings) {}},
		{name: "the environment fills what the flags leave out",
			env:  map[string]string{"CLUSTER_NAME": "from-env", "BATCH_IDLE_DURATION": "5s"},
			args: []string{"--cluster-name=from-flag"},
			want: func(s *settings) { s.ClusterName, s.BatchIdle = "from-flag", 5*time.Second }},
		{name: "a bad duration names the variable and the fix", env: map[string]string{"BATCH_MAX_DURATION": "ten"},
			// The flag package zeroes a duration it cannot parse; the error stops the sidecar.
			want: func(s *settings) { s.BatchMax = 0 },
			err:  `environment variable BATCH_MAX_DURATION="ten" (--batch-max-duration) is not a duration such as 10s: parse error`},
		{name: "a bad boolean names the variable and the fix", env: map[string]string{"ISOLATED_VPC": "yes please"},
			want: func(*settings) {},
			err:  `environment variable ISOLATED_VPC="yes please" (--isolated-vpc) is not true or false: parse error`},
		{name: "an unknown feature gate is named", env: map[string]string{"FEATURE_GATES": "SpotToSpotConsolidation=true,Drift=true"},
			want: func(s *settings) { s.SpotToSpot = true },
			err:  `environment variable FEATURE_GATES="SpotToSpotConsolidation=true,Drift=true" (--feature-gates) is not Name=true,Other=false with the gates of --feature-gates: unknown feature gate "Drift": known gates are CapacityBuffer, NodeOverlay, NodeRepair, ReservedCapacity, SpotToSpotConsolidation, StaticCapacity`},
		{name: "a feature gate without a value", args: []string{"--feature-gates=NodeRepair"},
			want: func(*settings) {},
			err:  `invalid value "NodeRepair" for flag -feature-gates: feature gate "NodeRepair" has no value: write NodeRepair=true or NodeRepair=false`},
		{name: "a bad min values policy", env: map[string]string{"MIN_VALUES_POLICY": "Loose"},
			want: func(*settings) {},
			err:  `environment variable MIN_VALUES_POLICY="Loose" (--min-values-policy) is not Strict or BestEffort: min values policy "Loose": want Strict or BestEffort`},
		{name: "a bad log level", env: map[string]string{"LOG_LEVEL": "verbose"},
			want: func(*settings) {},
			err:  `environment variable LOG_LEVEL="verbose" (--log-level) is not debug, info or error: log level "verbose": want debug, info or error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("tailor-provisioner", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			opts := BindFlags(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				err = ApplyEnvironment(fs, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.err, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			want := defaults
			tt.want(&want)
			gotSettings := settings{
				ClusterName: opts.ClusterName, ClusterEndpoint: opts.ClusterEndpoint, InterruptionQueue: opts.InterruptionQueue,
				IsolatedVPC: opts.IsolatedVPC, PrefixDelegation: opts.PrefixDelegation, ReservedENIs: opts.ReservedENIs, VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent,
				BatchIdle: opts.BatchIdle, BatchMax: opts.BatchMax,
				SpotToSpot: opts.FeatureGates.Enabled(GateSpotToSpotConsolidation), NodeRepair: opts.FeatureGates.Enabled(GateNodeRepair),
				Unbuilt: opts.FeatureGates.Unbuilt(), LogLevel: opts.LogLevel, MinValuesPolicy: opts.MinValuesPolicy,
			}
			if diff := cmp.Diff(want, gotSettings); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodDeletionCostSchedulersAreAListThatCanBeEmptied(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want NameList
	}{
		{name: "Tailor's scheduler by default", want: NameList{"tailor-scheduler"}},
		{name: "a list replaces the default", args: []string{"--pod-deletion-cost-schedulers= tailor-scheduler, batch-scheduler ,"},
			want: NameList{"tailor-scheduler", "batch-scheduler"}},
		{name: "empty turns the steering off", args: []string{"--pod-deletion-cost-schedulers="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("provisioner", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			opts := BindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, opts.DeletionCostSchedulers); diff != "" {
				t.Errorf("schedulers (-want +got):\n%s", diff)
			}
		})
	}
}
