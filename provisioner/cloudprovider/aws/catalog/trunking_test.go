package catalog

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTrunking(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    *Trunking
		wantErr string
	}{
		{
			name:  "a table with its provenance",
			input: `{"source":"limits.go","commit":"abc","date":"2026-04-23","branchInterfaces":{"m5.large":9,"c5.24xlarge":107}}`,
			want:  &Trunking{Source: "limits.go", Commit: "abc", Date: "2026-04-23", BranchInterfaces: map[string]int{"m5.large": 9, "c5.24xlarge": 107}},
		},
		{
			name:    "no provenance",
			input:   `{"branchInterfaces":{"m5.large":9}}`,
			wantErr: "source, commit and date must be set",
		},
		{
			name:    "a type without branches",
			input:   `{"source":"s","commit":"c","date":"d","branchInterfaces":{"t3.medium":0}}`,
			wantErr: `branchInterfaces["t3.medium"]: must be positive, got 0`,
		},
		{
			name:    "an unknown field",
			input:   `{"source":"s","commit":"c","date":"d","branchInterfaces":{"m5.large":9},"trunks":{}}`,
			wantErr: `line 1, column 73: trunks: unknown field; the fields here are branchInterfaces, commit, date, source`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTrunking(strings.NewReader(tt.input))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTrunking error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTrunking: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseTrunking (-want +got):\n%s", diff)
			}
		})
	}
}

// The embedded table knows types of the embedded catalog, none of them Xen (trunking needs
// Nitro), and BranchInterfaces reads it.
func TestEmbeddedTrunkingCoversTheCatalog(t *testing.T) {
	table, err := EmbeddedTrunking()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	inCatalog := 0
	for _, it := range cat.InstanceTypes {
		n, ok := table.BranchInterfaces[it.Name]
		if !ok {
			continue
		}
		inCatalog++
		if it.Hypervisor == "xen" {
			t.Errorf("%s is a Xen type but has %d branch interfaces", it.Name, n)
		}
		if got := BranchInterfaces(it.Name); got != n {
			t.Errorf("BranchInterfaces(%s) = %d, want the table's %d", it.Name, got, n)
		}
	}
	if inCatalog == 0 {
		t.Error("no type of the embedded catalog supports trunking")
	}
	if got := BranchInterfaces("t3.medium"); got != 0 {
		t.Errorf("BranchInterfaces(t3.medium) = %d, want 0: burstable types do not support trunking", got)
	}
}
