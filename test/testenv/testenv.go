// Package testenv gives integration tests a real API server: envtest running the etcd and
// kube-apiserver that hack/build.sh builds, with Tailor's CRDs installed.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Root is the repository root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
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
