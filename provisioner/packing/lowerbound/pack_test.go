package lowerbound

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPacker(t *testing.T) {
	tests := []struct {
		name string
		u    []float64
		// a holds each demand's amounts, one row per demand.
		a     [][]float64
		kappa []float64
		value float64
		g     []float64
	}{
		{
			name:  "one demand stops at its binding row",
			u:     []float64{2},
			a:     [][]float64{{1, 2}},
			kappa: []float64{4, 4},
			value: 4,
			g:     []float64{2},
		},
		{
			name:  "complementary demands fill both rows",
			u:     []float64{1, 1},
			a:     [][]float64{{2, 1}, {1, 2}},
			kappa: []float64{4, 4},
			value: 8.0 / 3,
			g:     []float64{4.0 / 3, 4.0 / 3},
		},
		{
			name:  "a demand worth too little per unit of what it uses is left out",
			u:     []float64{1, 0.1},
			a:     [][]float64{{1, 1}, {1, 1}},
			kappa: []float64{3, 5},
			value: 3,
			g:     []float64{3, 0},
		},
		{
			name:  "degenerate vertex where three rows meet in two variables",
			u:     []float64{1, 1},
			a:     [][]float64{{1, 0, 1}, {0, 1, 1}},
			kappa: []float64{1, 1, 2},
			value: 2,
			g:     []float64{1, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pk packer
			g := make([]float64, len(tt.u))
			value, ok := pk.solve(tt.u, flatten(tt.a), tt.kappa, g)
			if !ok {
				t.Fatal("packer hit its iteration limit")
			}
			if diff := cmp.Diff(tt.value, value, approx); diff != "" {
				t.Errorf("value mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.g, g, approx); diff != "" {
				t.Errorf("g mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPackerAgreesWithReference compares the packer with gonum on random problems full of ties:
// small integer amounts, zeros, repeated demands, equal prices.
func TestPackerAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var pk packer
	for n := range 500 {
		m, k := 1+rng.IntN(6), 1+rng.IntN(8)
		u := make([]float64, k)
		a := make([][]float64, k)
		for j := range k {
			u[j] = float64(1 + rng.IntN(3))
			a[j] = make([]float64, m)
			if j > 0 && rng.IntN(4) == 0 {
				copy(a[j], a[rng.IntN(j)])
				continue
			}
			for r := range m {
				a[j][r] = float64(rng.IntN(4))
			}
			a[j][rng.IntN(m)] = float64(1 + rng.IntN(3))
		}
		kappa := make([]float64, m)
		for r := range m {
			kappa[r] = float64(1 + rng.IntN(5))
		}
		g := make([]float64, k)
		got, ok := pk.solve(u, flatten(a), kappa, g)
		if !ok {
			t.Fatalf("problem %d: packer hit its iteration limit", n)
		}
		s := &standardForm{rows: m, b: kappa}
		for j := range k {
			entries := map[int]float64{}
			for r, v := range a[j] {
				if v > 0 {
					entries[r] = v
				}
			}
			s.add(-u[j], entries)
		}
		for r := range m {
			s.add(0, map[int]float64{r: 1})
		}
		want, err := s.solve()
		if err != nil {
			t.Fatalf("problem %d: reference: %v", n, err)
		}
		if e := relativeError(got, -want); e > 1e-9 {
			t.Errorf("problem %d: value %v, reference %v", n, got, -want)
		}
		for r := range m {
			load := 0.0
			for j := range k {
				load += g[j] * a[j][r]
			}
			if load > kappa[r]*(1+1e-9) {
				t.Errorf("problem %d: g %v loads row %d with %v, more than %v", n, g, r, load, kappa[r])
			}
		}
	}
}

func flatten(a [][]float64) []float64 {
	var out []float64
	for _, row := range a {
		out = append(out, row...)
	}
	return out
}
