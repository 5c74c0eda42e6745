// Package layers checks that the module's packages import only packages at their own layer
// or below: the table below is the architecture, and a package that imports one above it
// is an arrow pointing the wrong way.
package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// module is the module's path; packages and patterns below are relative to it.
const module = "github.com/tailor-autoscaler/tailor"

// layer is a name and the packages that sit at it. A pattern is a package path, or a path
// ending in "/..." for it and every package below. The most specific pattern that matches
// a package places it: the package's own path, else the longest "/..." pattern.
type layer struct {
	name     string
	packages []string
}

// layers are the module's layers, lowest first: a package may import packages of its own
// layer and of those before it, never of one after it. Only the packages themselves count,
// not their tests (which may start an API server from test/testenv).
var layers = []layer{
	{name: "apis", packages: []string{
		"provisioner/apis/...", "plugin/apis/...", "proto/...",
	}},
	{name: "leaf libraries", packages: []string{
		"provisioner/backoff", "provisioner/batcher", "provisioner/launchlimit", "provisioner/leader",
		"provisioner/quota", "provisioner/reservation", "provisioner/nomination", "provisioner/requirements",
		"provisioner/metrics", "provisioner/packing/lowerbound",
		"provisioner/cloudprovider/aws/catalog", "provisioner/cloudprovider/aws/table", "provisioner/cloudprovider/aws/transport",
	}},
	{name: "cloud provider", packages: []string{
		"provisioner/cloudprovider/...",
	}},
	{name: "planning", packages: []string{
		"provisioner/packing", "provisioner/gang", "provisioner/overlay",
	}},
	{name: "node objects", packages: []string{
		"provisioner/nodeclaim", "provisioner/nodeclaim/drain", "provisioner/informers",
	}},
	{name: "controllers", packages: []string{
		"provisioner/nodeclaim/...", "provisioner/nodeclass", "provisioner/nodepool/...",
		"provisioner/interruption", "provisioner/capacityblock", "provisioner/disruption",
		"provisioner/provisioning", "provisioner/handoff", "plugin/nodeprovisioning",
	}},
	{name: "composition and tools", packages: []string{
		"provisioner/operator", "plugin/scheduler",
		"provisioner/simulate", "provisioner/explain", "provisioner/top", "provisioner/convert",
	}},
	{name: "test harnesses", packages: []string{
		"test/...",
	}},
	{name: "commands", packages: []string{
		"provisioner/cmd/...", "plugin/cmd/...", "hack/...",
		"test/chaos/cmd/...", "test/localaws/cmd/...", "test/localstack/cmd/...",
		"test/rejectfilter/cmd/...", "test/workloads/cmd/...",
	}},
}

// pkg is what go list tells of a package.
type pkg struct {
	ImportPath string
	Imports    []string
}

// TestNoPackageImportsALayerAboveIt lists the module's packages with go list and fails on
// every import of a package that sits above the importer, and on every package the table
// does not place.
func TestNoPackageImportsALayerAboveIt(t *testing.T) {
	pkgs, err := listPackages()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestAnUpwardImportIsNamedWithBothLayers: the check names the import and the two layers.
func TestAnUpwardImportIsNamedWithBothLayers(t *testing.T) {
	got := violations([]pkg{
		{ImportPath: module + "/provisioner/metrics", Imports: []string{"context", module + "/provisioner/cloudprovider", module + "/provisioner/apis/karpenter/v1"}},
		{ImportPath: module + "/provisioner/elsewhere"},
		// Their own paths place provisioner/nodeclaim and provisioner/nodeclaim/drain below
		// the rest of provisioner/nodeclaim/... .
		{ImportPath: module + "/provisioner/nodeclaim/drain", Imports: []string{module + "/provisioner/nodeclaim", module + "/provisioner/nodeclaim/lifecycle"}},
	})
	want := []string{
		`provisioner/metrics (layer 1, leaf libraries) imports provisioner/cloudprovider (layer 2, cloud provider), a layer above it: move the code that needs it up, or what it needs down`,
		`provisioner/elsewhere has no layer: add it to the layers table in hack/layers/layers_test.go`,
		`provisioner/nodeclaim/drain (layer 4, node objects) imports provisioner/nodeclaim/lifecycle (layer 5, controllers), a layer above it: move the code that needs it up, or what it needs down`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// violations says, for each package, that it has no layer, or which of its imports sit
// above it.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		fl, ok := layerOf(from)
		if !ok {
			out = append(out, fmt.Sprintf("%s has no layer: add it to the layers table in hack/layers/layers_test.go", from))
			continue
		}
		for _, imp := range p.Imports {
			to, ok := relative(imp)
			if !ok {
				continue
			}
			tl, ok := layerOf(to)
			if ok && tl > fl {
				out = append(out, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s), a layer above it: move the code that needs it up, or what it needs down",
					from, fl, layers[fl].name, to, tl, layers[tl].name))
			}
		}
	}
	return out
}

// relative is a package path of the module without the module's path; false for a
// package of another module.
func relative(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, module+"/")
	return rest, ok
}

// layerOf is the index in layers of the layer the most specific matching pattern places a
// package at; false when none matches.
func layerOf(path string) (int, bool) {
	best, most := 0, 0
	for i, l := range layers {
		for _, pattern := range l.packages {
			if s := specificity(pattern, path); s > most {
				best, most = i, s
			}
		}
	}
	return best, most > 0
}

// specificity is how closely a pattern matches a package, 0 when it does not: the package's
// own path more than any "/..." pattern, a longer "/..." pattern more than a shorter.
func specificity(pattern, path string) int {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return len(prefix)
		}
		return 0
	}
	if path == pattern {
		return len(path) + 1
	}
	return 0
}

// listPackages runs go list over the whole module, from its root.
func listPackages() ([]pkg, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing packages: %w: %s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
