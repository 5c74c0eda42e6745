package workloads

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSnapshotRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		snap *Snapshot
	}{
		{name: "no nodes", snap: &Snapshot{Shape: "tiny", Pods: 10}},
		{
			name: "nodes with and without pods and labels",
			snap: &Snapshot{Shape: "diverse", Pods: 1000, Nodes: []SnapshotNode{
				{Name: "a", NodePool: "general", InstanceType: "m7i.large", Zone: "us-east-1a", CapacityType: "spot", Pods: []int{0, 7, 12}},
				{Name: "b", NodePool: "arm", InstanceType: "t4g.small", Zone: "us-east-1d", CapacityType: "on-demand", Labels: map[string]string{"team": "web"}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "snapshot.json")
			if err := WriteSnapshot(path, tt.snap); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if lines, want := strings.Count(string(raw), "\n"), len(tt.snap.Nodes)+2; lines != want {
				t.Errorf("%d lines, want one a node and two more:\n%s", lines, raw)
			}
			got, err := ReadSnapshot(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.snap, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("read back (-wrote +read):\n%s", diff)
			}
		})
	}
}

func TestReadSnapshotNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.json")
	if err := os.WriteFile(path, []byte(`{"shape":`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadSnapshot(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadSnapshot of a truncated file: %v, want an error naming %s", err, path)
	}
}
