package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// LDFlags are the linker flags of every binary: no symbol table, no DWARF. Tailor stamps no
// version into its binaries; the image's labels say which commit they are.
const LDFlags = "-s -w"

// Binaries are the binaries Compile built: dir/<os>_<arch>/<name>.
type Binaries struct {
	dir       string
	platforms []v1.Platform
}

// Platforms returns the platforms the binaries were built for.
func (b *Binaries) Platforms() []v1.Platform { return b.platforms }

// Path returns where the binary name for platform p is.
func (b *Binaries) Path(name string, p v1.Platform) string {
	return filepath.Join(b.dir, platformDir(p), name)
}

func platformDir(p v1.Platform) string {
	if p.Variant != "" {
		return p.OS + "_" + p.Architecture + "_" + p.Variant
	}
	return p.OS + "_" + p.Architecture
}

// microarchitecture pins the GOAMD64 or GOARM64 level to the go command's default, so that a
// level set in the environment neither changes the bytes nor narrows the machines they run on.
var microarchitecture = map[string]string{
	"amd64": "GOAMD64=v1",
	"arm64": "GOARM64=v8.0",
}

// Compile cross-builds every spec's binary for every platform with the go command on PATH,
// from the module in moduleDir, into dir: static (CGO_ENABLED=0), with no file-system paths
// (-trimpath), LDFlags and no version-control stamp (-buildvcs=false: git's view of the work
// tree, untracked files included, would change the bytes), so that the same source and
// toolchain give the same bytes whatever the go command's configuration. The go command's
// build cache makes a rebuild of unchanged code a link.
func Compile(ctx context.Context, moduleDir, dir string, specs []Spec, platforms []v1.Platform) (*Binaries, error) {
	bins := &Binaries{dir: dir, platforms: platforms}
	pkgs := make([]string, 0, len(specs))
	for _, s := range specs {
		pkgs = append(pkgs, s.Package)
	}
	for _, p := range platforms {
		if p.Variant != "" {
			return nil, fmt.Errorf("compiling for %s: platform variants are not supported", p)
		}
		march, ok := microarchitecture[p.Architecture]
		if !ok {
			return nil, fmt.Errorf("compiling for %s: unsupported architecture", p)
		}
		out := filepath.Join(dir, platformDir(p))
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, fmt.Errorf("compiling for %s: %w", p, err)
		}
		// -o with a directory names each binary after its package's directory: Spec.Name.
		args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags", LDFlags, "-o", out + string(filepath.Separator)}, pkgs...)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = moduleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, march)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("compiling for %s: %w: %s", p, err, bytes.TrimSpace(stderr.Bytes()))
		}
		for _, s := range specs {
			if _, err := os.Stat(bins.Path(s.Name, p)); err != nil {
				return nil, fmt.Errorf("compiling %s for %s: %w", s.Package, p, err)
			}
		}
	}
	return bins, nil
}
