// Package images builds Tailor's container images and publishes them with its Helm chart,
// with no container runtime and no base image: each binary is cross-compiled for every
// platform and laid on an empty image with the few files a static, non-root binary needs; the
// images of one binary form an OCI image index, written as an OCI layout or pushed to a
// registry. The same inputs give the same digests: the layers' file times, owners and order
// are fixed, and an image's created time is the one it is stamped with (the commit's).
package images

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Non-root user and group every image runs as: distroless' nonroot.
const (
	NonRootUID = 65532
	NonRootGID = 65532
)

// BinDir is where an image's binary is, as /usr/local/bin/<name>.
const BinDir = "/usr/local/bin"

// OCI annotation keys the images' labels use.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
)

// path is the PATH of every image, distroless' (only BinDir exists).
const envPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Spec is one of Tailor's images: the binary it runs and the main package that builds it.
type Spec struct {
	// Name names the image and its binary, BinDir/<Name>.
	Name string
	// Package is the binary's main package, relative to the module root.
	Package string
}

// Entrypoint is the path of the image's binary.
func (s Spec) Entrypoint() string { return BinDir + "/" + s.Name }

// Tailor returns the images Tailor ships.
func Tailor() []Spec {
	return []Spec{
		{Name: "tailor-scheduler", Package: "./plugin/cmd/tailor-scheduler"},
		{Name: "tailor-provisioner", Package: "./provisioner/cmd/tailor-provisioner"},
	}
}

// Platforms returns the platforms every image is built for.
func Platforms() []v1.Platform {
	return []v1.Platform{
		{OS: "linux", Architecture: "amd64"},
		{OS: "linux", Architecture: "arm64"},
	}
}

// Stamp is what the images say about where they come from.
type Stamp struct {
	// Source is the repository's URL (org.opencontainers.image.source).
	Source string
	// Version is the release the images are tagged with (org.opencontainers.image.version).
	Version string
	// Revision is the commit they are built from (org.opencontainers.image.revision).
	Revision string
	// Created is the images' created time: the commit's, so that a rebuild gives the same digest.
	Created time.Time
}

// Index builds spec's image index: one image per platform of bins, each holding the binary
// bins has for that platform.
func Index(spec Spec, bins *Binaries, stamp Stamp) (v1.ImageIndex, error) {
	base, err := baseLayer()
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	var adds []mutate.IndexAddendum
	for _, p := range bins.Platforms() {
		img, err := Image(spec, p, base, bins.Path(spec.Name, p), stamp)
		if err != nil {
			return nil, fmt.Errorf("building %s for %s: %w", spec.Name, p, err)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}},
		})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// Image builds spec's image for platform p: the base layer, then a layer holding only the
// binary at binary.
func Image(spec Spec, p v1.Platform, base v1.Layer, binary string, stamp Stamp) (v1.Image, error) {
	bin, err := binaryLayer(spec.Entrypoint(), binary)
	if err != nil {
		return nil, fmt.Errorf("building the binary's layer: %w", err)
	}
	created := v1.Time{Time: stamp.Created.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "tailor-images: " + baseFiles, Comment: "users root and nonroot (65532)"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: created, CreatedBy: "tailor-images: " + spec.Entrypoint()}},
	)
	if err != nil {
		return nil, fmt.Errorf("appending layers: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = created
	cfg.Config = v1.Config{
		Entrypoint: []string{spec.Entrypoint()},
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootGID),
		WorkingDir: "/",
		Env:        []string{envPath},
		Labels: map[string]string{
			LabelSource:   stamp.Source,
			LabelVersion:  stamp.Version,
			LabelRevision: stamp.Revision,
		},
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}
