// Package e2e runs Tailor as a user does: the whole local stack (real etcd, kube-apiserver,
// kube-controller-manager, kwok, the local AWS endpoint, the provisioner sidecar and
// tailor-scheduler) and workloads applied to it.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// env is a running stack and clients for it.
type env struct {
	stack *localstack.Stack
	cs    kubernetes.Interface
	kube  client.Client
	ctx   context.Context
}

// startStack starts a fresh local stack for one test and stops it when the test ends; on
// failure the last lines of every component's log go to the test log.
func startStack(t *testing.T, configure ...func(*localstack.Options)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	opts := localstack.Options{Root: testenv.Root(), Dir: dir, BootDelay: 2 * time.Second, Progress: testWriter{t}}
	for _, c := range configure {
		c(&opts)
	}
	stack, err := localstack.Up(ctx, opts)
	if err != nil {
		t.Fatalf("starting the local stack: %v", err)
	}
	t.Cleanup(func() {
		stack.Down()
		if t.Failed() {
			dumpLogs(t, dir)
		}
	})
	cs, err := kubernetes.NewForConfig(stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(stack.Config, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return &env{stack: stack, cs: cs, kube: kube, ctx: ctx}
}

// keepLogsEnv names a directory where a failed test's complete component logs are copied.
const keepLogsEnv = "TAILOR_E2E_LOGS"

func dumpLogs(t *testing.T, dir string) {
	keep := os.Getenv(keepLogsEnv)
	if keep != "" {
		keep = filepath.Join(keep, t.Name())
		if err := os.MkdirAll(keep, 0o755); err != nil {
			t.Logf("keeping logs: %v", err)
			keep = ""
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if keep != "" {
			if err := os.WriteFile(filepath.Join(keep, filepath.Base(l)), raw, 0o644); err != nil {
				t.Logf("keeping %s: %v", filepath.Base(l), err)
			}
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("--- %s ---\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
