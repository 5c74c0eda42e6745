package schedperf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Scheduler names the configuration a run scheduled with.
type Scheduler string

const (
	// Vanilla is kube-scheduler with Tailor's profile minus NodeProvisioning.
	Vanilla Scheduler = "vanilla"
	// Tailor is the profile as shipped, NodeProvisioning included.
	Tailor Scheduler = "tailor"
)

// Run is one scheduler_perf test case: a workload scheduled by one configuration, in one
// round of the benchmark.
type Run struct {
	Workload  string
	Scheduler Scheduler
	Round     int
}

// TestCaseName is the run's scheduler_perf test case name.
func (r Run) TestCaseName() string {
	return fmt.Sprintf("%s-%s-%d", r.Workload, r.Scheduler, r.Round)
}

// Measurement is what one run measured.
type Measurement struct {
	// PodsPerSecond is scheduler_perf's SchedulingThroughput average over the measured pods.
	PodsPerSecond float64
	// NodesUsed counts the nodes running pods once the run is done.
	NodesUsed int
}

// Result is one line of _output/bench/scheduler.json: a workload's throughput with and
// without NodeProvisioning, the median over the rounds of each.
type Result struct {
	Workload                 string  `json:"workload"`
	Nodes                    int     `json:"nodes"`
	VanillaPodsPerSecond     float64 `json:"vanillaPodsPerSecond"`
	TailorPodsPerSecond      float64 `json:"tailorPodsPerSecond"`
	Ratio                    float64 `json:"ratio"`
	PercentageOfNodesToScore int32   `json:"percentageOfNodesToScore"`
	// VanillaNodesUsed and TailorNodesUsed count the nodes running pods at the end: fewer
	// means tighter packing.
	VanillaNodesUsed int `json:"vanillaNodesUsed"`
	TailorNodesUsed  int `json:"tailorNodesUsed"`
}

// dataItems is the part of scheduler_perf's data items file the benchmark reads.
type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

// Throughputs reads the SchedulingThroughput averages of a scheduler_perf data items file,
// by test case name. An item's Name label is "<benchmark>/<test case>/<workload>/<namespace>".
func Throughputs(r io.Reader) (map[string]float64, error) {
	var items dataItems
	if err := json.NewDecoder(r).Decode(&items); err != nil {
		return nil, fmt.Errorf("decoding scheduler_perf data items: %w", err)
	}
	out := map[string]float64{}
	for _, item := range items.DataItems {
		if item.Labels["Metric"] != "SchedulingThroughput" {
			continue
		}
		parts := strings.Split(item.Labels["Name"], "/")
		if len(parts) < 4 {
			return nil, fmt.Errorf("SchedulingThroughput item named %q, want <benchmark>/<test case>/<workload>/<namespace>", item.Labels["Name"])
		}
		average, ok := item.Data["Average"]
		if !ok {
			return nil, fmt.Errorf("SchedulingThroughput item %q has no Average", item.Labels["Name"])
		}
		out[parts[len(parts)-3]] = average
	}
	return out, nil
}

// Compare pairs the runs of each workload, in the order workloads first appear in runs. A
// workload's throughputs and node counts are the medians over its runs, and the ratio is
// Tailor's median over vanilla's. Compare returns the results of the workloads measured with
// both schedulers, and an error that names the others.
func Compare(runs []Run, measured map[Run]Measurement, nodes int, percentage int32) ([]Result, error) {
	var order []string
	samples := map[string]map[Scheduler][]Measurement{}
	for _, r := range runs {
		m, ok := measured[r]
		if !ok {
			continue
		}
		if samples[r.Workload] == nil {
			order = append(order, r.Workload)
			samples[r.Workload] = map[Scheduler][]Measurement{}
		}
		samples[r.Workload][r.Scheduler] = append(samples[r.Workload][r.Scheduler], m)
	}
	var out []Result
	var errs []error
	for _, w := range order {
		v, t := samples[w][Vanilla], samples[w][Tailor]
		if len(v) == 0 || len(t) == 0 {
			errs = append(errs, fmt.Errorf("workload %s has %d vanilla and %d tailor measurements, want at least one of each", w, len(v), len(t)))
			continue
		}
		vanilla, tailor := median(v, podsPerSecond), median(t, podsPerSecond)
		if vanilla <= 0 {
			errs = append(errs, fmt.Errorf("workload %s: vanilla scheduled %g pods/s", w, vanilla))
			continue
		}
		out = append(out, Result{
			Workload: w, Nodes: nodes, PercentageOfNodesToScore: percentage,
			VanillaPodsPerSecond: vanilla, TailorPodsPerSecond: tailor, Ratio: tailor / vanilla,
			VanillaNodesUsed: int(median(v, nodesUsed)), TailorNodesUsed: int(median(t, nodesUsed)),
		})
	}
	return out, errors.Join(errs...)
}

func podsPerSecond(m Measurement) float64 { return m.PodsPerSecond }
func nodesUsed(m Measurement) float64     { return float64(m.NodesUsed) }

// median of an even count is the mean of the middle two.
func median(ms []Measurement, value func(Measurement) float64) float64 {
	vs := make([]float64, len(ms))
	for i, m := range ms {
		vs[i] = value(m)
	}
	slices.Sort(vs)
	mid := len(vs) / 2
	if len(vs)%2 == 0 {
		return (vs[mid-1] + vs[mid]) / 2
	}
	return vs[mid]
}

// WriteTable prints the results for people.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tnodes\tnodes to score\tvanilla pods/s\ttailor pods/s\tratio\tvanilla nodes used\ttailor nodes used")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.1f\t%.3f\t%d\t%d\n", r.Workload, r.Nodes, percentageLabel(r.PercentageOfNodesToScore),
			r.VanillaPodsPerSecond, r.TailorPodsPerSecond, r.Ratio, r.VanillaNodesUsed, r.TailorNodesUsed)
	}
	return tw.Flush()
}

func percentageLabel(p int32) string {
	if p == 0 {
		return "adaptive"
	}
	return fmt.Sprintf("%d%%", p)
}
