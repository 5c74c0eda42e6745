package docs

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		page    string
		want    []Block
		wantErr string
	}{{
		name: "kinds and lines",
		page: "# Page\n\n```sh\nkubectl get nodes\nkubectl get pods\n```\n\ntext\n\n```sh aws\neksctl create cluster\n```\n\n```sh standalone\nmake demo\n```\n",
		want: []Block{
			{Page: "p.md", Line: 3, Kind: Local, Script: "kubectl get nodes\nkubectl get pods\n"},
			{Page: "p.md", Line: 10, Kind: AWS, Script: "eksctl create cluster\n"},
			{Page: "p.md", Line: 14, Kind: Standalone, Script: "make demo\n"},
		},
	}, {
		name: "other languages and bare fences are not commands",
		page: "```yaml\nkind: NodePool\n```\n\n```\noutput\n```\n\n```text\nmore output\n```\n",
	}, {
		name: "a block in a list item",
		page: "1. Start it:\n\n   ```sh\n   make up\n   ```\n",
		want: []Block{{Page: "p.md", Line: 3, Kind: Local, Script: "make up\n"}},
	}, {
		name:    "bash is refused",
		page:    "x\n\n```bash\nls\n```\n",
		wantErr: "p.md:3: commands are fenced ```sh",
	}, {
		name:    "an unknown marker is refused",
		page:    "```sh eks\nls\n```\n",
		want:    nil,
		wantErr: "p.md:1: ```sh eks: the words after ```sh are aws",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("p.md", []byte(tt.page))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPages(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md":                      {},
		"docs/README.md":                 {},
		"docs/tasks/gangs.md":            {},
		"docs/concepts/architecture.svg": {},
		"docs/reference/metrics.md":      {},
		"docs/design/history.md":         {},
	}
	got, err := Pages(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md", "docs/README.md", "docs/tasks/gangs.md"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pages() mismatch (-want +got):\n%s", diff)
	}
}
