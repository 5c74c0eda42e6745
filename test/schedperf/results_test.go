package schedperf

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestThroughputs(t *testing.T) {
	tests := []struct {
		name    string
		items   string
		want    map[string]float64
		wantErr string
	}{
		{
			name: "the averages of throughput items, by test case",
			items: `{"version": "v1", "dataItems": [
				{"data": {"Average": 181.5, "Perc50": 180}, "unit": "pods/s", "labels": {"Metric": "SchedulingThroughput", "Name": "BenchmarkSchedulerThroughput/SchedulingBasic-vanilla-1/5000Nodes/measured"}},
				{"data": {"Perc50": 3.2}, "unit": "ms", "labels": {"Metric": "scheduler_framework_extension_point_duration_seconds", "Name": "BenchmarkSchedulerThroughput/SchedulingBasic-vanilla-1/5000Nodes/measured", "extension_point": "Filter"}},
				{"data": {"Average": 175.25}, "unit": "pods/s", "labels": {"Metric": "SchedulingThroughput", "Name": "BenchmarkSchedulerThroughput/SchedulingBasic-tailor-1/5000Nodes/measured"}}
			]}`,
			want: map[string]float64{"SchedulingBasic-vanilla-1": 181.5, "SchedulingBasic-tailor-1": 175.25},
		},
		{
			name:  "no throughput items",
			items: `{"version": "v1", "dataItems": []}`,
			want:  map[string]float64{},
		},
		{
			name:    "a name without a test case",
			items:   `{"dataItems": [{"data": {"Average": 1}, "labels": {"Metric": "SchedulingThroughput", "Name": "measured"}}]}`,
			wantErr: `SchedulingThroughput item named "measured"`,
		},
		{
			name:    "a throughput item without an average",
			items:   `{"dataItems": [{"data": {}, "labels": {"Metric": "SchedulingThroughput", "Name": "B/tc/w/ns"}}]}`,
			wantErr: `item "B/tc/w/ns" has no Average`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Throughputs(strings.NewReader(tt.items))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Throughputs() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("throughputs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	basic := func(s Scheduler, round int) Run { return Run{Workload: "SchedulingBasic", Scheduler: s, Round: round} }
	spread := func(s Scheduler, round int) Run { return Run{Workload: "TopologySpread", Scheduler: s, Round: round} }
	tests := []struct {
		name     string
		runs     []Run
		measured map[Run]Measurement
		want     []Result
		wantErr  string
	}{
		{
			name: "one round: the ratio of the two, workloads in the order they ran",
			runs: []Run{spread(Vanilla, 1), spread(Tailor, 1), basic(Vanilla, 1), basic(Tailor, 1)},
			measured: map[Run]Measurement{
				basic(Vanilla, 1): {PodsPerSecond: 200, NodesUsed: 94}, basic(Tailor, 1): {PodsPerSecond: 190, NodesUsed: 94},
				spread(Vanilla, 1): {PodsPerSecond: 100, NodesUsed: 3000}, spread(Tailor, 1): {PodsPerSecond: 101, NodesUsed: 3000},
			},
			want: []Result{
				{Workload: "TopologySpread", Nodes: 5000, VanillaPodsPerSecond: 100, TailorPodsPerSecond: 101, Ratio: 1.01, PercentageOfNodesToScore: 100, VanillaNodesUsed: 3000, TailorNodesUsed: 3000},
				{Workload: "SchedulingBasic", Nodes: 5000, VanillaPodsPerSecond: 200, TailorPodsPerSecond: 190, Ratio: 0.95, PercentageOfNodesToScore: 100, VanillaNodesUsed: 94, TailorNodesUsed: 94},
			},
		},
		{
			name: "three rounds: the medians, an outlier ignored",
			runs: []Run{basic(Vanilla, 1), basic(Tailor, 1), basic(Tailor, 2), basic(Vanilla, 2), basic(Vanilla, 3), basic(Tailor, 3)},
			measured: map[Run]Measurement{
				basic(Vanilla, 1): {PodsPerSecond: 200, NodesUsed: 94}, basic(Tailor, 1): {PodsPerSecond: 180, NodesUsed: 95},
				basic(Vanilla, 2): {PodsPerSecond: 80, NodesUsed: 94}, basic(Tailor, 2): {PodsPerSecond: 190, NodesUsed: 96},
				basic(Vanilla, 3): {PodsPerSecond: 210, NodesUsed: 94}, basic(Tailor, 3): {PodsPerSecond: 50, NodesUsed: 97},
			},
			want: []Result{{Workload: "SchedulingBasic", Nodes: 5000, VanillaPodsPerSecond: 200, TailorPodsPerSecond: 180, Ratio: 0.9, PercentageOfNodesToScore: 100, VanillaNodesUsed: 94, TailorNodesUsed: 96}},
		},
		{
			name: "two rounds: the means of the middle two",
			runs: []Run{basic(Vanilla, 1), basic(Tailor, 1), basic(Tailor, 2), basic(Vanilla, 2)},
			measured: map[Run]Measurement{
				basic(Vanilla, 1): {PodsPerSecond: 200, NodesUsed: 94}, basic(Tailor, 1): {PodsPerSecond: 180, NodesUsed: 94},
				basic(Vanilla, 2): {PodsPerSecond: 100, NodesUsed: 96}, basic(Tailor, 2): {PodsPerSecond: 120, NodesUsed: 96},
			},
			want: []Result{{Workload: "SchedulingBasic", Nodes: 5000, VanillaPodsPerSecond: 150, TailorPodsPerSecond: 150, Ratio: 1, PercentageOfNodesToScore: 100, VanillaNodesUsed: 95, TailorNodesUsed: 95}},
		},
		{
			name: "a workload measured with one scheduler only is left out, and named",
			runs: []Run{basic(Vanilla, 1), basic(Tailor, 1), spread(Vanilla, 1), spread(Tailor, 1)},
			measured: map[Run]Measurement{
				basic(Vanilla, 1): {PodsPerSecond: 200, NodesUsed: 94}, basic(Tailor, 1): {PodsPerSecond: 200, NodesUsed: 94},
				spread(Vanilla, 1): {PodsPerSecond: 100},
			},
			want:    []Result{{Workload: "SchedulingBasic", Nodes: 5000, VanillaPodsPerSecond: 200, TailorPodsPerSecond: 200, Ratio: 1, PercentageOfNodesToScore: 100, VanillaNodesUsed: 94, TailorNodesUsed: 94}},
			wantErr: "workload TopologySpread has 1 vanilla and 0 tailor measurements",
		},
		{
			name:     "no vanilla throughput to divide by",
			runs:     []Run{basic(Vanilla, 1), basic(Tailor, 1)},
			measured: map[Run]Measurement{basic(Vanilla, 1): {}, basic(Tailor, 1): {PodsPerSecond: 10}},
			wantErr:  "vanilla scheduled 0 pods/s",
		},
		{
			name: "a workload that did not run is left out",
			runs: []Run{basic(Vanilla, 1), basic(Tailor, 1), spread(Vanilla, 1), spread(Tailor, 1)},
			measured: map[Run]Measurement{
				basic(Vanilla, 1): {PodsPerSecond: 200, NodesUsed: 94}, basic(Tailor, 1): {PodsPerSecond: 200, NodesUsed: 94},
			},
			want: []Result{{Workload: "SchedulingBasic", Nodes: 5000, VanillaPodsPerSecond: 200, TailorPodsPerSecond: 200, Ratio: 1, PercentageOfNodesToScore: 100, VanillaNodesUsed: 94, TailorNodesUsed: 94}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compare(tt.runs, tt.measured, 5000, 100)
			if tt.wantErr == "" && err != nil {
				t.Errorf("Compare() error = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Compare() error = %v, want one containing %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	results := []Result{
		{Workload: "SchedulingBasic", Nodes: 5000, VanillaPodsPerSecond: 200, TailorPodsPerSecond: 190.04, Ratio: 0.9502, PercentageOfNodesToScore: 100, VanillaNodesUsed: 125, TailorNodesUsed: 125},
		{Workload: "PodAffinity", Nodes: 5000, VanillaPodsPerSecond: 61.26, TailorPodsPerSecond: 60, Ratio: 0.97943, VanillaNodesUsed: 1510, TailorNodesUsed: 1498},
	}
	want := `workload         nodes  nodes to score  vanilla pods/s  tailor pods/s  ratio  vanilla nodes used  tailor nodes used
SchedulingBasic  5000   100%            200.0           190.0          0.950  125                 125
PodAffinity      5000   adaptive        61.3            60.0           0.979  1510                1498
`
	var got strings.Builder
	if err := WriteTable(&got, results); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
