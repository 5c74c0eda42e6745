package workloads

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The values below are CPython 3.11's, e.g.
// python3 -c 'import random; r=random.Random(42); print([r.random() for _ in range(4)])'.

func TestPythonRandomFloats(t *testing.T) {
	tests := []struct {
		name string
		seed int64
		want []float64
	}{
		{name: "seed 42", seed: 42, want: []float64{0.6394267984578837, 0.025010755222666936, 0.27502931836911926, 0.22321073814882275}},
		{name: "seed 0", seed: 0, want: []float64{0.8444218515250481, 0.7579544029403025, 0.420571580830845, 0.25891675029296335}},
		{name: "seed 7", seed: 7, want: []float64{0.32383276483316237, 0.15084917392450192, 0.6509344730398537, 0.07243628666754276}},
		{name: "largest one-word seed", seed: 1<<32 - 1, want: []float64{0.6353574441341173, 0.20319993954407756, 0.6073666030347188, 0.29133552762158776}},
		{name: "smallest two-word seed", seed: 1 << 32, want: []float64{0.11299430095636409, 0.41782886486292836, 0.0166763664992291, 0.6117214625782752}},
		{name: "two-word seed", seed: 123456789012345, want: []float64{0.6744750084019356, 0.2923275784421222, 0.22484093741322975, 0.5248293643952946}},
		{name: "negative seed is its absolute value", seed: -42, want: []float64{0.6394267984578837, 0.025010755222666936, 0.27502931836911926, 0.22321073814882275}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newPythonRandom(tt.seed)
			var got []float64
			for range tt.want {
				got = append(got, r.random())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("random() of random.Random(%d) (-want +got):\n%s", tt.seed, diff)
			}
		})
	}
}

func TestPythonRandomBits(t *testing.T) {
	type draw struct {
		K int
		V uint64
	}
	tests := []struct {
		name string
		seed int64
		want []draw
	}{
		{
			name: "widths from 0 to 64",
			seed: 42,
			want: []draw{{1, 1}, {5, 3}, {31, 53710184}, {32, 3184935163}, {33, 1181241943}, {64, 2574020394472462046}, {0, 0}, {2, 2}},
		},
		{name: "two-word seed", seed: 1<<40 + 3, want: []draw{{32, 943978446}, {32, 261273136}, {32, 2359950418}}},
		{name: "largest seed", seed: math.MaxInt64, want: []draw{{32, 1359979423}, {32, 2819855560}, {32, 2711238091}}},
		{name: "smallest seed is 2^63", seed: math.MinInt64, want: []draw{{32, 2377109768}, {32, 1691753470}, {32, 4039908392}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newPythonRandom(tt.seed)
			var got []draw
			for _, d := range tt.want {
				got = append(got, draw{d.K, r.getrandbits(d.K)})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("getrandbits of random.Random(%d) (-want +got):\n%s", tt.seed, diff)
			}
		})
	}
}

// TestPythonRandomState checks the state past its first regeneration (624 draws), and
// init_by_array against the reference output of mt19937ar.c (key 0x123, 0x234, 0x345,
// 0x456), which no int64 seed reaches.
func TestPythonRandomState(t *testing.T) {
	r := newPythonRandom(42)
	for range 700 {
		r.genrand32()
	}
	after := []any{r.genrand32(), r.random()}
	if diff := cmp.Diff([]any{uint32(4214005797), 0.8436611632720807}, after); diff != "" {
		t.Errorf("random.Random(42) after 700 draws: getrandbits(32), random() (-want +got):\n%s", diff)
	}

	var ref pythonRandom
	ref.initByArray([]uint32{0x123, 0x234, 0x345, 0x456})
	var got []uint32
	for range 5 {
		got = append(got, ref.genrand32())
	}
	if diff := cmp.Diff([]uint32{1067595299, 955945823, 477289528, 4107218783, 4228976476}, got); diff != "" {
		t.Errorf("init_by_array of the reference key (-want +got):\n%s", diff)
	}
}

func TestPythonRandomChoices(t *testing.T) {
	tests := []struct {
		name string
		seed int64
		draw func(*pythonRandom) string
		want []string
	}{
		{
			// Five of eight values of three bits are kept: _randbelow rejects the rest.
			name: "choice of five",
			seed: 42,
			draw: func(r *pythonRandom) string { return choice(r, []string{"a", "b", "c", "d", "e"}) },
			want: []string{"a", "a", "c", "b", "b", "b", "a", "e", "a", "e", "d", "a", "a", "a", "b", "b", "e", "e", "a", "e"},
		},
		{
			name: "choice of seven",
			seed: 42,
			draw: func(r *pythonRandom) string { return choice(r, []string{"2", "3", "5", "8", "12", "20", "40"}) },
			want: []string{"20", "2", "2", "20", "5", "3", "3", "3", "20", "2", "20", "20"},
		},
		{
			name: "weighted",
			seed: 42,
			draw: func(r *pythonRandom) string {
				return weightedChoice(r, []string{"web", "jvm", "worker", "arm", "gpu"}, []int{40, 20, 25, 12, 3})
			},
			want: []string{"worker", "web", "web", "web", "worker", "worker", "arm", "web", "jvm", "web", "web", "jvm"},
		},
		{
			name: "weighted, never of weight zero",
			seed: 7,
			draw: func(r *pythonRandom) string { return weightedChoice(r, []string{"a", "b", "c"}, []int{1, 0, 1}) },
			want: []string{"a", "a", "c", "a", "c", "a", "a", "c", "a", "a", "a", "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newPythonRandom(tt.seed)
			var got []string
			for range tt.want {
				got = append(got, tt.draw(r))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("draws of random.Random(%d) (-want +got):\n%s", tt.seed, diff)
			}
		})
	}
}

// TestPythonRandomInterleaved draws as the shapes do, one kind after another from one
// generator: random.Random(42).choice([1, 2, 3]), random(), choices('xyz', [5, 1, 1])[0],
// getrandbits(10).
func TestPythonRandomInterleaved(t *testing.T) {
	r := newPythonRandom(42)
	got := []any{choice(r, []int{1, 2, 3}), r.random(), weightedChoice(r, []string{"x", "y", "z"}, []int{5, 1, 1}), r.getrandbits(10)}
	want := []any{3, 0.11133106816568039, "y", uint64(250)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("interleaved draws (-want +got):\n%s", diff)
	}
}
