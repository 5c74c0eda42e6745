package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A name is a string constant by which Tailor tells users something: an event or condition
// reason, a condition type, an annotation or a label.
type name struct {
	kind, value, constant, pkg, doc string
}

// kinds tell a constant's kind from its identifier.
var kinds = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"Condition types", regexp.MustCompile(`^(Condition(Type)?[A-Z]\w*|\w*PodCondition)$`)},
	{"Event and condition reasons", regexp.MustCompile(`^Reason[A-Z]\w*$`)},
	{"Annotations", regexp.MustCompile(`^\w*AnnotationKey$`)},
	{"Labels", regexp.MustCompile(`^\w*LabelKey$`)},
}

// namesPage lists the constants of provisioner/ and plugin/ that name events, conditions,
// annotations and labels, with their doc comments.
func namesPage(root string) (string, error) {
	var names []name
	for _, dir := range []string{"provisioner", "plugin"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "zz_generated") {
				return err
			}
			found, err := constants(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			for i := range found {
				found[i].pkg = filepath.ToSlash(rel)
			}
			names = append(names, found...)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	var b strings.Builder
	b.WriteString(header("Events, conditions, annotations and labels", "the constants of provisioner/ and plugin/ that name them"))
	for _, k := range kinds {
		var rows []name
		for _, n := range names {
			if n.kind == k.kind {
				rows = append(rows, n)
			}
		}
		slices.SortFunc(rows, func(a, b name) int {
			return strings.Compare(a.value+"\x00"+a.pkg+a.constant, b.value+"\x00"+b.pkg+b.constant)
		})
		rows = slices.CompactFunc(rows, func(a, b name) bool { return a.value == b.value && a.pkg == b.pkg })
		fmt.Fprintf(&b, "## %s\n\n| name | where | meaning |\n|---|---|---|\n", k.kind)
		for _, n := range rows {
			fmt.Fprintf(&b, "| `%s` | `%s` (%s) | %s |\n", n.value, n.pkg, n.constant, cell(n.doc))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// constants are the file's string constants whose identifiers say they are names.
func constants(path string) ([]name, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var out []name
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			doc := vs.Doc
			if doc == nil && len(gen.Specs) == 1 {
				doc = gen.Doc
			}
			for i, id := range vs.Names {
				if !id.IsExported() || i >= len(vs.Values) {
					continue
				}
				value, ok := stringValue(vs.Values[i])
				if !ok {
					continue
				}
				for _, k := range kinds {
					if k.re.MatchString(id.Name) {
						out = append(out, name{kind: k.kind, value: value, constant: id.Name, doc: docText(doc, vs.Comment)})
						break
					}
				}
			}
		}
	}
	return out, nil
}

// stringValue is a constant's value when it is a string literal, or one converted to a
// named string type.
func stringValue(e ast.Expr) (string, bool) {
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		e = call.Args[0]
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

// docText is a constant's doc comment, or its line comment, as one paragraph.
func docText(groups ...*ast.CommentGroup) string {
	for _, g := range groups {
		if g != nil {
			return strings.Join(strings.Fields(g.Text()), " ")
		}
	}
	return ""
}
