package schedperf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name   string
		rounds int
		want   []Run
	}{
		{name: "one round: vanilla, then tailor, workload by workload", rounds: 1, want: []Run{
			{Workload: "A", Scheduler: Vanilla, Round: 1}, {Workload: "A", Scheduler: Tailor, Round: 1},
			{Workload: "B", Scheduler: Vanilla, Round: 1}, {Workload: "B", Scheduler: Tailor, Round: 1},
		}},
		{name: "two rounds: the second starts with tailor", rounds: 2, want: []Run{
			{Workload: "A", Scheduler: Vanilla, Round: 1}, {Workload: "A", Scheduler: Tailor, Round: 1},
			{Workload: "B", Scheduler: Vanilla, Round: 1}, {Workload: "B", Scheduler: Tailor, Round: 1},
			{Workload: "A", Scheduler: Tailor, Round: 2}, {Workload: "A", Scheduler: Vanilla, Round: 2},
			{Workload: "B", Scheduler: Tailor, Round: 2}, {Workload: "B", Scheduler: Vanilla, Round: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Plan([]string{"A", "B"}, tt.rounds)); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultSizes(t *testing.T) {
	tests := []struct {
		nodes int
		want  Sizes
	}{
		{nodes: 5000, want: Sizes{Nodes: 5000, InitPods: 1000, MeasuredPods: 2000}},
		{nodes: 500, want: Sizes{Nodes: 500, InitPods: 100, MeasuredPods: 1000}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, DefaultSizes(tt.nodes)); diff != "" {
			t.Errorf("DefaultSizes(%d) (-want +got):\n%s", tt.nodes, diff)
		}
	}
}

func TestPerfConfig(t *testing.T) {
	workloads := `- name: Basic
  workloadTemplate:
  - {opcode: createNodes, countParam: $nodes}
  - {opcode: createPods, countParam: $measuredPods, collectMetrics: true}
`
	runs := []Run{{Workload: "Basic", Scheduler: Vanilla, Round: 1}, {Workload: "Basic", Scheduler: Tailor, Round: 1}}
	got, err := PerfConfig([]byte(workloads), runs, map[Scheduler]string{Vanilla: "/v.yaml", Tailor: "/t.yaml"}, Sizes{Nodes: 500, InitPods: 100, MeasuredPods: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := `- labels:
  - performance
  name: Basic-vanilla-1
  schedulerConfigPath: /v.yaml
  workloadTemplate:
  - countParam: $nodes
    opcode: createNodes
  - collectMetrics: true
    countParam: $measuredPods
    opcode: createPods
  workloads:
  - name: 500Nodes
    params:
      initPods: 100
      measuredPods: 1000
      nodes: 500
- labels:
  - performance
  name: Basic-tailor-1
  schedulerConfigPath: /t.yaml
  workloadTemplate:
  - countParam: $nodes
    opcode: createNodes
  - collectMetrics: true
    countParam: $measuredPods
    opcode: createPods
  workloads:
  - name: 500Nodes
    params:
      initPods: 100
      measuredPods: 1000
      nodes: 500
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("scheduler_perf configuration (-want +got):\n%s", diff)
	}
}

func TestPerfConfigRejects(t *testing.T) {
	tests := []struct {
		name      string
		workloads string
		runs      []Run
		want      string
	}{
		{name: "a run of an unknown workload", workloads: "- {name: A, workloadTemplate: [{opcode: barrier}]}", runs: []Run{{Workload: "B", Scheduler: Vanilla, Round: 1}}, want: "run B-vanilla-1: no workload B"},
		{name: "a workload without ops", workloads: "- {name: A}", want: "workload 0: want a name and a workloadTemplate"},
		{name: "an unknown field", workloads: "- {name: A, template: []}", want: "parsing workloads"},
		{name: "a scheduler without a configuration", workloads: "- {name: A, workloadTemplate: [{opcode: barrier}]}", runs: []Run{{Workload: "A", Scheduler: "other", Round: 1}}, want: "no configuration for scheduler other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PerfConfig([]byte(tt.workloads), tt.runs, map[Scheduler]string{Vanilla: "/v.yaml"}, Sizes{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PerfConfig() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestWorkloadNames reads the benchmark's own workloads.
func TestWorkloadNames(t *testing.T) {
	workloads, err := os.ReadFile(filepath.Join("testdata", "workloads.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := WorkloadNames(workloads)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"SchedulingBasic", "TopologySpread", "PodAffinity"}, got); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
}
