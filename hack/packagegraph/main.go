// Command packagegraph writes docs/concepts/packages.dot: the module's packages as rooms in
// their layers, lowest at the bottom, drawn from go list and the table of hack/layers, so the
// map cannot drift from the code. hack/update-diagrams.sh runs it before it renders the SVGs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tailor-autoscaler/tailor/hack/layers"
)

func main() {
	root := flag.String("root", ".", "Repository root, where go list runs.")
	out := flag.String("out", "docs/concepts/packages.dot", "File to write, relative to -root unless absolute.")
	flag.Parse()
	if err := run(*root, *out); err != nil {
		fmt.Fprintln(os.Stderr, "packagegraph:", err)
		os.Exit(1)
	}
}

func run(root, out string) error {
	pkgs, err := layers.List(root)
	if err != nil {
		return err
	}
	var paths []string
	for _, p := range pkgs {
		if rel, ok := layers.Relative(p.ImportPath); ok {
			paths = append(paths, rel)
		}
	}
	dot, err := render(paths)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	return os.WriteFile(out, dot, 0o644)
}

// roomsPerRow is how many rooms a layer's cluster draws side by side.
const roomsPerRow = 5

// room is a group of packages drawn as one box: a directory and the packages in and under it.
type room struct {
	dir     string
	members []string
}

// roomOf is the directory a package is drawn under: its first two path elements (for
// example provisioner/cloudprovider for provisioner/cloudprovider/aws/pricing), or only the
// first for the test harnesses and the tools, which are many and small.
func roomOf(path string) string {
	parts := strings.Split(path, "/")
	if parts[0] == "test" || parts[0] == "hack" || len(parts) < 2 {
		return parts[0]
	}
	return parts[0] + "/" + parts[1]
}

// render lays the packages out, one cluster per layer and one box per room within it.
func render(paths []string) ([]byte, error) {
	byLayer := make([]map[string]*room, len(layers.Layers))
	for _, path := range paths {
		l, ok := layers.Place(path)
		if !ok {
			return nil, fmt.Errorf("%s has no layer: add it to the layers table in hack/layers/layers.go", path)
		}
		if byLayer[l] == nil {
			byLayer[l] = map[string]*room{}
		}
		dir := roomOf(path)
		r := byLayer[l][dir]
		if r == nil {
			r = &room{dir: dir}
			byLayer[l][dir] = r
		}
		if member := strings.TrimPrefix(strings.TrimPrefix(path, dir), "/"); member != "" {
			r.members = append(r.members, member)
		}
	}

	var b bytes.Buffer
	fmt.Fprintln(&b, "// The module's packages by layer: written by hack/packagegraph (hack/update-diagrams.sh), do not edit.")
	fmt.Fprintln(&b, "// A package imports only from its own layer and the layers below it; hack/verify-layers.sh checks it.")
	fmt.Fprintln(&b, "digraph packages {")
	fmt.Fprintln(&b, `  graph [rankdir=BT, fontname="Helvetica", fontsize=14, nodesep=0.25, ranksep=0.35, pad=0.3, newrank=true,`)
	fmt.Fprintln(&b, `         label="Tailor's packages by layer: each imports only from its own layer and those below", labelloc=t];`)
	fmt.Fprintln(&b, `  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10, margin="0.2,0.06"];`)
	fmt.Fprintln(&b, `  edge [style=invis];`)
	var tops []string // the top row's first room of each layer drawn so far
	for l, rooms := range byLayer {
		if len(rooms) == 0 {
			continue
		}
		dirs := make([]string, 0, len(rooms))
		for dir := range rooms {
			dirs = append(dirs, dir)
		}
		sort.Strings(dirs)
		fmt.Fprintf(&b, "\n  subgraph cluster_%d {\n", l)
		fmt.Fprintf(&b, "    label=%q; labeljust=l; style=\"rounded,filled\"; fillcolor=%q; color=\"#999999\";\n",
			fmt.Sprintf("%d · %s", l, layers.Layers[l].Name), fill(l))
		var ids []string
		for _, dir := range dirs {
			r := rooms[dir]
			id := fmt.Sprintf("l%d_%s", l, strings.NewReplacer("/", "_", "-", "_", ".", "_").Replace(dir))
			ids = append(ids, id)
			fmt.Fprintf(&b, "    %s [label=%q];\n", id, label(r))
		}
		// Rows of a few rooms each keep a wide layer from stretching the drawing; an
		// invisible edge stacks each row on the one before.
		var heads []string
		for start := 0; start < len(ids); start += roomsPerRow {
			row := ids[start:min(start+roomsPerRow, len(ids))]
			fmt.Fprintf(&b, "    { rank=same; %s; }\n", strings.Join(row, "; "))
			heads = append(heads, row[0])
		}
		if len(heads) > 1 {
			fmt.Fprintf(&b, "    %s;\n", strings.Join(heads, " -> "))
		}
		fmt.Fprintln(&b, "  }")
		if len(tops) > 0 {
			fmt.Fprintf(&b, "  %s -> %s;\n", tops[len(tops)-1], ids[0])
		}
		tops = append(tops, heads[len(heads)-1])
	}
	fmt.Fprintln(&b, "}")
	return b.Bytes(), nil
}

// label is a room's directory and, below it, its packages, a few to a line.
func label(r *room) string {
	sort.Strings(r.members)
	lines := []string{r.dir + "/"}
	if len(r.members) == 0 {
		lines[0] = r.dir
	}
	var line []string
	width := 0
	for _, m := range r.members {
		if width > 0 && width+len(m) > 40 {
			lines = append(lines, strings.Join(line, " · "))
			line, width = nil, 0
		}
		line = append(line, m)
		width += len(m) + 3
	}
	if len(line) > 0 {
		lines = append(lines, strings.Join(line, " · "))
	}
	return strings.Join(lines, "\n")
}

// fill is a layer's background colour: the product's layers in one hue, getting darker
// upwards, and the harnesses and commands in grey.
func fill(l int) string {
	name := layers.Layers[l].Name
	if name == "test harnesses" || name == "commands" {
		return "#f2f2f2"
	}
	shades := []string{"#eef4fb", "#e6eff9", "#deeaf7", "#d6e4f5", "#cfdff3", "#c7daf1", "#bfd5ef"}
	return shades[l%len(shades)]
}
