// Command trunking extracts, from the VPC resource controller's limits table
// (github.com/aws/amazon-vpc-resource-controller-k8s, pkg/aws/vpc/limits.go), the number of
// branch network interfaces of every instance type that supports ENI trunking, and writes
// them as the JSON file the catalog package embeds (catalog/trunking.json). EC2's API does
// not report these limits.
//
//	go run ./hack/trunking -commit <sha> -date <YYYY-MM-DD> path/to/limits.go > provisioner/cloudprovider/aws/catalog/trunking.json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// limitsSource names where the table comes from, for the provenance note.
const limitsSource = "github.com/aws/amazon-vpc-resource-controller-k8s pkg/aws/vpc/limits.go"

func main() {
	commit := flag.String("commit", "", "Commit of the source repository the file was read at.")
	date := flag.String("date", "", "Date of that commit (YYYY-MM-DD).")
	flag.Parse()
	if flag.NArg() != 1 || *commit == "" || *date == "" {
		fmt.Fprintln(os.Stderr, "usage: trunking -commit <sha> -date <YYYY-MM-DD> path/to/limits.go")
		os.Exit(2)
	}
	branches, err := branchInterfaces(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(catalog.Trunking{Source: limitsSource, Commit: *commit, Date: *date, BranchInterfaces: branches}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// branchInterfaces reads the Limits map literal of the Go file at path: for every entry whose
// IsTrunkingCompatible is true and BranchInterface positive, the type's branch interfaces.
func branchInterfaces(path string) (map[string]int, error) {
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	limits := limitsLiteral(file)
	if limits == nil {
		return nil, fmt.Errorf("reading %s: no `var Limits = map[string]*VPCLimits{...}` found; the source changed shape", path)
	}
	out := map[string]int{}
	for _, elt := range limits.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		name, err := stringLiteral(kv.Key)
		if err != nil {
			return nil, fmt.Errorf("reading %s: a key of Limits: %w", path, err)
		}
		entry, ok := kv.Value.(*ast.CompositeLit)
		if !ok {
			continue
		}
		trunking, branches := false, 0
		for _, f := range entry.Elts {
			field, ok := f.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, _ := field.Key.(*ast.Ident)
			switch {
			case key == nil:
			case key.Name == "IsTrunkingCompatible":
				v, _ := field.Value.(*ast.Ident)
				trunking = v != nil && v.Name == "true"
			case key.Name == "BranchInterface":
				lit, ok := field.Value.(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					return nil, fmt.Errorf("reading %s: BranchInterface of %s is not a number", path, name)
				}
				if branches, err = strconv.Atoi(lit.Value); err != nil {
					return nil, fmt.Errorf("reading %s: BranchInterface of %s: %w", path, name, err)
				}
			}
		}
		if trunking && branches > 0 {
			out[name] = branches
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading %s: no instance type supports trunking; the source changed shape", path)
	}
	return out, nil
}

// limitsLiteral finds the map literal assigned to the package variable Limits.
func limitsLiteral(file *ast.File) *ast.CompositeLit {
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, n := range vs.Names {
				if n.Name != "Limits" || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.CompositeLit); ok {
					return lit
				}
			}
		}
	}
	return nil
}

func stringLiteral(e ast.Expr) (string, error) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", errors.New("not a string literal")
	}
	return strconv.Unquote(lit.Value)
}
