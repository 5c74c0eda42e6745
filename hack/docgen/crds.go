package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// crdsPage lists every field of every CRD in manifests/crds, as its schema describes it (what
// kubectl explain shows), with its type, whether it is required, its default and the
// rules the API server checks.
func crdsPage(root string) (string, error) {
	files, err := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	var b strings.Builder
	b.WriteString(header("CRD fields", "manifests/crds (controller-gen's schemas of provisioner/apis)"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return "", fmt.Errorf("reading %s: %w", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			fmt.Fprintf(&b, "## %s (%s/%s)\n\n", crd.Spec.Names.Kind, crd.Spec.Group, v.Name)
			schema := v.Schema.OpenAPIV3Schema
			if schema.Description != "" {
				b.WriteString(strings.TrimSpace(schema.Description) + "\n\n")
			}
			b.WriteString("| field | type | description |\n|---|---|---|\n")
			for _, top := range []string{"spec", "status"} {
				if p, ok := schema.Properties[top]; ok {
					fields(&b, top, p, slices.Contains(schema.Required, top))
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String(), nil
}

// fields writes the row of a field and those of the fields under it.
func fields(b *strings.Builder, path string, s apiextensionsv1.JSONSchemaProps, required bool) {
	typ := s.Type
	if s.XIntOrString {
		typ = "int or string"
	}
	if required {
		typ += ", required"
	}
	var notes []string
	if s.Default != nil {
		notes = append(notes, "Default: `"+string(s.Default.Raw)+"`.")
	}
	if len(s.Enum) > 0 {
		values := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			values[i] = "`" + strings.Trim(string(e.Raw), `"`) + "`"
		}
		notes = append(notes, "One of "+strings.Join(values, ", ")+".")
	}
	if s.Pattern != "" {
		notes = append(notes, "Pattern: `"+s.Pattern+"`.")
	}
	for _, v := range s.XValidations {
		if v.Message != "" {
			notes = append(notes, "The API server refuses a value that breaks a rule, saying: \""+strings.TrimSuffix(v.Message, ".")+"\".")
		}
	}
	desc := strings.TrimSpace(s.Description)
	if len(notes) > 0 {
		desc = strings.TrimSpace(desc + " " + strings.Join(notes, " "))
	}
	fmt.Fprintf(b, "| `%s` | %s | %s |\n", path, typ, cell(desc))
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fields(b, path+"."+name, s.Properties[name], slices.Contains(s.Required, name))
	}
	if s.Items != nil && s.Items.Schema != nil {
		for _, name := range sortedKeys(s.Items.Schema.Properties) {
			fields(b, path+"[]."+name, s.Items.Schema.Properties[name], slices.Contains(s.Items.Schema.Required, name))
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		for _, name := range sortedKeys(s.AdditionalProperties.Schema.Properties) {
			fields(b, path+"[*]."+name, s.AdditionalProperties.Schema.Properties[name], slices.Contains(s.AdditionalProperties.Schema.Required, name))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
