package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBranchInterfaces(t *testing.T) {
	tests := []struct {
		name    string
		source  string
		want    map[string]int
		wantErr string
	}{
		{
			name: "trunking types with their branches; others left out",
			source: `package vpc
var Limits = map[string]*VPCLimits{
	"m5.large": {Interface: 3, IsTrunkingCompatible: true, BranchInterface: 9, Hypervisor: "nitro"},
	"t3.nano":  {Interface: 2, IsTrunkingCompatible: false, BranchInterface: 0},
	"x.odd":    {IsTrunkingCompatible: true, BranchInterface: 0},
	"c5.24xlarge": {IsTrunkingCompatible: true, BranchInterface: 107},
}`,
			want: map[string]int{"m5.large": 9, "c5.24xlarge": 107},
		},
		{
			name:    "no Limits variable",
			source:  "package vpc\nvar Other = map[string]int{}\n",
			wantErr: "no `var Limits = map[string]*VPCLimits{...}` found",
		},
		{
			name:    "no trunking type",
			source:  "package vpc\nvar Limits = map[string]*VPCLimits{\"t3.nano\": {IsTrunkingCompatible: false}}\n",
			wantErr: "no instance type supports trunking",
		},
		{
			name:    "a branch count that is not a number",
			source:  "package vpc\nvar Limits = map[string]*VPCLimits{\"m5.large\": {IsTrunkingCompatible: true, BranchInterface: n}}\n",
			wantErr: "BranchInterface of m5.large is not a number",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "limits.go")
			if err := os.WriteFile(path, []byte(tt.source), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := branchInterfaces(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("branchInterfaces error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("branchInterfaces (-want +got):\n%s", diff)
			}
		})
	}
}
