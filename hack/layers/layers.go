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
	"strings"
)

// Module is the module's path; packages and patterns below are relative to it.
const Module = "github.com/tailor-autoscaler/tailor"

// Layer is a name and the packages that sit at it. A pattern is a package path, or a path
// ending in "/..." for it and every package below. The most specific pattern that matches
// a package places it: the package's own path, else the longest "/..." pattern.
type Layer struct {
	Name     string
	Packages []string
}

// Layers are the module's layers, lowest first: a package may import packages of its own
// layer and of those before it, never of one after it. Only the packages themselves count,
// not their tests (which may start an API server from test/testenv).
var Layers = []Layer{
	{Name: "apis", Packages: []string{
		"provisioner/apis/...", "plugin/apis/...", "proto/...",
	}},
	{Name: "leaf libraries", Packages: []string{
		"provisioner/backoff", "provisioner/batcher", "provisioner/launchlimit", "provisioner/leader",
		"provisioner/quota", "provisioner/reservation", "provisioner/nomination", "provisioner/requirements",
		"provisioner/metrics", "provisioner/packing/lowerbound",
		"provisioner/cloudprovider/aws/catalog", "provisioner/cloudprovider/aws/transport", "provisioner/cloudprovider/aws/table",
	}},
	{Name: "cloud provider", Packages: []string{
		"provisioner/cloudprovider/...",
	}},
	{Name: "planning", Packages: []string{
		"provisioner/packing", "provisioner/gang", "provisioner/overlay",
	}},
	{Name: "node objects", Packages: []string{
		"provisioner/nodeclaim", "provisioner/nodeclaim/drain", "provisioner/informers", "provisioner/deletioncost",
		"provisioner/surge",
	}},
	{Name: "controllers", Packages: []string{
		"provisioner/nodeclaim/...", "provisioner/nodeclass", "provisioner/nodepool/...",
		"provisioner/interruption", "provisioner/capacityblock", "provisioner/disruption",
		"provisioner/provisioning", "provisioner/handoff", "plugin/nodeprovisioning",
	}},
	{Name: "composition and tools", Packages: []string{
		"provisioner/operator", "plugin/scheduler",
		"provisioner/simulate", "provisioner/explain", "provisioner/top", "provisioner/convert",
	}},
	{Name: "test harnesses", Packages: []string{
		"test/...",
	}},
	{Name: "commands", Packages: []string{
		"provisioner/cmd/...", "plugin/cmd/...", "hack/...",
		"test/chaos/cmd/...", "test/localaws/cmd/...", "test/localstack/cmd/...",
		"test/rejectfilter/cmd/...", "test/workloads/cmd/...",
	}},
}

// Package is what go list tells of a package.
type Package struct {
	ImportPath string
	Imports    []string
}

// Violations says, for each package, that it has no layer, or which of its imports sit
// above it.
func Violations(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := Relative(p.ImportPath)
		if !ok {
			continue
		}
		fl, ok := Place(from)
		if !ok {
			out = append(out, fmt.Sprintf("%s has no layer: add it to the layers table in hack/layers/layers.go", from))
			continue
		}
		for _, imp := range p.Imports {
			to, ok := Relative(imp)
			if !ok {
				continue
			}
			tl, ok := Place(to)
			if ok && tl > fl {
				out = append(out, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s), a layer above it: move the code that needs it up, or what it needs down",
					from, fl, Layers[fl].Name, to, tl, Layers[tl].Name))
			}
		}
	}
	return out
}

// Relative is a package path of the module without the module's path; false for a
// package of another module.
func Relative(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, Module+"/")
	return rest, ok
}

// Place is the index in layers of the layer the most specific matching pattern places a
// package at; false when none matches.
func Place(path string) (int, bool) {
	best, most := 0, 0
	for i, l := range Layers {
		for _, pattern := range l.Packages {
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

// List runs go list over the whole module, from its root directory.
func List(root string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing packages: %w: %s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
