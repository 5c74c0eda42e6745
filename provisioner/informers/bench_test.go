package informers_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/informers"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/test/testenv"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// The memory benchmark's cluster: the webmix workload's pods, dressed and running as a
// Deployment's pods, ten to a node; BENCH_PODS sets how many (5,000 by default, the
// target's 50,000 to measure it rather than project it).
var (
	benchPods  = benchSize()
	benchNodes = benchPods / 10
)

// The cluster issue 20 sizes the sidecar for.
const targetPods, targetNodes = 50_000, 5_000

func benchSize() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_PODS")); err == nil && n >= 10 {
		return n
	}
	return 5000
}

// BenchmarkCacheMemory fills a real API server with pods and nodes as a cluster stores
// them (realisticPod, runningStatus, realisticNode; created and updated by the field
// managers that write them in a cluster, so their managedFields are real) and measures the
// heap a cache holding them takes once synced, less that of the same cache selecting none
// of them, per object: HeapInuse after GC (B/pod, B/node: the spans the process holds,
// which its resident memory follows) and HeapAlloc after GC (live-B/pod, live-B/node: the
// objects themselves). It compares the cache as controller-runtime
// makes it, with managed fields stripped, and with Tailor's options (package informers),
// each with the sidecar's index on the kind, and projects the figures to 50,000 pods on
// 5,000 nodes. Run it with -benchtime=1x: each round starts a cache.
func BenchmarkCacheMemory(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	cfg := startAPIServer(b)
	fillCluster(b, cfg)
	variants := []struct {
		name string
		opts func() cache.Options
	}{
		{name: "stored", opts: func() cache.Options { return cache.Options{} }},
		{name: "no-managed-fields", opts: func() cache.Options { return cache.Options{DefaultTransform: cache.TransformStripManagedFields()} }},
		{name: "tailor", opts: informers.CacheOptions},
	}
	kinds := []struct {
		name  string
		obj   func() client.Object
		field string
		index client.IndexerFunc
		n     int
	}{
		{name: "pod", obj: func() client.Object { return &corev1.Pod{} }, field: nodeclaim.PodNodeNameIndex, index: nodeclaim.PodNodeName, n: benchPods},
		{name: "node", obj: func() client.Object { return &corev1.Node{} }, field: nodeclaim.NodeProviderIDIndex, index: nodeclaim.NodeProviderID, n: benchNodes},
	}
	perObject := map[string]struct{ inuse, live float64 }{}
	for _, k := range kinds {
		for _, v := range variants {
			b.Run(k.name+"/"+v.name, func(b *testing.B) {
				var inuse, live float64
				for b.Loop() {
					all := cacheHeap(b, cfg, v.opts(), k.obj(), k.field, k.index, false)
					none := cacheHeap(b, cfg, v.opts(), k.obj(), k.field, k.index, true)
					inuse = float64(all.inuse-none.inuse) / float64(k.n)
					live = float64(all.live-none.live) / float64(k.n)
				}
				perObject[k.name+"/"+v.name] = struct{ inuse, live float64 }{inuse, live}
				b.ReportMetric(inuse, "B/"+k.name)
				b.ReportMetric(live, "live-B/"+k.name)
			})
		}
	}
	// Printed rather than logged: a benchmark with sub-benchmarks does not show its log.
	how := fmt.Sprintf("projected from %d pods and %d nodes", benchPods, benchNodes)
	if benchPods == targetPods {
		how = "measured"
	}
	fmt.Printf("%-18s %8s %8s %12s %12s   at %d pods and %d nodes (%s)\n", "cache", "B/pod", "B/node", "live-B/pod", "live-B/node", targetPods, targetNodes, how)
	for _, v := range variants {
		inuse := func(kind string) float64 { return perObject[kind+"/"+v.name].inuse }
		live := func(kind string) float64 { return perObject[kind+"/"+v.name].live }
		fmt.Printf("%-18s %8.0f %8.0f %12.0f %12.0f   %4.0f MiB in use, %4.0f MiB live\n", v.name, inuse("pod"), inuse("node"), live("pod"), live("node"),
			(inuse("pod")*targetPods+inuse("node")*targetNodes)/(1<<20), (live("pod")*targetPods+live("node")*targetNodes)/(1<<20))
	}
}

// startAPIServer starts envtest for the benchmark and stops it when the benchmark ends.
func startAPIServer(b *testing.B) *rest.Config {
	b.Helper()
	env, err := testenv.Environment()
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Errorf("stopping envtest: %v", err)
		}
	})
	return cfg
}

// fillCluster creates the benchmark's nodes (by the kubelet, then labelled by Tailor) and
// pods (created by the ReplicaSet controller, bound, their status written by the kubelet).
func fillCluster(b *testing.B, cfg *rest.Config) {
	b.Helper()
	ctx := context.Background()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 2000, 4000
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		b.Fatal(err)
	}
	allocatable := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("29850Mi"),
		corev1.ResourcePods: resource.MustParse("58"), corev1.ResourceEphemeralStorage: resource.MustParse("76224326324"),
	}
	nodeLabels := map[string]string{
		corev1.LabelArchStable: "amd64", corev1.LabelInstanceTypeStable: "m7i.2xlarge", corev1.LabelTopologyZone: "us-east-1a",
		"karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "general", "karpenter.k8s.aws/instance-family": "m7i",
		"karpenter.k8s.aws/instance-size": "2xlarge", "karpenter.k8s.aws/instance-cpu": "8", "karpenter.k8s.aws/instance-memory": "32768",
	}
	testenv.Parallel(b, benchNodes, func(i int) error {
		node := realisticNode(nodeName(i), i, nodeLabels, nil, allocatable)
		status := node.Status
		if err := kube.Create(ctx, node, client.FieldOwner("kubelet")); err != nil {
			return err
		}
		node.Status = status
		if err := kube.Status().Update(ctx, node, client.FieldOwner("kubelet")); err != nil {
			return err
		}
		// Registration: the NodeClaim owns the node and holds it until terminated.
		patch := client.MergeFrom(node.DeepCopy())
		node.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: fmt.Sprintf("general-%05d", i), UID: types.UID(fmt.Sprintf("0b8e4f3a-0000-4000-8000-%012d", i))}}
		node.Finalizers = []string{"karpenter.sh/termination"}
		return kube.Patch(ctx, node, patch, client.FieldOwner("tailor-provisioner"))
	})
	in := workloads.Load(b, "webmix", benchPods)
	testenv.Parallel(b, len(in.Pods), func(i int) error {
		p := in.Pods[i]
		realisticPod(p, i)
		p.Spec.NodeName = nodeName(i % benchNodes)
		p.Status = corev1.PodStatus{}
		if err := kube.Create(ctx, p, client.FieldOwner("kube-controller-manager")); err != nil {
			return err
		}
		p.Status = runningStatus(p, i)
		return kube.Status().Update(ctx, p, client.FieldOwner("kubelet"))
	})
}

func nodeName(i int) string { return fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250+1) }

// heap is a measure of the heap after GC.
type heap struct{ inuse, live int64 }

// cacheHeap is how much the heap grows with a cache that holds every object of the kind
// (none: no object, for the cache's own cost), with the index, once synced.
func cacheHeap(b *testing.B, cfg *rest.Config, opts cache.Options, obj client.Object, field string, index client.IndexerFunc, none bool) heap {
	b.Helper()
	opts.Scheme = apischeme.New()
	if none {
		by := opts.ByObject[obj]
		by.Label = labels.SelectorFromSet(labels.Set{"tailor.sh/benchmark": "none"})
		if opts.ByObject == nil {
			opts.ByObject = map[client.Object]cache.ByObject{}
		}
		opts.ByObject[obj] = by
	}
	before := heapAfterGC()
	c, err := cache.New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.IndexField(ctx, obj, field, index); err != nil {
		b.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	after := heapAfterGC()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return heap{inuse: after.inuse - before.inuse, live: after.live - before.live}
}

func heapAfterGC() heap {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return heap{inuse: int64(m.HeapInuse), live: int64(m.HeapAlloc)}
}
