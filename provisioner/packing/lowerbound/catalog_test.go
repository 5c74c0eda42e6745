package lowerbound

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gib is a GiB in bytes. The tests' dimensions are cpu millicores, memory bytes, pod slots
// and GPUs.
const gib = 1 << 30

// offering is a catalog column with what demands select it by.
type offering struct {
	Column
	arch     string
	zone     int
	spot     bool
	gpu      bool
	memRatio float64
}

// syntheticCatalog builds 12,000 offerings shaped like EC2's: 1,485 general-purpose types
// (memory ratios 1:2, 1:4 and 1:8 GiB per vCPU, 45 generations and vendors per ratio, sizes 1 to
// 96 vCPU) and 15 GPU types, each in 4 zones on demand and spot. On-demand prices are linear in
// vCPU and memory, times a factor per family; spot prices are discounted at random per type and
// zone. Allocatable subtracts the kubelet's reservations, which grow slower than the node, and
// pod slots follow the network interfaces, capped at 110: so per dollar small sizes give more
// pods and large ones a little more cpu and memory, and no size dominates its family.
func syntheticCatalog(rng *rand.Rand) []offering {
	const perVCPU, perGiB, perGPU = 0.0316, 0.0042, 0.55
	sizes := []int{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96}
	type shape struct {
		vcpu, memGiB, gpus int
		price              float64
		arch               string
		ratio              float64
	}
	var shapes []shape
	for _, ratio := range []float64{2, 4, 8} {
		for v := range 45 {
			arch := "amd64"
			factor := 0.9 + 0.25*rng.Float64()
			if v%3 == 2 {
				arch, factor = "arm64", factor*0.8
			}
			for _, n := range sizes {
				mem := int(ratio) * n
				shapes = append(shapes, shape{vcpu: n, memGiB: mem, price: factor * (perVCPU*float64(n) + perGiB*float64(mem)), arch: arch, ratio: ratio})
			}
		}
	}
	for v := range 5 {
		factor := 0.9 + 0.2*float64(v)/4
		for _, s := range [][3]int{{4, 16, 1}, {16, 64, 1}, {48, 192, 4}} {
			price := factor * (perVCPU*float64(s[0]) + perGiB*float64(s[1]) + perGPU*float64(s[2]))
			shapes = append(shapes, shape{vcpu: s[0], memGiB: s[1], gpus: s[2], price: price, arch: "amd64", ratio: 4})
		}
	}
	var catalog []offering
	for _, s := range shapes {
		capacity := allocatable(s.vcpu, s.memGiB, s.gpus)
		for zone := range 4 {
			for _, spot := range []bool{false, true} {
				price := s.price
				if spot {
					price *= 0.3 + 0.4*rng.Float64()
				}
				catalog = append(catalog, offering{
					Column: Column{Price: price, Capacity: capacity},
					arch:   s.arch, zone: zone, spot: spot, gpu: s.gpus > 0, memRatio: s.ratio,
				})
			}
		}
	}
	return catalog
}

// allocatable follows the kubelet's reservations as Karpenter computes them for EC2.
func allocatable(vcpu, memGiB, gpuCount int) []float64 {
	// Pods the network interfaces allow, by size class (1, 2, 4, 8, 16+ vCPU), capped at 110.
	eni := []int{8, 29, 58, 58, 234}
	maxPods := min(110, eni[min(len(eni)-1, bitsLen(vcpu))])
	reserved := 0.0
	for i, share := range []float64{0.06, 0.01, 0.005, 0.005} {
		if i < vcpu {
			reserved += 1000 * share
		}
	}
	if vcpu > 4 {
		reserved += 1000 * 0.0025 * float64(vcpu-4)
	}
	mem := float64(memGiB)*gib - float64(255+11*maxPods)*(1<<20) - 100*(1<<20)
	return []float64{1000*float64(vcpu) - reserved, mem, float64(maxPods), float64(gpuCount)}
}

// bitsLen is the number of bits of n: the size class of a vCPU count.
func bitsLen(n int) int {
	b := 0
	for ; n > 1; n >>= 1 {
		b++
	}
	return b
}

// catalogDemands are ten demands with the constraints pods typically carry.
func catalogDemands(catalog []offering) []Demand {
	type spec struct {
		vcpu, memGiB, pods, gpus float64
		allows                   func(o offering) bool
	}
	cpuOnly := func(o offering) bool { return !o.gpu }
	specs := []spec{
		{40, 80, 200, 0, cpuOnly},
		{16, 512, 16, 0, func(o offering) bool { return !o.gpu && !o.spot }},
		{200, 200, 400, 0, func(o offering) bool { return !o.gpu && o.spot }},
		{24, 96, 48, 0, func(o offering) bool { return !o.gpu && o.arch == "arm64" }},
		{8, 32, 10, 0, func(o offering) bool { return !o.gpu && o.zone == 0 && !o.spot }},
		{16, 128, 4, 8, func(o offering) bool { return o.gpu }},
		{12, 24, 60, 0, func(o offering) bool { return !o.gpu && o.arch == "amd64" && o.zone == 1 && !o.spot }},
		{12, 300, 20, 0, func(o offering) bool { return !o.gpu && o.memRatio == 8 }},
		{10, 20, 1000, 0, cpuOnly},
		{64, 128, 128, 0, func(o offering) bool { return !o.gpu && o.arch == "amd64" && o.spot && o.zone >= 2 }},
	}
	demands := make([]Demand, len(specs))
	for d, s := range specs {
		demands[d].Amount = []float64{1000 * s.vcpu, s.memGiB * gib, s.pods, s.gpus}
		for c, o := range catalog {
			if s.allows(o) {
				demands[d].Columns = append(demands[d].Columns, c)
			}
		}
	}
	return demands
}

func catalogColumns(catalog []offering) []Column {
	columns := make([]Column, len(catalog))
	for c, o := range catalog {
		columns[c] = o.Column
	}
	return columns
}

func totalAmount(demands []Demand) []float64 {
	total := make([]float64, len(demands[0].Amount))
	for _, d := range demands {
		for r, a := range d.Amount {
			total[r] += a
		}
	}
	return total
}

func BenchmarkSolve(b *testing.B) {
	catalog := syntheticCatalog(rand.New(rand.NewPCG(7, 8)))
	columns, demands := catalogColumns(catalog), catalogDemands(catalog)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Solve(columns, demands); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResourcePrices(b *testing.B) {
	catalog := syntheticCatalog(rand.New(rand.NewPCG(7, 8)))
	columns, amount := catalogColumns(catalog), totalAmount(catalogDemands(catalog))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ResourcePrices(columns, amount); err != nil {
			b.Fatal(err)
		}
	}
}

// inUnits converts an instance to vCPU and GiB, which the reference solves more reliably than
// millicores and bytes.
func inUnits(columns []Column, demands []Demand) ([]Column, []Demand) {
	unit := []float64{1000, gib, 1, 1}
	convert := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for r := range v {
			out[r] = v[r] / unit[r]
		}
		return out
	}
	cs := make([]Column, len(columns))
	for c, col := range columns {
		cs[c] = Column{Price: col.Price, Capacity: convert(col.Capacity)}
	}
	ds := make([]Demand, len(demands))
	for d, dem := range demands {
		ds[d] = Demand{Amount: convert(dem.Amount), Columns: dem.Columns}
	}
	return cs, ds
}

// sample keeps n random offerings of the catalog, and the demands that may use some of them.
func sample(rng *rand.Rand, catalog []offering, n int) ([]Column, []Demand) {
	picked := rng.Perm(len(catalog))[:n]
	kept := make([]offering, n)
	for i, c := range picked {
		kept[i] = catalog[c]
	}
	var demands []Demand
	for _, d := range catalogDemands(kept) {
		if len(d.Columns) > 0 {
			demands = append(demands, d)
		}
	}
	return catalogColumns(kept), demands
}

func TestSolveOnCatalogSamplesAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	catalog := syntheticCatalog(rng)
	for n := range 5 {
		columns, demands := sample(rng, catalog, 25)
		raw, err := Solve(columns, demands)
		if err != nil {
			t.Fatalf("sample %d: Solve: %v", n, err)
		}
		columns, demands = inUnits(columns, demands)
		if !compareWithReference(t, n, columns, demands) {
			t.Fatalf("sample %d is infeasible", n)
		}
		scaled, err := Solve(columns, demands)
		if err != nil {
			t.Fatalf("sample %d: Solve in vCPU and GiB: %v", n, err)
		}
		if e := relativeError(raw.Cost, scaled.Cost); e > 1e-9 {
			t.Errorf("sample %d: cost %v in millicores and bytes, %v in vCPU and GiB", n, raw.Cost, scaled.Cost)
		}
	}
}

func TestSolveOnCatalogIgnoresColumnOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	catalog := syntheticCatalog(rng)
	columns, demands := catalogColumns(catalog), catalogDemands(catalog)
	want, err := Solve(columns, demands)
	if err != nil {
		t.Fatal(err)
	}
	wantPrices, err := ResourcePrices(columns, totalAmount(demands))
	if err != nil {
		t.Fatal(err)
	}

	perm := rng.Perm(len(columns))
	shuffled := make([]Column, len(columns))
	for c, p := range perm {
		shuffled[p] = columns[c]
	}
	moved := make([]Demand, len(demands))
	for d, dem := range demands {
		moved[d] = Demand{Amount: dem.Amount}
		for _, c := range dem.Columns {
			moved[d].Columns = append(moved[d].Columns, perm[c])
		}
	}
	got, err := Solve(shuffled, moved)
	if err != nil {
		t.Fatal(err)
	}
	gotPrices, err := ResourcePrices(shuffled, totalAmount(demands))
	if err != nil {
		t.Fatal(err)
	}
	value := func(prices []float64) float64 {
		v := 0.0
		for r, a := range totalAmount(demands) {
			v += prices[r] * a
		}
		return v
	}
	if diff := cmp.Diff([]float64{want.Cost, value(wantPrices)}, []float64{got.Cost, value(gotPrices)}, approx); diff != "" {
		t.Errorf("Solve cost and ResourcePrices value after shuffling the columns (-want +got):\n%s", diff)
	}
}
