package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// schedulerArgsPage lists the NodeProvisioning plugin's args, as their versioned Go type
// (plugin/apis/config/v1) declares and documents them.
func schedulerArgsPage(root string) (string, error) {
	path := filepath.Join(root, "plugin", "apis", "config", "v1", "types.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header("Scheduler plugin args", "plugin/apis/config/v1"))
	b.WriteString("`NodeProvisioning`'s args, under `pluginConfig` of a `KubeSchedulerConfiguration` profile (`kubescheduler.config.k8s.io/v1`; `manifests/scheduler/config.yaml` is the shipped one). A bad value stops tailor-scheduler at start with an error naming the field.\n\n")
	b.WriteString("| field | type | meaning |\n|---|---|---|\n")
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "NodeProvisioningArgs" {
			return true
		}
		found = true
		for _, field := range ts.Type.(*ast.StructType).Fields.List {
			if field.Tag == nil || len(field.Names) == 0 {
				continue
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				continue
			}
			jsonName, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if jsonName == "" {
				continue
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", jsonName, strings.TrimPrefix(types(field.Type), "*"), cell(docText(field.Doc)))
		}
		return false
	})
	if !found {
		return "", fmt.Errorf("%s declares no NodeProvisioningArgs", path)
	}
	return b.String(), nil
}

// types renders a field's Go type as written.
func types(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return "*" + types(t.X)
	case *ast.ArrayType:
		return "[]" + types(t.Elt)
	case *ast.SelectorExpr:
		return types(t.X) + "." + t.Sel.Name
	case *ast.MapType:
		return "map[" + types(t.Key) + "]" + types(t.Value)
	}
	return fmt.Sprintf("%T", e)
}
