package workloads

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteIsGeneratePy checks Write against the digests of the Python generator's output
// in testdata/generate-py.sha256.
func TestWriteIsGeneratePy(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "generate-py.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases := 0
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("line %q: want shape, pods, seed and sha256", line)
		}
		shape, want := fields[0], fields[3]
		pods, err := strconv.Atoi(fields[1])
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		seed, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		cases++
		t.Run(fmt.Sprintf("%s %d seed %d", shape, pods, seed), func(t *testing.T) {
			h := sha256.New()
			if err := Write(h, shape, pods, seed); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, hex.EncodeToString(h.Sum(nil))); diff != "" {
				t.Errorf("sha256 of Write(%s, %d, %d) (-generate.py +Write):\n%s", shape, pods, seed, diff)
			}
		})
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	if cases == 0 {
		t.Fatal("no cases in testdata/generate-py.sha256")
	}
}

// TestWriteIsGeneratePyWhole compares one workload byte for byte, so that a difference shows
// where it is.
func TestWriteIsGeneratePyWhole(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "webmix-20-seed-42.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := Write(&got, "webmix", 20, 42); err != nil {
		t.Fatal(err)
	}
	// The workload is one line: split after each comma for a readable diff.
	if diff := cmp.Diff(strings.SplitAfter(string(want), ","), strings.SplitAfter(got.String(), ",")); diff != "" {
		t.Errorf("Write(webmix, 20, 42) (-generate.py +Write):\n%s", diff)
	}
}

func TestWriteUnknownShape(t *testing.T) {
	for _, shape := range []string{"huge", "", "Webmix"} {
		t.Run(shape, func(t *testing.T) {
			var out bytes.Buffer
			err := Write(&out, shape, 10, DefaultSeed)
			want := fmt.Sprintf("unknown workload shape %q; one of: diverse, webmix, batch, tiny", shape)
			if err == nil || err.Error() != want {
				t.Errorf("Write(%q) = %v, want %s", shape, err, want)
			}
			if out.Len() != 0 {
				t.Errorf("Write(%q) wrote %q, want nothing", shape, out.String())
			}
		})
	}
}

// TestGenerateWritesOnce checks that Generate writes the workload of DefaultSeed, reads it
// back from _output/workloads afterwards, and leaves no file for an unknown shape.
func TestGenerateWritesOnce(t *testing.T) {
	root := t.TempDir()
	path, err := Generate(root, "tiny", 7)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "_output", "workloads", "tiny-7.json"); path != want {
		t.Errorf("Generate(tiny, 7) = %s, want %s", path, want)
	}
	var want bytes.Buffer
	if err := Write(&want, "tiny", 7, DefaultSeed); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), string(got)); diff != "" {
		t.Errorf("generated workload (-Write +file):\n%s", diff)
	}

	if err := os.WriteFile(path, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again, err := Generate(root, "tiny", 7); err != nil || again != path {
		t.Fatalf("Generate(tiny, 7) again = %s, %v; want %s", again, err, path)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "kept" {
		t.Errorf("Generate(tiny, 7) again rewrote the workload: %q, %v", got, err)
	}

	if _, err := Generate(root, "huge", 7); err == nil || !strings.Contains(err.Error(), "unknown workload shape") {
		t.Errorf("Generate(huge, 7) = %v, want an unknown shape error", err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "_output", "workloads"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"tiny-7.json"}, names); diff != "" {
		t.Errorf("files in _output/workloads (-want +got):\n%s", diff)
	}
}
