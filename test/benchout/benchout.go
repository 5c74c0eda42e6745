// Package benchout writes a benchmark's figures where its make target asks: the file
// BENCH_JSON names, under _output/bench/, as indented JSON.
package benchout

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Write writes v as indented JSON to the file BENCH_JSON names, making its directory; it
// does nothing when BENCH_JSON is unset (a benchmark run by hand).
func Write(tb testing.TB, v any) {
	tb.Helper()
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
