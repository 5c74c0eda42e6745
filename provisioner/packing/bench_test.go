package packing_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
)

// The benchmarks plan the workloads of ../shared/workloads with the full embedded catalog
// (1,345 instance types) and report, besides time and allocations per plan: pods planned
// per second, nodes, the plan's $/hour and its ratio to the LP lower bound.

// sharedDir is where the shared workload generator lives: $TAILOR_SHARED, or ../shared next
// to the repository.
func sharedDir() string {
	if d := os.Getenv("TAILOR_SHARED"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "..", "shared")
}

// workload returns the path of a generated workload, generating it once into
// _output/workloads.
func workload(tb testing.TB, shape string, pods int) string {
	tb.Helper()
	dir := filepath.Join("..", "..", "_output", "workloads")
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", shape, pods))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	generator := filepath.Join(sharedDir(), "workloads", "generate.py")
	if _, err := os.Stat(generator); err != nil {
		tb.Skipf("workload generator %s not found (set TAILOR_SHARED): %v", generator, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command("python3", generator, shape, fmt.Sprint(pods)).Output()
	if err != nil {
		tb.Fatalf("generating %s %d: %v", shape, pods, err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

func loadWorkload(tb testing.TB, shape string, pods int) packing.Input {
	tb.Helper()
	cat, err := catalog.Embedded()
	if err != nil {
		tb.Fatal(err)
	}
	in, err := simulate.Load([]string{workload(tb, shape, pods)}, cat, aws.OfflineOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

var shapes = []string{"diverse", "webmix", "batch", "tiny"}

func BenchmarkSolve(b *testing.B) {
	for _, shape := range shapes {
		for _, pods := range []int{1000, 5000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", shape, pods), func(b *testing.B) {
				in := loadWorkload(b, shape, pods)
				var plan packing.Plan
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					plan = packing.Solve(in)
				}
				b.StopTimer()
				bound, err := packing.LowerBound(in, plan)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
				b.ReportMetric(float64(len(plan.NewNodeClaims)), "nodes")
				b.ReportMetric(plan.PricePerHour(), "$/hour")
				if bound > 0 {
					b.ReportMetric(plan.PricePerHour()/bound, "x-bound")
				}
				b.ReportMetric(float64(len(plan.Unschedulable)), "unschedulable")
			})
		}
	}
}
