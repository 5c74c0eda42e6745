package images

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// WriteLayout writes idx as the OCI image layout in dir, replacing what dir held, its one
// manifest named tag (org.opencontainers.image.ref.name), as tools that copy from a layout
// (skopeo's oci:<dir>:<tag>) expect.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	return writeLayout(dir, tag, func(p layout.Path, o layout.Option) error { return p.AppendIndex(idx, o) })
}

// WriteImageLayout writes img, one manifest such as the chart's artifact, as the OCI image
// layout in dir, replacing what dir held, its manifest named tag.
func WriteImageLayout(dir string, img v1.Image, tag string) error {
	return writeLayout(dir, tag, func(p layout.Path, o layout.Option) error { return p.AppendImage(img, o) })
}

func writeLayout(dir, tag string, add func(layout.Path, layout.Option) error) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the layout in %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("writing the layout in %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the layout in %s: %w", dir, err)
	}
	if err := add(p, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return fmt.Errorf("writing the layout in %s: %w", dir, err)
	}
	return nil
}

// Registry pushes images and charts to repositories under one prefix of a registry,
// <registry>/<path>: <prefix>/<image>:<tag> and <prefix>/charts/<chart>:<version>.
type Registry struct {
	prefix    name.Repository
	keychain  authn.Keychain
	transport http.RoundTripper
}

// NewRegistry returns a Registry pushing under prefix, with the credentials keychain finds
// for it (authn.DefaultKeychain: the docker config's auths and credential helpers) over
// transport (nil: http.DefaultTransport). A prefix on localhost or a loopback address is
// reached over plain HTTP, others over HTTPS.
func NewRegistry(prefix string, keychain authn.Keychain, transport http.RoundTripper) (*Registry, error) {
	repo, err := name.NewRepository(prefix, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("parsing the registry prefix %q: %w", prefix, err)
	}
	if transport == nil {
		transport = http.DefaultTransport
	}
	return &Registry{prefix: repo, keychain: keychain, transport: transport}, nil
}

// Reference returns <prefix>/<repository>:<tag>.
func (r *Registry) Reference(repository, tag string) (name.Tag, error) {
	ref, err := name.NewTag(r.prefix.String()+"/"+repository+":"+tag, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("naming %s:%s under %s: %w", repository, tag, r.prefix, err)
	}
	return ref, nil
}

// PushIndex pushes idx, with every image it holds, as <prefix>/<repository>:<tag>, and
// returns the reference it pushed.
func (r *Registry) PushIndex(ctx context.Context, repository, tag string, idx v1.ImageIndex) (name.Tag, error) {
	ref, err := r.Reference(repository, tag)
	if err != nil {
		return name.Tag{}, err
	}
	if err := remote.WriteIndex(ref, idx, r.options(ctx)...); err != nil {
		return name.Tag{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

// PushImage pushes img, one manifest such as the chart's artifact, as
// <prefix>/<repository>:<tag>, and returns the reference it pushed.
func (r *Registry) PushImage(ctx context.Context, repository, tag string, img v1.Image) (name.Tag, error) {
	ref, err := r.Reference(repository, tag)
	if err != nil {
		return name.Tag{}, err
	}
	if err := remote.Write(ref, img, r.options(ctx)...); err != nil {
		return name.Tag{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

func (r *Registry) options(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(r.keychain),
		remote.WithTransport(r.transport),
	}
}
