// Package workloads gives tests and benchmarks the shared benchmark workloads
// (../shared/workloads), generated once into _output/workloads and loaded as planner input
// with the full embedded catalog.
package workloads

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// Shapes are the workload shapes the generator knows.
var Shapes = []string{"diverse", "webmix", "batch", "tiny"}

// sharedDir is where the shared workload generator lives: $TAILOR_SHARED, or ../shared next
// to the repository.
func sharedDir() string {
	if d := os.Getenv("TAILOR_SHARED"); d != "" {
		return d
	}
	return filepath.Join(testenv.Root(), "..", "shared")
}

// Path returns the path of a generated workload, generating it once. The test is skipped
// when the generator is not there.
func Path(tb testing.TB, shape string, pods int) string {
	tb.Helper()
	dir := filepath.Join(testenv.Root(), "_output", "workloads")
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

// Load returns a generated workload as planner input.
func Load(tb testing.TB, shape string, pods int) packing.Input {
	tb.Helper()
	cat, err := catalog.Embedded()
	if err != nil {
		tb.Fatal(err)
	}
	in, err := simulate.Load([]string{Path(tb, shape, pods)}, cat, aws.OfflineOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return in
}
