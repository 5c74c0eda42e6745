package benchout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWrite(t *testing.T) {
	type row struct {
		Nodes int     `json:"nodes"`
		Ratio float64 `json:"ratio"`
	}
	path := filepath.Join(t.TempDir(), "bench", "figures.json")
	t.Setenv("BENCH_JSON", path)
	Write(t, []row{{Nodes: 500, Ratio: 1.02}})
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "[\n  {\n    \"nodes\": 500,\n    \"ratio\": 1.02\n  }\n]\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("written figures (-want +got):\n%s", diff)
	}
}

func TestWriteWithoutBenchJSONWritesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("BENCH_JSON", "")
	Write(t, []int{1})
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("wrote %d files without BENCH_JSON, want none", len(entries))
	}
}

func TestEmptyFiguresAreNoResult(t *testing.T) {
	type row struct{ Nodes int }
	var none []row
	var noMap map[string]int
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"a nil slice", none, true},
		{"an empty slice", []row{}, true},
		{"an empty map", map[string]int{}, true},
		{"a nil map", noMap, true},
		{"a nil pointer", (*row)(nil), true},
		{"rows", []row{{Nodes: 500}}, false},
		{"a struct", row{}, false},
	}
	for _, tt := range tests {
		if got := empty(tt.v); got != tt.want {
			t.Errorf("%s: empty = %t, want %t", tt.name, got, tt.want)
		}
	}
}
