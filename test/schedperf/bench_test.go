package schedperf

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config/scheme"
	"github.com/tailor-autoscaler/tailor/plugin/nodeprovisioning"
	provisionerv1 "github.com/tailor-autoscaler/tailor/proto/tailor/provisioner/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/handoff"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
)

var (
	nodes        = flag.Int("nodes", 5000, "nodes of every workload")
	rounds       = flag.Int("rounds", 1, "how many times each workload runs with each scheduler; the results are the medians")
	percentage   = flag.String("percentage-of-nodes-to-score", "", "replaces the shipped profile's percentageOfNodesToScore (0: adaptive); empty: as shipped")
	resultsJSON  = flag.String("results-json", "", "file to write the results to as JSON")
	resultsTable = flag.String("results-table", "", "file to write the results to as a table")
)

// topic names the benchmark's files in scheduler_perf's data items directory.
const topic = "tailor"

// TestMain parses scheduler_perf's flags (logging among them) beside the benchmark's, and
// registers the plugin's args with the scheduler. Nothing starts unless -bench asks for it.
func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scheme.AddToScheduler()
	os.Exit(m.Run())
}

// BenchmarkSchedulerThroughput runs every workload of testdata/workloads.yaml with the
// vanilla and the Tailor configuration (see Profiles) side by side through scheduler_perf,
// which starts etcd (from PATH), an API server and the scheduler afresh for each run, and
// reports pods/s per workload and configuration, their ratio, and the nodes left running
// pods. NodeProvisioning talks to the provisioner's real gRPC server, with no nomination.
func BenchmarkSchedulerThroughput(b *testing.B) {
	dir := b.TempDir()
	socket := filepath.Join(dir, "provisioner.sock")
	submitted := serveProvisioner(b, socket)

	var override *int32
	if *percentage != "" {
		p, err := strconv.ParseInt(*percentage, 10, 32)
		if err != nil {
			b.Fatalf("-percentage-of-nodes-to-score=%s: %v", *percentage, err)
		}
		override = ptr.To(int32(p))
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "manifests", "scheduler", "config.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	vanilla, tailor, err := Profiles(shipped, socket, override)
	if err != nil {
		b.Fatal(err)
	}
	effective, err := EffectivePercentage(tailor)
	if err != nil {
		b.Fatal(err)
	}
	configs := map[Scheduler]string{Vanilla: filepath.Join(dir, "vanilla.yaml"), Tailor: filepath.Join(dir, "tailor.yaml")}
	writeFile(b, configs[Vanilla], vanilla)
	writeFile(b, configs[Tailor], tailor)

	workloads, err := os.ReadFile(filepath.Join("testdata", "workloads.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	names, err := WorkloadNames(workloads)
	if err != nil {
		b.Fatal(err)
	}
	runs := Plan(names, *rounds)
	perfConfig, err := PerfConfig(workloads, runs, configs, DefaultSizes(*nodes))
	if err != nil {
		b.Fatal(err)
	}
	perfConfigPath := filepath.Join(dir, "performance-config.yaml")
	writeFile(b, perfConfigPath, perfConfig)

	// scheduler_perf writes its data items (throughput, latencies per extension point and
	// plugin) where -data-items-dir says, by default to a temporary directory.
	dataDir := flag.Lookup("data-items-dir").Value.String()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
		if err := flag.Set("data-items-dir", dataDir); err != nil {
			b.Fatal(err)
		}
	}
	nodesUsed := map[string]int{}
	perf.RunBenchmarkPerfScheduling(b, perfConfigPath, topic,
		frameworkruntime.Registry{nodeprovisioning.Name: nodeprovisioning.New},
		perf.WithPrepareFn(func(tCtx ktesting.TContext) error {
			testCase := testCaseOf(tCtx.Name())
			client := tCtx.Client()
			// Cleanups run last first: this one runs once the workload is done, before the
			// API server stops.
			tCtx.Cleanup(func() {
				n, err := nodesRunningPods(client)
				if err != nil {
					tCtx.Errorf("counting the nodes running pods: %v", err)
					return
				}
				nodesUsed[testCase] = n
			})
			return nil
		}))
	if n := submitted.Load(); n > 0 {
		b.Errorf("%d pods reached NodeProvisioning's PostFilter: some workload does not fit its nodes, and the figures are not those of existing nodes", n)
	}

	measured, err := readMeasurements(dataDir, runs, nodesUsed)
	if err != nil {
		b.Fatal(err)
	}
	results, err := Compare(runs, measured, *nodes, effective)
	if err != nil {
		b.Error(err)
	}
	var table strings.Builder
	if err := WriteTable(&table, results); err != nil {
		b.Fatal(err)
	}
	b.Logf("scheduler throughput:\n%s", table.String())
	if *resultsTable != "" {
		writeFile(b, *resultsTable, []byte(table.String()))
	}
	if *resultsJSON != "" {
		out, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		writeFile(b, *resultsJSON, append(out, '\n'))
	}
}

// testCaseOf returns the scheduler_perf test case of a workload's benchmark name,
// "<benchmark>/<test case>/<workload>".
func testCaseOf(name string) string {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return name
	}
	return parts[len(parts)-2]
}

// readMeasurements reads the throughput of every run from the newest data items file of
// the benchmark in dataDir (scheduler_perf stamps their names with the time).
func readMeasurements(dataDir string, runs []Run, nodesUsed map[string]int) (map[Run]Measurement, error) {
	files, err := filepath.Glob(filepath.Join(dataDir, "BenchmarkSchedulerThroughput_benchmark_"+topic+"_*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no scheduler_perf data items file in %s (%v)", dataDir, err)
	}
	slices.Sort(files)
	f, err := os.Open(files[len(files)-1])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	throughputs, err := Throughputs(f)
	if err != nil {
		return nil, err
	}
	measured := map[Run]Measurement{}
	for _, r := range runs {
		if pps, ok := throughputs[r.TestCaseName()]; ok {
			measured[r] = Measurement{PodsPerSecond: pps, NodesUsed: nodesUsed[r.TestCaseName()]}
		}
	}
	return measured, nil
}

// nodesRunningPods counts the nodes pods are bound to.
func nodesRunningPods(client kubernetes.Interface) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	used := sets.New[string]()
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			used.Insert(p.Spec.NodeName)
		}
	}
	return used.Len(), nil
}

// countingSubmitter accepts the pods the plugin hands over and plans none; on existing
// nodes none should come.
type countingSubmitter struct{ pods *atomic.Int64 }

func (c countingSubmitter) Submit(subs []provisioning.Submission) int {
	c.pods.Add(int64(len(subs)))
	return len(subs)
}

func (countingSubmitter) Pending() int { return 0 }

// serveProvisioner serves the provisioner's gRPC API on socket for the whole benchmark, with
// no nomination, and returns the count of pods submitted. It returns once a client has read
// the nomination snapshot: scheduler_perf checks that each run leaves no goroutine behind
// that was not running before it, and the server's own must be running by then.
func serveProvisioner(b *testing.B, socket string) *atomic.Int64 {
	b.Helper()
	submitted := &atomic.Int64{}
	ctx, cancel := context.WithCancel(ctrllog.IntoContext(context.Background(), logr.Discard()))
	done := make(chan error, 1)
	go func() {
		done <- handoff.Serve(ctx, socket, handoff.NewServer(countingSubmitter{submitted}, nomination.NewTracker(clock.RealClock{}), handoff.Options{}))
	}()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("serving the provisioner API: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		callCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := provisionerv1.NewProvisionerClient(conn).WatchNominations(callCtx, &provisionerv1.WatchNominationsRequest{})
		if err != nil {
			return false, nil
		}
		resp, err := stream.Recv()
		return err == nil && resp.GetSnapshot(), nil
	})
	if err != nil {
		b.Fatalf("waiting for the provisioner API on %s: %v", socket, err)
	}
	return submitted
}

func writeFile(b *testing.B, path string, data []byte) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
}
