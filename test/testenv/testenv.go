// Package testenv gives integration tests a real API server: envtest running the etcd and
// kube-apiserver that hack/build.sh builds, with Tailor's CRDs installed.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/informers"
)

// Root is the repository root.
func Root() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BinDir holds the binaries hack/build.sh builds.
func BinDir() string { return filepath.Join(Root(), "_output", "bin") }

// Environment returns an envtest environment with the CRDs, or an error naming what to
// build when the binaries are missing.
func Environment() (*envtest.Environment, error) {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(BinDir(), b)); err != nil {
			return nil, fmt.Errorf("integration tests need %s: run `make binaries` first: %w", b, err)
		}
	}
	return &envtest.Environment{
		BinaryAssetsDirectory: BinDir(),
		CRDDirectoryPaths:     []string{filepath.Join(Root(), "manifests", "crds")},
		ErrorIfCRDPathMissing: true,
	}, nil
}

// Run serves a package's TestMain: it starts an API server with the CRDs, hands its client
// configuration to setup, runs the tests, stops the server and returns the tests' exit code.
// A fuzzing run (-fuzz, see make fuzz) starts none: fuzz targets need none, and the fuzzing
// coordinator was left waiting on the worker processes that each started one.
func Run(m *testing.M, setup func(cfg *rest.Config) error) int {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	env, err := Environment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	code := 1
	if err := setup(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the tests:", err)
	} else {
		code = m.Run()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	return code
}

// Main serves a package's TestMain: it starts an API server with the CRDs, sets *cfg to its
// client configuration and *kube to a client with Tailor's scheme (each unless nil), runs
// the tests, stops the server and exits with the tests' code.
func Main(m *testing.M, cfg **rest.Config, kube *client.Client) {
	os.Exit(Run(m, func(c *rest.Config) error {
		if cfg != nil {
			*cfg = c
		}
		if kube == nil {
			return nil
		}
		var err error
		*kube, err = client.New(c, client.Options{Scheme: apischeme.New()})
		return err
	}))
}

// NewManager returns a controller manager on the test's API server, serving no metrics, for
// tests that run controllers as the sidecar does: its cache holds what the sidecar's holds
// (see package informers). Start it with StartManager.
func NewManager(t testing.TB, cfg *rest.Config) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     apischeme.New(),
		Cache:      informers.CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// StartManager runs the manager until the test ends, and fails the test if it stops with an
// error.
func StartManager(t testing.TB, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// Parallel runs f for 0 to n-1 on a few workers, as many requests to the API server at once
// as a busy cluster's clients make, and fails the test on the first error.
func Parallel(tb testing.TB, n int, f func(i int) error) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}
