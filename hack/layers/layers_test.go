package layers

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPackageImportsALayerAboveIt lists the module's packages with go list and fails on
// every import of a package that sits above the importer, and on every package the table
// does not place.
func TestNoPackageImportsALayerAboveIt(t *testing.T) {
	pkgs, err := List(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Violations(pkgs) {
		t.Error(v)
	}
}

// TestAnUpwardImportIsNamedWithBothLayers: the check names the import and the two layers.
func TestAnUpwardImportIsNamedWithBothLayers(t *testing.T) {
	got := Violations([]Package{
		{ImportPath: Module + "/provisioner/metrics", Imports: []string{"context", Module + "/provisioner/cloudprovider", Module + "/provisioner/apis/karpenter/v1"}},
		{ImportPath: Module + "/provisioner/elsewhere"},
		// Their own paths place provisioner/nodeclaim and provisioner/nodeclaim/drain below
		// the rest of provisioner/nodeclaim/... .
		{ImportPath: Module + "/provisioner/nodeclaim/drain", Imports: []string{Module + "/provisioner/nodeclaim", Module + "/provisioner/nodeclaim/lifecycle"}},
	})
	want := []string{
		`provisioner/metrics (layer 1, leaf libraries) imports provisioner/cloudprovider (layer 2, cloud provider), a layer above it: move the code that needs it up, or what it needs down`,
		`provisioner/elsewhere has no layer: add it to the layers table in hack/layers/layers.go`,
		`provisioner/nodeclaim/drain (layer 4, node objects) imports provisioner/nodeclaim/lifecycle (layer 5, controllers), a layer above it: move the code that needs it up, or what it needs down`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
