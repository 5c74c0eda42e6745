// Package benchout writes a benchmark's figures where its make target asks: the file
// BENCH_JSON names, under _output/bench/, as indented JSON.
package benchout

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Write writes v as indented JSON to the file BENCH_JSON names, making its directory; it
// does nothing when BENCH_JSON is unset (a benchmark run by hand). A benchmark whose figures
// are nil or empty measured nothing, and fails: an empty table is no result.
func Write(tb testing.TB, v any) {
	tb.Helper()
	if empty(v) {
		tb.Fatalf("the benchmark measured nothing: its figures are %#v", v)
	}
	path := os.Getenv("BENCH_JSON")
	if path == "" {
		return
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		tb.Fatalf("encoding the figures for %s: %v", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// empty reports whether v is nil, or a slice or map without elements.
func empty(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Slice, reflect.Map:
		return r.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return r.IsNil()
	}
	return false
}
