// Command diagrams renders the diagrams of docs/ from their Graphviz sources: every
// docs/**/*.dot becomes an SVG beside it, so a diagram is edited as text and reviewed as a
// diff. It renders with go-graphviz, Graphviz compiled to WebAssembly, so it needs neither cgo
// nor a Graphviz package. hack/update-diagrams.sh runs it; hack/verify-diagrams.sh renders
// into a temporary directory (the optional argument, which then holds the SVGs at their paths
// relative to docs/) and fails when a checked-in SVG differs.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-graphviz"
)

func main() {
	root := flag.String("root", ".", "Repository root; the sources are the .dot files under its docs/.")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "Usage: diagrams [-root DIR] [OUT]\n\nRenders every docs/**/*.dot to an SVG beside it, or under OUT at the same path relative to docs/.")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 1 {
		flag.Usage()
		os.Exit(2)
	}
	docs := filepath.Join(*root, "docs")
	out := docs
	if flag.NArg() == 1 {
		out = flag.Arg(0)
	}
	if err := run(context.Background(), docs, out); err != nil {
		fmt.Fprintln(os.Stderr, "diagrams:", err)
		os.Exit(1)
	}
}

// run renders each .dot file under docs to out, at the same relative path with .svg.
func run(ctx context.Context, docs, out string) error {
	sources, err := dotFiles(docs)
	if err != nil {
		return err
	}
	g, err := graphviz.New(ctx)
	if err != nil {
		return fmt.Errorf("starting graphviz: %w", err)
	}
	defer g.Close()
	for _, rel := range sources {
		svg, err := render(ctx, g, filepath.Join(docs, rel))
		if err != nil {
			return fmt.Errorf("rendering %s: %w", rel, err)
		}
		dst := filepath.Join(out, strings.TrimSuffix(rel, ".dot")+".svg")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, svg, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// dotFiles lists the .dot files under dir, relative to it, in lexical order.
func dotFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(path) != ".dot" {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing diagrams under %s: %w", dir, err)
	}
	return files, nil
}

// render lays one Graphviz source out with dot and returns it as SVG.
func render(ctx context.Context, g *graphviz.Graphviz, path string) ([]byte, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	graph, err := graphviz.ParseBytes(src)
	if err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	defer graph.Close()
	var buf bytes.Buffer
	if err := g.Render(ctx, graph, graphviz.SVG, &buf); err != nil {
		return nil, fmt.Errorf("laying out: %w", err)
	}
	return buf.Bytes(), nil
}
