package schedperf

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// Sizes are the parameters every workload of workloads.yaml takes.
type Sizes struct {
	Nodes        int
	InitPods     int
	MeasuredPods int
}

// DefaultSizes are the sizes for a number of nodes: a fifth as many pods running, then two
// fifths as many measured, at least 1,000 so that scheduling lasts long enough for
// scheduler_perf to sample its rate. scheduler_perf gives each createPods op 10 minutes:
// at 5,000 nodes on 2 busy cores, the topology spread schedules 4 to 7 pods a second.
func DefaultSizes(nodes int) Sizes {
	return Sizes{Nodes: nodes, InitPods: nodes / 5, MeasuredPods: max(1000, nodes*2/5)}
}

// Plan lists the runs of a benchmark, round by round and workload by workload: vanilla and
// Tailor run one after the other, in the same machine state, and swap order from one
// round to the next so that neither always runs first.
func Plan(workloads []string, rounds int) []Run {
	var runs []Run
	for round := 1; round <= rounds; round++ {
		for _, w := range workloads {
			pair := []Scheduler{Vanilla, Tailor}
			if round%2 == 0 {
				pair = []Scheduler{Tailor, Vanilla}
			}
			for _, s := range pair {
				runs = append(runs, Run{Workload: w, Scheduler: s, Round: round})
			}
		}
	}
	return runs
}

// workload is one entry of workloads.yaml.
type workload struct {
	Name             string `json:"name"`
	WorkloadTemplate []any  `json:"workloadTemplate"`
}

// WorkloadNames lists the workloads of workloads.yaml in order.
func WorkloadNames(workloads []byte) ([]string, error) {
	ws, err := parseWorkloads(workloads)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name
	}
	return names, nil
}

func parseWorkloads(workloads []byte) ([]workload, error) {
	var ws []workload
	if err := yaml.UnmarshalStrict(workloads, &ws); err != nil {
		return nil, fmt.Errorf("parsing workloads: %w", err)
	}
	for i, w := range ws {
		if w.Name == "" || len(w.WorkloadTemplate) == 0 {
			return nil, fmt.Errorf("workload %d: want a name and a workloadTemplate", i)
		}
	}
	return ws, nil
}

// perfTestCase is a scheduler_perf test case, as its configuration file spells it.
type perfTestCase struct {
	Name                string         `json:"name"`
	Labels              []string       `json:"labels"`
	SchedulerConfigPath string         `json:"schedulerConfigPath"`
	WorkloadTemplate    []any          `json:"workloadTemplate"`
	Workloads           []perfWorkload `json:"workloads"`
}

type perfWorkload struct {
	Name   string         `json:"name"`
	Params map[string]int `json:"params"`
}

// perfLabel is the label scheduler_perf's benchmark runs test cases with by default.
const perfLabel = "performance"

// PerfConfig renders scheduler_perf's configuration for the runs: a test case per run, with
// its workload's template from workloads.yaml, the scheduler configuration at
// schedulerConfigs[run.Scheduler], and the sizes as parameters.
func PerfConfig(workloads []byte, runs []Run, schedulerConfigs map[Scheduler]string, sizes Sizes) ([]byte, error) {
	ws, err := parseWorkloads(workloads)
	if err != nil {
		return nil, err
	}
	templates := map[string][]any{}
	for _, w := range ws {
		templates[w.Name] = w.WorkloadTemplate
	}
	params := map[string]int{"nodes": sizes.Nodes, "initPods": sizes.InitPods, "measuredPods": sizes.MeasuredPods}
	cases := make([]perfTestCase, 0, len(runs))
	for _, r := range runs {
		tmpl, ok := templates[r.Workload]
		if !ok {
			return nil, fmt.Errorf("run %s: no workload %s", r.TestCaseName(), r.Workload)
		}
		path, ok := schedulerConfigs[r.Scheduler]
		if !ok {
			return nil, fmt.Errorf("run %s: no configuration for scheduler %s", r.TestCaseName(), r.Scheduler)
		}
		cases = append(cases, perfTestCase{
			Name: r.TestCaseName(), Labels: []string{perfLabel}, SchedulerConfigPath: path, WorkloadTemplate: tmpl,
			Workloads: []perfWorkload{{Name: fmt.Sprintf("%dNodes", sizes.Nodes), Params: params}},
		})
	}
	return yaml.Marshal(cases)
}
