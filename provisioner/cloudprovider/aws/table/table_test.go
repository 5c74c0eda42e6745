package table

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// even is a number that decodes itself and refuses odd ones, as resource.Quantity refuses
// what is not a quantity.
type even int

func (e *even) UnmarshalJSON(b []byte) error {
	var n int
	if _, err := fmt.Sscan(string(b), &n); err != nil || n%2 != 0 {
		return fmt.Errorf("%s is not an even number", b)
	}
	*e = even(n)
	return nil
}

type row struct {
	Name  string   `json:"name"`
	VCPU  int      `json:"vcpu"`
	Price float64  `json:"price"`
	Even  even     `json:"even"`
	GPU   *int     `json:"gpu"`
	Tags  []string `json:"tags"`
	Extra any      `json:"extra"`
}

type doc struct {
	Rows   []row          `json:"rows"`
	Counts map[string]int `json:"counts"`
}

func TestDecode(t *testing.T) {
	two := 2
	tests := []struct {
		name    string
		input   string
		want    doc
		wantErr string
	}{
		{
			name: "a good table",
			input: `{"rows": [
  {"name": "m5.large", "vcpu": 2, "price": 0.096, "even": 4, "gpu": null, "tags": ["a"], "extra": {"any": [1, {}]}},
  {"name": "p3.2xlarge", "vcpu": 8, "price": 3.06, "even": 0, "gpu": 2, "tags": []}
],
"counts": {"m5.large": 3}}`,
			want: doc{
				Rows: []row{
					{Name: "m5.large", VCPU: 2, Price: 0.096, Even: 4, Tags: []string{"a"}, Extra: map[string]any{"any": []any{1.0, map[string]any{}}}},
					{Name: "p3.2xlarge", VCPU: 8, Price: 3.06, GPU: &two, Tags: []string{}},
				},
				Counts: map[string]int{"m5.large": 3},
			},
		},
		{
			name:  "a missing field is left zero for the table's validation",
			input: `{"rows": [{"name": "m5.large"}]}`,
			want:  doc{Rows: []row{{Name: "m5.large"}}},
		},
		{
			name:  "a field's name matches but for case, as encoding/json matches it",
			input: `{"Rows": [{"VCPU": 2}]}`,
			want:  doc{Rows: []row{{VCPU: 2}}},
		},
		{
			name:    "an empty table",
			input:   "",
			wantErr: "line 1, column 1: empty: want one JSON value",
		},
		{
			name:    "white space only",
			input:   "\n  \n",
			wantErr: "line 1, column 1: empty: want one JSON value",
		},
		{
			name: "an unknown field names its row and the field it misspells",
			input: `{"rows": [
  {"name": "m5.large", "vcpu": 2},
  {"name": "m5.xlarge", "vcpus": 4}
]}`,
			wantErr: `line 3, column 25: rows[1].vcpus: unknown field; did you mean "vcpu"?`,
		},
		{
			name:    "an unknown field like none lists the fields",
			input:   `{"rows": [], "columns": []}`,
			wantErr: `line 1, column 14: columns: unknown field; the fields here are counts, rows`,
		},
		{
			name:    "an unknown field in a nested object is placed by its type, not by its name",
			input:   `{"counts": {"name": 1}, "rows": [{"name": "a", "extra": {"name": 1}, "tags": [], "counts": 1}]}`,
			wantErr: `line 1, column 82: rows[0].counts: unknown field; the fields here are even, extra, gpu, name, price, tags, vcpu`,
		},
		{
			name: "a string where a number is wanted",
			input: `{"rows": [
  {"name": "m5.large", "vcpu": "two"}
]}`,
			wantErr: `line 2, column 32: rows[0].vcpu: the string "two", where a whole number (int) is wanted`,
		},
		{
			name:    "a fraction where a whole number is wanted",
			input:   `{"rows": [{"vcpu": 2.5}]}`,
			wantErr: `line 1, column 20: rows[0].vcpu: 2.5 is not a whole number (int)`,
		},
		{
			name:    "a number out of range",
			input:   `{"rows": [{"price": 1e400}]}`,
			wantErr: `line 1, column 21: rows[0].price: 1e400 is not a number (float64)`,
		},
		{
			name:    "a bad value in a map names its key",
			input:   `{"counts": {"m5.large": 3, "c5.large": true}}`,
			wantErr: `line 1, column 40: counts["c5.large"]: true, where a whole number (int) is wanted`,
		},
		{
			name:    "an object where a list is wanted",
			input:   `{"rows": {"name": "m5.large"}}`,
			wantErr: `line 1, column 10: rows: an object, where a list is wanted`,
		},
		{
			name:    "a value its type refuses",
			input:   `{"rows": [{"even": 2}, {"even": 3}]}`,
			wantErr: `line 1, column 33: rows[1].even: 3 is not an even number`,
		},
		{
			name:    "not JSON",
			input:   "{\"rows\": [\n  {\"name\": m5.large}\n]}",
			wantErr: `line 2, column 12: invalid character 'm' looking for beginning of value: the table is not valid JSON`,
		},
		{
			name:    "not JSON at its last character",
			input:   `{"rows": [{}}`,
			wantErr: `line 1, column 13: invalid character '}' after array element: the table is not valid JSON`,
		},
		{
			name:    "cut short",
			input:   `{"rows": [{"name": "m5.large"}`,
			wantErr: `line 1, column 31: the data ends inside a value: the table is cut short`,
		},
		{
			name:    "data after the table",
			input:   "{\"rows\": []}\n{\"rows\": []}",
			wantErr: `line 2, column 1: unexpected data after the JSON value: a table is one JSON value`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got doc
			err := Decode(strings.NewReader(tt.input), &got)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Decode() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(): %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeNamesTheLineInAManyLineTable: positions count lines and characters, not bytes.
func TestDecodeNamesTheLineInAManyLineTable(t *testing.T) {
	input := `{"rows": [` + strings.Repeat("\n  {\"name\": \"größe\"},", 40) + "\n  {\"name\": \"größe\", \"price\": \"1\"}\n]}"
	var got doc
	err := Decode(strings.NewReader(input), &got)
	want := `line 42, column 30: rows[40].price: the string "1", where a number (float64) is wanted`
	if err == nil || err.Error() != want {
		t.Fatalf("Decode() error = %v, want %q", err, want)
	}
}
