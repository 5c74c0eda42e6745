package packing_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// The benchmarks plan the workloads of test/workloads with the full embedded catalog
// (1,345 instance types) and report, besides time and allocations per plan: pods planned
// per second, nodes, the plan's $/hour and its ratio to the LP lower bound.

func BenchmarkSolve(b *testing.B) {
	for _, shape := range workloads.Shapes {
		for _, pods := range []int{1000, 5000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", shape, pods), func(b *testing.B) {
				in := workloads.Load(b, shape, pods)
				var plan packing.Plan
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					plan = packing.Solve(in)
				}
				b.StopTimer()
				bound, err := packing.LowerBound(in, plan)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
				b.ReportMetric(float64(len(plan.NewNodeClaims)), "nodes")
				b.ReportMetric(plan.PricePerHour(), "$/hour")
				if bound > 0 {
					b.ReportMetric(plan.PricePerHour()/bound, "x-bound")
				}
				b.ReportMetric(float64(len(plan.Unschedulable)), "unschedulable")
			})
		}
	}
}
