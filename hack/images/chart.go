package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// Helm's media types for a chart stored in an OCI registry.
const (
	ChartConfigMediaType  types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	ChartContentMediaType types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// ChartMetadata is a chart's Chart.yaml, with the JSON field names of Helm's chart.Metadata,
// which is what Helm stores as the config of a chart pushed to a registry.
type ChartMetadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []ChartMaintainer `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []json.RawMessage `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// ChartMaintainer is one of Chart.yaml's maintainers.
type ChartMaintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// Chart is a packaged Helm chart.
type Chart struct {
	// Metadata is its Chart.yaml.
	Metadata ChartMetadata
	// Archive is the package, as `helm package` makes it: every file of the chart's directory
	// that .helmignore does not leave out, under <name>/, gzip-compressed, with fixed times
	// and owners so that the same files give the same bytes.
	Archive []byte
}

// Tag is the tag Helm gives the chart in a registry: its version, + written as _ (a tag
// cannot hold +).
func (c *Chart) Tag() string { return strings.ReplaceAll(c.Metadata.Version, "+", "_") }

// Repository is the chart's repository under a registry prefix, charts/<name>: the images
// keep the names of their binaries beside it.
func (c *Chart) Repository() string { return "charts/" + c.Metadata.Name }

// PackageChart packages the chart in dir.
func PackageChart(dir string) (*Chart, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the chart's metadata: %w", err)
	}
	var c Chart
	if err := yaml.UnmarshalStrict(raw, &c.Metadata); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", filepath.Join(dir, "Chart.yaml"), err)
	}
	if c.Metadata.Name == "" || c.Metadata.Version == "" {
		return nil, fmt.Errorf("parsing %s: a chart needs a name and a version", filepath.Join(dir, "Chart.yaml"))
	}
	ignore, err := readHelmignore(filepath.Join(dir, ".helmignore"))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	// WalkDir visits in lexical order: the archive's order is fixed.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignore.ignored(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// Helm packages only regular files, each 0644.
		return writeEntry(tw, entry{name: path.Join(c.Metadata.Name, rel), mode: 0o644, data: data})
	})
	if err != nil {
		return nil, fmt.Errorf("packaging the chart in %s: %w", dir, err)
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return nil, fmt.Errorf("packaging the chart in %s: %w", dir, err)
	}
	c.Archive = buf.Bytes()
	return &c, nil
}

// Artifact is the chart as Helm pushes it to a registry: an OCI manifest whose config is the
// chart's metadata as JSON and whose one layer is the package, annotated as Helm annotates it,
// created at created.
func (c *Chart) Artifact(created time.Time) (v1.Image, error) {
	config, err := json.Marshal(c.Metadata)
	if err != nil {
		return nil, fmt.Errorf("encoding the chart's metadata: %w", err)
	}
	configDesc, err := partial.Descriptor(static.NewLayer(config, ChartConfigMediaType))
	if err != nil {
		return nil, err
	}
	content := static.NewLayer(c.Archive, ChartContentMediaType)
	contentDesc, err := partial.Descriptor(content)
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        *configDesc,
		Layers:        []v1.Descriptor{*contentDesc},
		Annotations:   c.annotations(created),
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the chart's manifest: %w", err)
	}
	return partial.CompressedToImage(&chartArtifact{config: config, manifest: manifest, content: content})
}

// annotations are the manifest annotations Helm derives from a chart's metadata, then the
// chart's own annotations, which may not override them.
func (c *Chart) annotations(created time.Time) map[string]string {
	m := c.Metadata
	a := map[string]string{}
	for k, v := range m.Annotations {
		a[k] = v
	}
	set := func(k, v string) {
		if strings.TrimSpace(v) != "" {
			a[k] = v
		}
	}
	set("org.opencontainers.image.description", m.Description)
	set("org.opencontainers.image.title", m.Name)
	set("org.opencontainers.image.version", m.Version)
	set("org.opencontainers.image.url", m.Home)
	set("org.opencontainers.image.created", created.UTC().Format(time.RFC3339))
	if len(m.Sources) > 0 {
		set("org.opencontainers.image.source", m.Sources[0])
	}
	var authors []string
	for _, mt := range m.Maintainers {
		switch {
		case mt.Name != "" && mt.Email != "":
			authors = append(authors, mt.Name+" ("+mt.Email+")")
		case mt.Name != "":
			authors = append(authors, mt.Name)
		}
	}
	set("org.opencontainers.image.authors", strings.Join(authors, ", "))
	return a
}

// chartArtifact is the minimum go-containerregistry needs to push a manifest whose config is
// not an image's.
type chartArtifact struct {
	config, manifest []byte
	content          v1.Layer
}

var _ partial.CompressedImageCore = &chartArtifact{}

// RawConfigFile returns the chart's metadata as JSON.
func (a *chartArtifact) RawConfigFile() ([]byte, error) { return a.config, nil }

// MediaType returns the manifest's media type.
func (a *chartArtifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// RawManifest returns the manifest.
func (a *chartArtifact) RawManifest() ([]byte, error) { return a.manifest, nil }

// LayerByDigest returns the package, the artifact's one layer.
func (a *chartArtifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	d, err := a.content.Digest()
	if err != nil {
		return nil, err
	}
	if h != d {
		return nil, fmt.Errorf("the chart artifact has no layer %s", h)
	}
	return a.content, nil
}

// helmignore is a .helmignore: patterns read in order, the first that matches deciding.
type helmignore []ignoreRule

type ignoreRule struct {
	pattern string
	// negate marks a pattern written !pattern: a path it matches is kept.
	negate bool
	// dirOnly marks a pattern written pattern/: it matches directories only.
	dirOnly bool
}

// readHelmignore reads the .helmignore at p; a chart without one ignores nothing but what
// Helm always leaves out.
func readHelmignore(p string) (helmignore, error) {
	raw, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return parseHelmignore(string(raw))
}

func parseHelmignore(text string) (helmignore, error) {
	// Helm always leaves out hidden files in templates/.
	rules := helmignore{{pattern: "templates/.?*"}}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") {
			return nil, fmt.Errorf("parsing .helmignore: %q: Helm does not support **", line)
		}
		var r ignoreRule
		if strings.HasPrefix(line, "!") {
			r.negate, line = true, line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimSuffix(line, "/")
		}
		r.pattern = line
		if _, err := path.Match(r.pattern, ""); err != nil {
			return nil, fmt.Errorf("parsing .helmignore: %q: %w", line, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ignored reports whether rel, a slash-separated path relative to the chart, is left out:
// a pattern with a slash matches the path from the chart's root, one without matches its
// last element.
func (h helmignore) ignored(rel string, dir bool) bool {
	for _, r := range h {
		if r.dirOnly && !dir {
			continue
		}
		var ok bool
		if strings.Contains(r.pattern, "/") {
			ok, _ = path.Match(strings.TrimPrefix(r.pattern, "/"), rel)
		} else {
			ok, _ = path.Match(r.pattern, path.Base(rel))
		}
		if ok {
			return !r.negate
		}
	}
	return false
}
