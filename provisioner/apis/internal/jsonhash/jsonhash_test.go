package jsonhash

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	Name  string `json:"name,omitempty"`
	Count int    `json:"count"`
}

type value struct {
	Flag   *bool             `json:"flag,omitempty"`
	Text   string            `json:"text"`
	Labels map[string]string `json:"labels"`
	Items  []inner           `json:"items"`
	Inner  *inner            `json:"inner,omitempty"`
}

func TestSumLeavesOutZeroMembersOnly(t *testing.T) {
	no, yes := false, true
	for _, tt := range []struct {
		name string
		a, b value
		same bool
	}{
		{name: "unset and false", a: value{}, b: value{Flag: &no}, same: true},
		{name: "nil and empty map", a: value{}, b: value{Labels: map[string]string{}}, same: true},
		{name: "nil and zero struct", a: value{}, b: value{Inner: &inner{}}, same: true},
		{name: "map order", a: value{Labels: map[string]string{"a": "1", "b": "2"}}, b: value{Labels: map[string]string{"b": "2", "a": "1"}}, same: true},
		{name: "unset and true", a: value{}, b: value{Flag: &yes}},
		{name: "text", a: value{}, b: value{Text: "x"}},
		{name: "zero array element counts", a: value{Items: []inner{{Name: "a"}}}, b: value{Items: []inner{{Name: "a"}, {}}}},
		{name: "array order counts", a: value{Items: []inner{{Name: "a"}, {Name: "b"}}}, b: value{Items: []inner{{Name: "b"}, {Name: "a"}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.same, Sum(tt.a) == Sum(tt.b)); diff != "" {
				t.Errorf("same hash (-want +got):\n%s", diff)
			}
		})
	}
}
