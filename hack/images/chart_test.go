package images

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHelmignore(t *testing.T) {
	rules, err := parseHelmignore("# comment\n*.swp\n\nci/\n/docs/*.md\n!keep.swp\n")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		dir  bool
		want bool
	}{
		{name: "a pattern without a slash matches the last element anywhere", path: "templates/a.swp", want: true},
		{name: "a file the patterns do not name is kept", path: "templates/a.yaml", want: false},
		{name: "a pattern ending in a slash matches a directory", path: "ci", dir: true, want: true},
		{name: "a pattern ending in a slash does not match a file", path: "ci", want: false},
		{name: "a rooted pattern matches from the chart's root", path: "docs/a.md", want: true},
		{name: "a rooted pattern does not match deeper", path: "x/docs/a.md", want: false},
		{name: "the first matching pattern decides, as in Helm", path: "keep.swp", want: true},
		{name: "hidden files in templates are always left out", path: "templates/.hidden", want: true},
		{name: "hidden files elsewhere are kept", path: ".helmignore", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.ignored(tt.path, tt.dir); got != tt.want {
				t.Errorf("ignored(%q, dir=%t) = %t, want %t", tt.path, tt.dir, got, tt.want)
			}
		})
	}
}

func TestHelmignoreRefuses(t *testing.T) {
	for _, text := range []string{"templates/**/x", "[a-"} {
		if _, err := parseHelmignore(text); err == nil {
			t.Errorf("parseHelmignore(%q) gave no error", text)
		}
	}
}

func TestPackageChart(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: demo\nversion: 1.2.3+build.4\nappVersion: \"1.2\"\nsources:\n- https://example.com/demo\n",
		"values.yaml":         "image: {}\n",
		".helmignore":         "*.swp\nci/\n",
		"templates/a.yaml":    "kind: A\n",
		"templates/.a.yaml~":  "editor backup\n",
		"templates/b.swp":     "swap\n",
		"ci/all-values.yaml":  "x: 1\n",
		"crds/demo.yaml":      "kind: CustomResourceDefinition\n",
		"dashboards/one.json": "{}\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := PackageChart(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := untgz(bytes.NewReader(c.Archive))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for n := range files {
		got = append(got, n)
	}
	sort.Strings(got)
	want := []string{"demo/.helmignore", "demo/Chart.yaml", "demo/crds/demo.yaml", "demo/dashboards/one.json", "demo/templates/a.yaml", "demo/values.yaml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of the package (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("1.2.3_build.4", c.Tag()); diff != "" {
		t.Errorf("tag (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("charts/demo", c.Repository()); diff != "" {
		t.Errorf("repository (-want +got):\n%s", diff)
	}

	again, err := PackageChart(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Archive, again.Archive) {
		t.Errorf("packaging the same chart twice gave different archives")
	}

	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	art, err := c.Artifact(created)
	if err != nil {
		t.Fatal(err)
	}
	m, err := art.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	wantAnnotations := map[string]string{
		"org.opencontainers.image.title":   "demo",
		"org.opencontainers.image.version": "1.2.3+build.4",
		"org.opencontainers.image.created": "2026-01-02T03:04:05Z",
		"org.opencontainers.image.source":  "https://example.com/demo",
	}
	if diff := cmp.Diff(wantAnnotations, m.Annotations); diff != "" {
		t.Errorf("the manifest's annotations (-want +got):\n%s", diff)
	}
	raw, err := art.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantConfig := `{"name":"demo","sources":["https://example.com/demo"],"version":"1.2.3+build.4","apiVersion":"v2","appVersion":"1.2"}`
	if diff := cmp.Diff(wantConfig, string(raw)); diff != "" {
		t.Errorf("the config, Helm's chart.Metadata as JSON (-want +got):\n%s", diff)
	}
}

func TestPackageChartRefuses(t *testing.T) {
	tests := []struct {
		name  string
		chart string
	}{
		{name: "a chart without a version", chart: "apiVersion: v2\nname: demo\n"},
		{name: "a field Chart.yaml does not have", chart: "apiVersion: v2\nname: demo\nversion: 1.0.0\nimage: tailor\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(tt.chart), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := PackageChart(dir); err == nil {
				t.Errorf("PackageChart gave no error")
			}
		})
	}
}

func TestParseEpoch(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "0", want: time.Unix(0, 0).UTC()},
		{in: "1767323045\n", want: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{in: "-1", wantErr: true},
		{in: "yesterday", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEpoch(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseEpoch(%q) error %v, want error %t", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseEpoch(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}
