package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// validType is a catalog entry every test case starts from.
const validType = `{"name":"m5.large","family":"m5","category":"m","generation":5,"size":"large","arch":"amd64",
 "vcpu":2,"memoryMiB":8192,"cpuManufacturer":"intel","hypervisor":"nitro","bareMetal":false,
 "burstable":false,"networkBandwidthMbps":750,"ebsBandwidthMbps":4750,"localNvmeGiB":null,
 "encryptionInTransit":false,"maxENIs":3,"ipv4PerENI":10,"maxPods":29,"gpu":null,"accelerator":null,
 "onDemandPricePerHour":0.096,
 "offerings":[{"zone":"us-east-1a","capacityType":"on-demand","pricePerHour":0.096},
              {"zone":"us-east-1a","capacityType":"spot","pricePerHour":0.05501}]}`

func catalogJSON(types ...string) string {
	return `{"region":"us-east-1","zones":["us-east-1a","us-east-1b"],"currency":"USD","instanceTypes":[` + strings.Join(types, ",") + `]}`
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    *Catalog
		wantErr string
	}{
		{
			name:  "valid catalog",
			input: catalogJSON(validType),
			want: &Catalog{
				Region: "us-east-1", Zones: []string{"us-east-1a", "us-east-1b"}, Currency: "USD",
				InstanceTypes: []InstanceType{{
					Name: "m5.large", Family: "m5", Category: "m", Generation: 5, Size: "large", Arch: "amd64",
					VCPU: 2, MemoryMiB: 8192, CPUManufacturer: "intel", Hypervisor: "nitro",
					NetworkBandwidthMbps: 750, EBSBandwidthMbps: 4750, MaxENIs: 3, IPv4PerENI: 10, MaxPods: 29,
					OnDemandPricePerHour: 0.096,
					Offerings: []Offering{
						{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.096},
						{Zone: "us-east-1a", CapacityType: "spot", PricePerHour: 0.05501},
					},
				}},
			},
		},
		{
			name:    "not JSON",
			input:   "region: us-east-1",
			wantErr: "line 1, column 1: invalid character 'r' looking for beginning of value: the table is not valid JSON",
		},
		{
			name:    "misspelt field",
			input:   strings.Replace(catalogJSON(validType), `"vcpu"`, `"vcpus"`, 1),
			wantErr: `line 2, column 2: instanceTypes[0].vcpus: unknown field; did you mean "vcpu"?`,
		},
		{
			name:    "data after the catalog",
			input:   catalogJSON(validType) + "{}",
			wantErr: "line 7, column 85: unexpected data after the JSON value: a table is one JSON value",
		},
		{
			name:    "no zones and no instance types",
			input:   `{"region":"us-east-1","zones":[],"instanceTypes":[]}`,
			wantErr: "zones: must list at least one zone\ninstanceTypes: must list at least one instance type",
		},
		{
			name:    "unnamed instance type",
			input:   catalogJSON(strings.Replace(validType, `"m5.large"`, `""`, 1)),
			wantErr: "instanceTypes[0]: name must be set",
		},
		{
			name:    "duplicate instance type",
			input:   catalogJSON(validType, validType),
			wantErr: "instanceTypes[1] (m5.large): duplicates instanceTypes[0]",
		},
		{
			name:    "EC2 spelling of the architecture",
			input:   catalogJSON(strings.Replace(validType, `"amd64"`, `"x86_64"`, 1)),
			wantErr: `instanceTypes[0] (m5.large): arch "x86_64" must be amd64 or arm64`,
		},
		{
			name:    "no vCPUs or memory",
			input:   catalogJSON(strings.NewReplacer(`"vcpu":2`, `"vcpu":0`, `"memoryMiB":8192`, `"memoryMiB":-1`).Replace(validType)),
			wantErr: "instanceTypes[0] (m5.large): vcpu must be positive, got 0\ninstanceTypes[0] (m5.large): memoryMiB must be positive, got -1",
		},
		{
			name:    "negative ENIs",
			input:   catalogJSON(strings.Replace(validType, `"maxENIs":3`, `"maxENIs":-3`, 1)),
			wantErr: "instanceTypes[0] (m5.large): maxENIs and ipv4PerENI must not be negative, got -3 and 10",
		},
		{
			name:    "zero GPUs",
			input:   catalogJSON(strings.Replace(validType, `"gpu":null`, `"gpu":{"count":0,"name":"t4","manufacturer":"nvidia"}`, 1)),
			wantErr: `instanceTypes[0] (m5.large): gpu.count must be positive, got 0 (use "gpu": null for none)`,
		},
		{
			name:    "zero accelerators",
			input:   catalogJSON(strings.Replace(validType, `"accelerator":null`, `"accelerator":{"count":0,"name":"inferentia","manufacturer":"aws"}`, 1)),
			wantErr: `instanceTypes[0] (m5.large): accelerator.count must be positive, got 0 (use "accelerator": null for none)`,
		},
		{
			name:    "negative on-demand price",
			input:   catalogJSON(strings.Replace(validType, `"onDemandPricePerHour":0.096`, `"onDemandPricePerHour":-1`, 1)),
			wantErr: "instanceTypes[0] (m5.large): onDemandPricePerHour must not be negative, got -1",
		},
		{
			name: "bad offering",
			input: catalogJSON(strings.Replace(validType, `{"zone":"us-east-1a","capacityType":"spot","pricePerHour":0.05501}`,
				`{"zone":"us-east-1z","capacityType":"Spot","pricePerHour":0}`, 1)),
			wantErr: "instanceTypes[0] (m5.large): offerings[1]: zone \"us-east-1z\" is not one of the catalog's zones\n" +
				"instanceTypes[0] (m5.large): offerings[1]: capacityType \"Spot\" must be spot or on-demand\n" +
				"instanceTypes[0] (m5.large): offerings[1]: pricePerHour must be positive, got 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.input))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parse() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.json")
	broken := filepath.Join(dir, "broken.json")
	missing := filepath.Join(dir, "missing.json")
	if err := os.WriteFile(valid, []byte(catalogJSON(validType)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(broken, []byte(catalogJSON(strings.Replace(validType, `"vcpu":2`, `"vcpu":0`, 1))), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongKind := filepath.Join(dir, "wrongKind.json")
	if err := os.WriteFile(wrongKind, []byte(catalogJSON(strings.Replace(validType, `"vcpu":2`, `"vcpu":"2"`, 1))), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		want    []string
		wantErr string
	}{
		{name: "valid file", path: valid, want: []string{"m5.large"}},
		{name: "invalid file", path: broken, wantErr: "EC2 catalog " + broken + ": instanceTypes[0] (m5.large): vcpu must be positive, got 0"},
		{name: "a value of the wrong kind", path: wrongKind, wantErr: "EC2 catalog " + wrongKind + `: line 2, column 9: instanceTypes[0].vcpu: the string "2", where a whole number (int) is wanted`},
		{name: "missing file", path: missing, wantErr: "reading EC2 catalog: open " + missing + ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadFile(tt.path)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("LoadFile() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, it := range got.InstanceTypes {
				names = append(names, it.Name)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("instance types (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmbeddedIsValidAndFresh(t *testing.T) {
	first, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"}, first.Zones); diff != "" {
		t.Errorf("zones (-want +got):\n%s", diff)
	}
	if len(first.InstanceTypes) < 1000 {
		t.Errorf("embedded catalog has %d instance types, want the whole region", len(first.InstanceTypes))
	}
	first.InstanceTypes[0].Name = "changed"
	second, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if second.InstanceTypes[0].Name == "changed" {
		t.Error("Embedded() returned a catalog shared with an earlier call")
	}
}
