// Package workloads gives tests, benchmarks and scenarios the benchmark workloads (Write),
// generated once into _output/workloads and loaded as planner input with the full embedded
// catalog.
package workloads

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// Shapes are the workload shapes Write knows.
var Shapes = []string{"diverse", "webmix", "batch", "tiny"}

// Generate returns the path of a generated workload (of DefaultSeed) under the repository
// root's _output/workloads, generating it once.
func Generate(root, shape string, pods int) (string, error) {
	dir := filepath.Join(root, "_output", "workloads")
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", shape, pods))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := Write(&out, shape, pods, DefaultSeed); err != nil {
		return "", fmt.Errorf("generating %s %d: %w", shape, pods, err)
	}
	// Written whole under another name first, so a reader never sees half a workload.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// Read returns a generated workload as planner input, with the embedded catalog; its pods
// are in the workload's order.
func Read(path string) (packing.Input, error) {
	cat, err := catalog.Embedded()
	if err != nil {
		return packing.Input{}, fmt.Errorf("reading the embedded catalog: %w", err)
	}
	in, err := simulate.Load([]string{path}, cat, aws.OfflineOptions{})
	if err != nil {
		return packing.Input{}, fmt.Errorf("loading workload %s: %w", path, err)
	}
	return in, nil
}

// Path returns the path of a generated workload, generating it once.
func Path(tb testing.TB, shape string, pods int) string {
	tb.Helper()
	path, err := Generate(testenv.Root(), shape, pods)
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Load returns a generated workload as planner input.
func Load(tb testing.TB, shape string, pods int) packing.Input {
	tb.Helper()
	in, err := Read(Path(tb, shape, pods))
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// DeploymentKey identifies the Deployment a workload pod belongs to: the generator writes a
// Deployment's replicas as pods with identical labels and spec.
func DeploymentKey(p *corev1.Pod) (string, error) {
	raw, err := json.Marshal(struct {
		Labels map[string]string
		Spec   corev1.PodSpec
	}{p.Labels, p.Spec})
	if err != nil {
		return "", fmt.Errorf("encoding pod %s: %w", p.Name, err)
	}
	return string(raw), nil
}

// Deployments groups the pods, by their index, into the Deployments they belong to (see
// DeploymentKey), in the order of each Deployment's first pod.
func Deployments(pods []*corev1.Pod) ([][]int, error) {
	index := map[string]int{}
	var out [][]int
	for i, p := range pods {
		key, err := DeploymentKey(p)
		if err != nil {
			return nil, err
		}
		d, ok := index[key]
		if !ok {
			d = len(out)
			index[key] = d
			out = append(out, nil)
		}
		out[d] = append(out[d], i)
	}
	return out, nil
}
