package filtercheck

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// largeCluster is 100 nodes in 4 zones holding 1,000 pods that all fit: 200 spread over zones,
// 100 with hostname anti-affinity, 700 plain.
func largeCluster() Cluster {
	const nodeCount, podCount = 100, 1000
	var c Cluster
	for i := range nodeCount {
		c.Nodes = append(c.Nodes, node(fmt.Sprintf("n-%03d", i), fmt.Sprintf("zone-%d", i%4)).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "16", corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}).Obj())
	}
	for i := range podCount {
		nodeName := fmt.Sprintf("n-%03d", i%nodeCount)
		var w *st.PodWrapper
		switch {
		case i < 200:
			w = zoneSpread(fmt.Sprintf("spread-%d", i), nodeName, corev1.DoNotSchedule, nil)
		case i < 300:
			w = pod(fmt.Sprintf("anti-%d", i), nodeName).Label("app", "anti").
				PodAntiAffinity(hostKey, appIs("anti"), st.PodAntiAffinityWithRequiredReq)
		default:
			w = pod(fmt.Sprintf("plain-%d", i), nodeName).Req(map[corev1.ResourceName]string{corev1.ResourceMemory: "1Gi"})
		}
		c.Pods = append(c.Pods, w.Obj())
	}
	return c
}

func BenchmarkCheck(b *testing.B) {
	c := largeCluster()
	benchmarks := []struct {
		name string
		pods []string
	}{
		{name: "framework only", pods: []string{}},
		{name: "1000 pods on 100 nodes", pods: nil},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				got, err := Check(context.Background(), c, bm.pods)
				if err != nil {
					b.Fatalf("Check: %v", err)
				}
				if len(got) != 0 {
					b.Fatalf("Check rejected %d pods of a cluster where all fit, first %+v", len(got), got[0])
				}
			}
		})
	}
}
