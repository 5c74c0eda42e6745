package convert

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Entry is one line of the report: a field of an input document and what became of it.
type Entry struct {
	// Document counts the input's non-empty documents from 1.
	Document int
	// Object is the input object, "Provisioner default".
	Object string
	// Field is the path of the input field (or of the output field a default was written to).
	Field string
	// Message says what changed, or why the field was not carried over and what to do.
	Message string
	// NotCarriedOver marks fields the output lacks: the user has to act on them.
	NotCarriedOver bool
}

// Report lists what a conversion changed and what it could not carry over.
type Report struct {
	Entries []Entry
}

// NotCarriedOver counts the entries the user has to act on.
func (r Report) NotCarriedOver() int {
	n := 0
	for _, e := range r.Entries {
		if e.NotCarriedOver {
			n++
		}
	}
	return n
}

// Write renders the report, grouped by document.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	last := 0
	for _, e := range r.Entries {
		if e.Document != last {
			fmt.Fprintf(&b, "document %d, %s:\n", e.Document, e.Object)
			last = e.Document
		}
		what := "changed"
		if e.NotCarriedOver {
			what = "NOT CARRIED OVER"
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", what, e.Field, e.Message)
	}
	fmt.Fprintf(&b, "%d change(s), %d field(s) not carried over\n", len(r.Entries)-r.NotCarriedOver(), r.NotCarriedOver())
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteYAML writes the converted objects as a multi-document YAML stream.
func (res *Result) WriteYAML(w io.Writer) error {
	var b strings.Builder
	for i, obj := range res.Objects {
		out, err := objectYAML(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(out)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// objectYAML marshals a typed object without the fields only the API server writes
// (status, creationTimestamp), which the typed objects would otherwise render empty.
func objectYAML(obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	return out, nil
}
