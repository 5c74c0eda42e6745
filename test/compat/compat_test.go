// Package compat runs a compact end-to-end set against control planes of the Kubernetes
// releases servers.txt lists: kube-apiserver, kube-controller-manager and the default
// kube-scheduler of that release (hack/build-server.sh), with tailor-scheduler and the
// provisioner as built. Each release gets a local stack; each scenario runs on it in turn and
// leaves it empty. It prints a table of release × scenario (pass or fail, seconds) and writes
// it to BENCH_JSON (make test-compat: _output/bench/compat.json).
package compat

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/test/benchout"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// VersionsEnv selects the releases: "all", or a comma-separated list of servers.txt's; the
// newest when unset.
const VersionsEnv = "TAILOR_COMPAT_VERSIONS"

// TableEnv names a file the table is written to as well.
const TableEnv = "COMPAT_TABLE"

// interruptionQueue is the SQS queue the compat stacks' sidecars read spot warnings from.
const interruptionQueue = "tailor-compat-interruptions"

// Result is one scenario on one release.
type Result struct {
	Server   string  `json:"server"`
	Scenario string  `json:"scenario"`
	Passed   bool    `json:"passed"`
	Seconds  float64 `json:"seconds"`
}

// scenarios run in this order on each release's stack.
var scenarios = []struct {
	name string
	run  func(*testing.T, *env)
}{
	{"version skew", versionSkew},
	{"provisioning with nomination", provisioningWithNomination},
	{"gang", gang},
	{"consolidation of an underutilized node", consolidation},
	{"drift by an EC2NodeClass change", drift},
	{"spot interruption", spotInterruption},
	{"explain an unschedulable pod", explainUnschedulable},
}

func TestCompat(t *testing.T) {
	versions, err := selected(os.Getenv(VersionsEnv))
	if err != nil {
		t.Fatal(err)
	}
	var results []Result
	for _, v := range versions {
		t.Run("kubernetes-"+v, func(t *testing.T) {
			e := startStack(t, v)
			for _, sc := range scenarios {
				start := time.Now()
				passed := t.Run(sc.name, func(t *testing.T) {
					defer e.reset(t)
					sc.run(t, e)
				})
				results = append(results, Result{Server: v, Scenario: sc.name, Passed: passed, Seconds: time.Since(start).Seconds()})
			}
		})
	}
	table := render(versions, results)
	t.Log("\n" + table)
	if path := os.Getenv(TableEnv); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
	benchout.Write(t, results)
}

// servers reads servers.txt: the releases, oldest first.
func servers() ([]string, error) {
	raw, err := os.ReadFile("servers.txt")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("servers.txt lists no release")
	}
	return out, nil
}

// selected are the releases the env asks for (see VersionsEnv).
func selected(env string) ([]string, error) {
	all, err := servers()
	if err != nil {
		return nil, err
	}
	switch env {
	case "":
		return all[len(all)-1:], nil
	case "all":
		return all, nil
	}
	var out []string
	for _, v := range strings.Split(env, ",") {
		v = strings.TrimSpace(v)
		if !slices.Contains(all, v) {
			return nil, fmt.Errorf("%s=%q: %s is not in servers.txt (%s)", VersionsEnv, env, v, strings.Join(all, ", "))
		}
		out = append(out, v)
	}
	return out, nil
}

// render is the table of release × scenario.
func render(versions []string, results []Result) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "SCENARIO\t%s\n", strings.Join(versions, "\t"))
	for _, sc := range scenarios {
		row := []string{sc.name}
		for _, v := range versions {
			cell := "-"
			for _, r := range results {
				if r.Server == v && r.Scenario == sc.name {
					cell = fmt.Sprintf("fail %.0fs", r.Seconds)
					if r.Passed {
						cell = fmt.Sprintf("pass %.0fs", r.Seconds)
					}
				}
			}
			row = append(row, cell)
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	_ = w.Flush()
	return b.String()
}

func TestSelected(t *testing.T) {
	all, err := servers()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		env  string
		want []string
	}{
		{"", all[len(all)-1:]},
		{"all", all},
		{all[0], all[:1]},
	}
	for _, tt := range tests {
		got, err := selected(tt.env)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("selected(%q) (-want +got):\n%s", tt.env, diff)
		}
	}
	if _, err := selected("1.20.0"); err == nil || !strings.Contains(err.Error(), "1.20.0 is not in servers.txt") {
		t.Errorf("selected of an unknown release: %v", err)
	}
}

// startStack starts a stack whose control plane is of the release v: the binaries go.mod
// pins when it is that release, hack/build-server.sh's otherwise.
func startStack(t *testing.T, v string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	opts := localstack.Options{
		BootDelay: 2 * time.Second, InterruptionQueue: interruptionQueue, SpotReclaimDelay: 15 * time.Second,
		ProvisionerArgs: []string{"--disruption-interval=2s"}, Progress: testWriter{t},
	}
	if "v"+v != builtKubernetes(t) {
		opts.ServerVersion = v
	}
	stack, cs, kube := stacktest.Start(t, ctx, opts)
	e := &env{ctx: ctx, stack: stack, cs: cs, kube: kube, version: v}
	e.apply(t, filepath.Join("testdata", "nodepool.yaml"))
	return e
}

// builtKubernetes is the k8s.io/kubernetes version go.mod pins.
func builtKubernetes(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	if err != nil {
		t.Fatalf("reading the Kubernetes version go.mod pins: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// tailorctl runs tailorctl against the stack.
func (e *env) tailorctl(t *testing.T, args ...string) string {
	t.Helper()
	args = append(args, "--kubeconfig", e.stack.Kubeconfig)
	out, err := exec.CommandContext(e.ctx, filepath.Join(testenv.Root(), "_output", "bin", "tailorctl"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tailorctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// admin posts to the local endpoint's admin API.
func (e *env) admin(t *testing.T, path, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.stack.AWSEndpoint+"/_admin/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST /_admin/%s: %s", path, resp.Status)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
