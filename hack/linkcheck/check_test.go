package main

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestSlugOf(t *testing.T) {
	tests := map[string]string{
		"Send pods to Tailor":                           "send-pods-to-tailor",
		"At scale: `make bench-scale`":                  "at-scale-make-bench-scale",
		"Differences from Karpenter v1, field by field": "differences-from-karpenter-v1-field-by-field",
		"How a node is priced":                          "how-a-node-is-priced",
		"[Linked](docs/x.md) heading":                   "linked-heading",
		"NodeOverlays_and more":                         "nodeoverlays_and-more",
	}
	for in, want := range tests {
		if got := slugOf(in); got != want {
			t.Errorf("slugOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Tailor\n\n## Install\n\n## Install\n\nSee [install](#install), [again](#install-1), [docs](docs/guide.md#step-two),\n" +
			"[a dir](docs), [code](hack/build.sh), [site](https://example.com/x#y), `[not](a-link.md)`.\n\n" +
			"```\n[inside](code.md)\n```\n\n[gone](docs/missing.md) [no anchor](#nowhere) [bad anchor](docs/guide.md#step-three) [out](../shared/x.md)\n")},
		"docs/guide.md": {Data: []byte("# Guide\n\n## Step two\n\n<a id=\"explicit\"></a>\nBack to [the top](../README.md#tailor) and [explicit](#explicit).\n")},
		"hack/build.sh": {Data: []byte("#!/bin/sh\n")},
	}
	got, err := check(fsys, []string{"README.md", "docs/guide.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:14: docs/missing.md: no such file or directory",
		`README.md:14: #nowhere: README.md has no heading or anchor "nowhere"`,
		`README.md:14: docs/guide.md#step-three: docs/guide.md has no heading or anchor "step-three"`,
		"README.md:14: ../shared/x.md: points outside the repository",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("broken links (-want +got):\n%s", diff)
	}
}
