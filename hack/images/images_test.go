package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// built is one build of every image index and of the chart's artifact.
type built struct {
	indexes map[string]v1.ImageIndex
	chart   *Chart
	art     v1.Image
}

func build(t *testing.T, bins *Binaries, stamp Stamp) built {
	t.Helper()
	b := built{indexes: map[string]v1.ImageIndex{}}
	for _, s := range Tailor() {
		idx, err := Index(s, bins, stamp)
		if err != nil {
			t.Fatal(err)
		}
		b.indexes[s.Name] = idx
	}
	var err error
	if b.chart, err = PackageChart(filepath.Join(repoRoot, "manifests/charts/tailor")); err != nil {
		t.Fatal(err)
	}
	if b.art, err = b.chart.Artifact(stamp.Created); err != nil {
		t.Fatal(err)
	}
	return b
}

// digests are every manifest's digest in b: each index's, each of its images', the chart's.
func (b built) digests(t *testing.T) map[string]v1.Hash {
	t.Helper()
	d := map[string]v1.Hash{}
	for n, idx := range b.indexes {
		d[n] = digest(t, idx)
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range im.Manifests {
			d[n+"/"+m.Platform.String()] = m.Digest
		}
	}
	d["charts/tailor"] = digest(t, b.art)
	return d
}

func digest(t *testing.T, m interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestImages builds both images for both platforms from the real binaries and the chart's
// artifact, pushes them to a registry, pulls them back and checks what a node and Helm get.
func TestImages(t *testing.T) {
	ctx := t.Context()
	start := time.Now()
	bins, err := Compile(ctx, repoRoot, t.TempDir(), Tailor(), Platforms())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compiled %d binaries in %s", len(Tailor())*len(Platforms()), time.Since(start).Round(time.Second))
	stamp := Stamp{
		Source:   "https://github.com/tailor-autoscaler/tailor",
		Version:  "0.1.0",
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Created:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	first := build(t, bins, stamp)
	firstDigests := first.digests(t)

	t.Run("same inputs give the same digests", func(t *testing.T) {
		second := build(t, bins, stamp)
		if diff := cmp.Diff(firstDigests, second.digests(t)); diff != "" {
			t.Errorf("digests of a second build (-first +second):\n%s", diff)
		}
	})

	t.Run("the layout holds the index", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tailor-provisioner")
		if err := WriteLayout(dir, first.indexes["tailor-provisioner"], stamp.Version); err != nil {
			t.Fatal(err)
		}
		top, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		im, err := top.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range im.Manifests {
			got = append(got, fmt.Sprintf("%s %s %s", m.MediaType, m.Digest, m.Annotations["org.opencontainers.image.ref.name"]))
		}
		want := []string{fmt.Sprintf("%s %s %s", types.OCIImageIndex, firstDigests["tailor-provisioner"], stamp.Version)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("manifests of the layout's index.json (-want +got):\n%s", diff)
		}
	})

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	prefix := strings.TrimPrefix(srv.URL, "http://") + "/tailor"
	reg, err := NewRegistry(prefix, authn.NewMultiKeychain(), srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	// Pushed with the tag the chart deploys by default, as `make images PUSH=` does.
	tag := first.chart.Metadata.AppVersion
	for _, s := range Tailor() {
		if _, err := reg.PushIndex(ctx, s.Name, tag, first.indexes[s.Name]); err != nil {
			t.Fatal(err)
		}
	}
	chartRef, err := reg.PushImage(ctx, first.chart.Repository(), first.chart.Tag(), first.art)
	if err != nil {
		t.Fatal(err)
	}
	pull := []remote.Option{remote.WithContext(ctx), remote.WithTransport(srv.Client().Transport)}

	for _, s := range Tailor() {
		ref, err := reg.Reference(s.Name, tag)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref, pull...)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, m := range im.Manifests {
			platforms = append(platforms, m.Platform.String())
		}
		if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
			t.Errorf("%s: platforms of the pulled index (-want +got):\n%s", ref, diff)
		}
		for _, m := range im.Manifests {
			t.Run(s.Name+"/"+m.Platform.String(), func(t *testing.T) {
				img, err := idx.Image(m.Digest)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, s, *m.Platform, stamp, img)
			})
		}
	}

	t.Run("chart", func(t *testing.T) {
		img, err := remote.Image(chartRef, pull...)
		if err != nil {
			t.Fatal(err)
		}
		checkChart(t, img, reg, pull)
	})
}

// machines are the ELF machine each architecture runs.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func checkImage(t *testing.T, s Spec, p v1.Platform, stamp Stamp, img v1.Image) {
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.OS+"/"+p.Architecture, cfg.OS+"/"+cfg.Architecture); diff != "" {
		t.Errorf("the config's platform (-want +got):\n%s", diff)
	}
	if !cfg.Created.Equal(stamp.Created) {
		t.Errorf("created at %s, want %s", cfg.Created, stamp.Created)
	}
	want := v1.Config{
		Entrypoint: []string{"/usr/local/bin/" + s.Name},
		User:       "65532:65532",
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.source":   stamp.Source,
			"org.opencontainers.image.version":  stamp.Version,
			"org.opencontainers.image.revision": stamp.Revision,
		},
	}
	if diff := cmp.Diff(want, cfg.Config); diff != "" {
		t.Errorf("the image's config (-want +got):\n%s", diff)
	}
	uid, gid, ok := strings.Cut(cfg.Config.User, ":")
	if !ok || uid == "0" || gid == "0" || uid == "root" || gid == "root" {
		t.Errorf("the image runs as %q, not as a non-root user and group", cfg.Config.User)
	}

	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %s with config %s, want OCI's", m.MediaType, m.Config.MediaType)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]tarFile{}
	for _, l := range layers {
		if mt, err := l.MediaType(); err != nil || mt != types.OCILayer {
			t.Errorf("layer of media type %s (%v), want %s", mt, err, types.OCILayer)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		if err := readTar(rc, files, s.Entrypoint()); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	var got []string
	for n, f := range files {
		got = append(got, n+" "+f.String())
		if f.mode&0o6000 != 0 {
			t.Errorf("%s is setuid or setgid: %o", n, f.mode)
		}
		// A time that varies by build would vary the digest.
		if !f.modTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s modified at %s, want the Unix epoch", n, f.modTime)
		}
	}
	wantFiles := []string{
		"etc/ dir 0755 0:0",
		"etc/group file 0644 0:0",
		"etc/passwd file 0644 0:0",
		"home/ dir 0755 0:0",
		"home/nonroot/ dir 0700 65532:65532",
		"tmp/ dir 1777 0:0",
		"usr/ dir 0755 0:0",
		"usr/local/ dir 0755 0:0",
		"usr/local/bin/ dir 0755 0:0",
		"usr/local/bin/" + s.Name + " file 0755 0:0",
	}
	if diff := cmp.Diff(wantFiles, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("the layers' files (-want +got):\n%s", diff)
	}
	if got := string(files["etc/passwd"].data); !strings.Contains(got, "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", got)
	}
	if got := string(files["etc/group"].data); !strings.Contains(got, "nonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot group 65532:\n%s", got)
	}

	bin := files[strings.TrimPrefix(s.Entrypoint(), "/")]
	if bin.data == nil {
		t.Fatalf("the entrypoint %s is not in the layers", s.Entrypoint())
	}
	if bin.mode&0o111 == 0 {
		t.Errorf("the entrypoint is not executable: %o", bin.mode)
	}
	f, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("the entrypoint is not an ELF file: %v", err)
	}
	if f.Machine != machines[p.Architecture] {
		t.Errorf("the entrypoint is an ELF for %s, want %s", f.Machine, machines[p.Architecture])
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("the entrypoint is dynamically linked (it names an interpreter); the image has no libc")
		}
	}
}

// tarFile is what a test checks of a file in a layer.
type tarFile struct {
	dir      bool
	mode     int64
	uid, gid int
	modTime  time.Time
	// data is the contents of the files a test reads.
	data []byte
}

func (f tarFile) String() string {
	kind := "file"
	if f.dir {
		kind = "dir"
	}
	return fmt.Sprintf("%s %04o %d:%d", kind, f.mode, f.uid, f.gid)
}

// readTar adds the files of the tar r to files, reading the contents of /etc's and of the
// entrypoint. Every entry must be a regular file or a directory.
func readTar(r io.Reader, files map[string]tarFile, entrypoint string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		f := tarFile{mode: h.Mode, uid: h.Uid, gid: h.Gid, modTime: h.ModTime}
		switch h.Typeflag {
		case tar.TypeDir:
			f.dir = true
		case tar.TypeReg:
			if strings.HasPrefix(h.Name, "etc/") || "/"+h.Name == entrypoint {
				if f.data, err = io.ReadAll(tr); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%s: tar entry of type %q, want a file or a directory", h.Name, h.Typeflag)
		}
		files[h.Name] = f
	}
}

func checkChart(t *testing.T, img v1.Image, reg *Registry, pull []remote.Option) {
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var layerTypes []types.MediaType
	for _, l := range m.Layers {
		layerTypes = append(layerTypes, l.MediaType)
	}
	gotTypes := []types.MediaType{m.MediaType, m.Config.MediaType}
	gotTypes = append(gotTypes, layerTypes...)
	wantTypes := []types.MediaType{types.OCIManifestSchema1, "application/vnd.cncf.helm.config.v1+json", "application/vnd.cncf.helm.chart.content.v1.tar+gzip"}
	if diff := cmp.Diff(wantTypes, gotTypes); diff != "" {
		t.Fatalf("media types of the manifest, its config and its layers (-want +got):\n%s", diff)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var meta ChartMetadata
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("the config is not the chart's metadata: %v", err)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files, err := untgz(rc)
	if err != nil {
		t.Fatal(err)
	}
	var chartYAML ChartMetadata
	if err := yaml.Unmarshal(files["tailor/Chart.yaml"], &chartYAML); err != nil {
		t.Fatalf("tailor/Chart.yaml: %v", err)
	}
	if diff := cmp.Diff(chartYAML, meta); diff != "" {
		t.Errorf("the config against the packaged Chart.yaml (-Chart.yaml +config):\n%s", diff)
	}
	if _, ok := files["tailor/templates/deployment.yaml"]; !ok {
		t.Errorf("the package has no tailor/templates/deployment.yaml")
	}
	var values struct {
		Scheduler, Provisioner struct {
			Image struct{ Repository, Tag string }
		}
	}
	if err := yaml.Unmarshal(files["tailor/values.yaml"], &values); err != nil {
		t.Fatalf("tailor/values.yaml: %v", err)
	}
	// The chart's default images, as its tailor.image helper renders them, under the prefix.
	for _, image := range []struct{ Repository, Tag string }{values.Scheduler.Image, values.Provisioner.Image} {
		tag := image.Tag
		if tag == "" {
			tag = chartYAML.AppVersion
		}
		ref, err := reg.Reference(image.Repository, tag)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref, pull...)
		if err != nil {
			t.Errorf("the chart's default image %s:%s is not in the registry: %v", image.Repository, tag, err)
			continue
		}
		if desc.MediaType != types.OCIImageIndex {
			t.Errorf("%s is a %s, want an image index", ref, desc.MediaType)
		}
	}
}

// untgz returns the regular files of a gzip-compressed tar by name.
func untgz(r io.Reader) (map[string][]byte, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%s: tar entry of type %q, want a regular file", h.Name, h.Typeflag)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			return nil, err
		}
	}
}
