// Package e2e runs Tailor as a user does: the whole local stack (real etcd, kube-apiserver,
// kube-controller-manager, kwok, the local AWS endpoint, the provisioner sidecar and
// tailor-scheduler) and workloads applied to it.
package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
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
	opts := localstack.Options{BootDelay: 2 * time.Second, Progress: testWriter{t}}
	for _, c := range configure {
		c(&opts)
	}
	stack, cs, kube := stacktest.Start(t, ctx, opts)
	return &env{stack: stack, cs: cs, kube: kube, ctx: ctx}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
