package provisioning

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/test/benchout"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/testenv"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// burstRow is one row of make bench-burst, as it writes _output/bench/burst.json.
type burstRow struct {
	Pods int `json:"pods"`
	// KubeAPIQPS and KubeAPIBurst are the provisioner's client limits
	// (--kube-api-qps, --kube-api-burst).
	KubeAPIQPS   float64 `json:"kubeAPIQPS"`
	KubeAPIBurst int     `json:"kubeAPIBurst"`
	NodeClaims   int     `json:"nodeClaims"`
	// Unplanned are the pods no NodeClaim was written for.
	Unplanned int `json:"unplanned"`
	// BatchSeconds is the whole batch: reading the cluster, planning, writing.
	BatchSeconds float64 `json:"batchSeconds"`
	// PlanSeconds is the planner's part of it.
	PlanSeconds float64 `json:"planSeconds"`
	// NodeClaimFirstSeconds, …P50…, …P99… and …Max… are, over the pods, the time from the
	// batch closing to the pod's NodeClaim written.
	NodeClaimFirstSeconds float64 `json:"nodeClaimFirstSeconds"`
	NodeClaimP50Seconds   float64 `json:"nodeClaimP50Seconds"`
	NodeClaimP99Seconds   float64 `json:"nodeClaimP99Seconds"`
	NodeClaimMaxSeconds   float64 `json:"nodeClaimMaxSeconds"`
	// CPUSeconds is the CPU time each process took over the batch: kube-apiserver, etcd, and
	// the benchmark (the provisioner and its client).
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
	// NodeClaimsPerSecond is the rate the NodeClaims were written at, from the first to the
	// last.
	NodeClaimsPerSecond float64 `json:"nodeClaimsPerSecond"`
}

// poolInstanceTypes serves each NodePool the instance types the workload gives it.
type poolInstanceTypes map[string][]*cloudprovider.InstanceType

func (p poolInstanceTypes) InstanceTypes(_ context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return p[np.Name], nil
}

// BenchmarkBurstToNodeClaims measures the provisioner's share of pending → NodeClaim under a
// burst: PODS webmix pods (10,000 by default) are created unbound on a real API server and
// handed over at once, as the scheduler hands over pods that fit no node, and one batch
// plans them and writes their NodeClaims through a client limited as the sidecar's is. Per
// pod it times the batch closing to its NodeClaim written, the figure the batch window is
// added to on a live cluster. QPS lists the client rates to run (200, the sidecar's
// default, and 1000 by default), each with a burst of one and a half times the rate;
// BENCH_JSON names the file the rows are written to.
func BenchmarkBurstToNodeClaims(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	pods, err := strconv.Atoi(cmp.Or(os.Getenv("PODS"), "10000"))
	if err != nil {
		b.Fatalf("PODS=%q: %v", os.Getenv("PODS"), err)
	}
	var rates []float64
	for _, f := range strings.Split(cmp.Or(os.Getenv("QPS"), "200,1000"), ",") {
		qps, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || qps <= 0 {
			b.Fatalf("QPS=%q: %q is not a positive number", os.Getenv("QPS"), f)
		}
		rates = append(rates, qps)
	}
	ctx := context.Background()
	admin := fastClient(b)
	in := workloads.Load(b, "webmix", pods)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "burst-"}}
	if err := admin.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	source := poolInstanceTypes{}
	for _, np := range in.NodePools {
		pool := np.NodePool.DeepCopy()
		pool.ResourceVersion, pool.UID = "", ""
		if err := admin.Create(ctx, pool); err != nil {
			b.Fatal(err)
		}
		source[pool.Name] = np.InstanceTypes
	}
	b.Cleanup(func() {
		deleteNodeClaims(b, admin)
		_ = admin.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name), client.GracePeriodSeconds(0))
		_ = admin.DeleteAllOf(ctx, &karpv1.NodePool{})
		_ = admin.Delete(ctx, ns)
	})
	testenv.Parallel(b, len(in.Pods), func(i int) error {
		p := in.Pods[i]
		p.Namespace, p.Spec.NodeName, p.ResourceVersion, p.UID = ns.Name, "", "", ""
		return admin.Create(ctx, p)
	})
	var rows []burstRow
	for _, qps := range rates {
		b.Run(fmt.Sprintf("pods=%d/qps=%g", pods, qps), func(b *testing.B) {
			row := burst(b, admin, in.Pods, source, qps)
			rows = append(rows, row)
			b.ReportMetric(row.NodeClaimP99Seconds, "p99-s")
			b.ReportMetric(row.BatchSeconds, "batch-s")
		})
	}
	fmt.Printf("\n%6s %6s %6s %11s %9s %10s %9s %10s %9s %9s %9s %13s %22s\n", "pods", "qps", "burst", "nodeclaims", "unplanned", "batch (s)", "plan (s)", "first (s)", "p50 (s)", "p99 (s)", "max (s)", "nodeclaims/s", "cpu s: api, etcd, own")
	for _, r := range rows {
		fmt.Printf("%6d %6g %6d %11d %9d %10.2f %9.2f %10.2f %9.2f %9.2f %9.2f %13.0f %8.2f %6.2f %6.2f\n", r.Pods, r.KubeAPIQPS, r.KubeAPIBurst, r.NodeClaims, r.Unplanned, r.BatchSeconds, r.PlanSeconds, r.NodeClaimFirstSeconds, r.NodeClaimP50Seconds, r.NodeClaimP99Seconds, r.NodeClaimMaxSeconds, r.NodeClaimsPerSecond,
			r.CPUSeconds["kube-apiserver"], r.CPUSeconds["etcd"], r.CPUSeconds["benchmark"])
	}
	benchout.Write(b, rows)
}

// burst hands the pods over at once to a fresh provisioner whose client runs at qps, lets
// one batch plan them, and times each pod's NodeClaim. It deletes the NodeClaims after,
// through admin.
func burst(b *testing.B, admin client.Client, pods []*corev1.Pod, source poolInstanceTypes, qps float64) burstRow {
	ctx := context.Background()
	row := burstRow{Pods: len(pods), KubeAPIQPS: qps, KubeAPIBurst: int(qps * 1.5)}
	limited := rest.CopyConfig(cfg)
	limited.QPS, limited.Burst = float32(row.KubeAPIQPS), row.KubeAPIBurst
	cached := cachedClient(b, limited)
	waitForUnbound(b, cached, len(pods))

	var mu sync.Mutex
	written := map[types.UID]time.Time{}
	kube := createHook{Client: cached, created: func(obj client.Object) error {
		nc, ok := obj.(*karpv1.NodeClaim)
		if !ok {
			return nil
		}
		at := time.Now()
		planned, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		row.NodeClaims++
		for _, p := range planned {
			written[p.UID] = at
		}
		return nil
	}}
	prov := New(kube, source, nomination.NewTracker(clock.RealClock{}), noTrigger{}, &record.FakeRecorder{}, Options{Clock: clock.RealClock{}, ReplanWindow: DefaultReplanWindow})
	subs := make([]Submission, len(pods))
	for i, p := range pods {
		subs[i] = Submission{Pod: p, Profile: "tailor-scheduler"}
	}
	planned := histogram(b, metrics.PlanSeconds).GetSampleSum()
	procs := processes(b)
	before := cpuSeconds(b, procs)
	closed := time.Now()
	prov.Submit(subs)
	if err := prov.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	row.BatchSeconds = time.Since(closed).Seconds()
	row.PlanSeconds = histogram(b, metrics.PlanSeconds).GetSampleSum() - planned
	row.CPUSeconds = cpuSeconds(b, procs)
	for name, was := range before {
		row.CPUSeconds[name] -= was
	}
	var waits []float64
	for _, p := range pods {
		at, ok := written[p.UID]
		if !ok {
			row.Unplanned++
			continue
		}
		waits = append(waits, at.Sub(closed).Seconds())
	}
	if len(waits) == 0 {
		b.Fatal("no pod got a NodeClaim")
	}
	slices.Sort(waits)
	row.NodeClaimFirstSeconds = waits[0]
	row.NodeClaimP50Seconds = waits[len(waits)/2]
	row.NodeClaimP99Seconds = waits[min(len(waits)-1, len(waits)*99/100)]
	row.NodeClaimMaxSeconds = waits[len(waits)-1]
	if span := row.NodeClaimMaxSeconds - row.NodeClaimFirstSeconds; span > 0 {
		row.NodeClaimsPerSecond = float64(row.NodeClaims-1) / span
	}
	deleteNodeClaims(b, admin)
	return row
}

// processes finds the API server and etcd the test environment started (children of this
// process) and this process, by name.
func processes(b *testing.B) map[string]int {
	b.Helper()
	out := map[string]int{"benchmark": os.Getpid()}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		open, close := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if open < 0 || close < open {
			continue
		}
		name := string(stat[open+1 : close])
		fields := strings.Fields(string(stat[close+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if name == "kube-apiserver" || name == "etcd" {
			out[name] = pid
		}
	}
	if len(out) != 3 {
		b.Fatalf("found %v, want kube-apiserver and etcd among this process's children", out)
	}
	return out
}

// cpuSeconds reads the CPU time each process has used.
func cpuSeconds(b *testing.B, procs map[string]int) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	for name, pid := range procs {
		u, err := localstack.ProcessUsage(pid)
		if err != nil {
			b.Fatal(err)
		}
		out[name] = u.CPUSeconds
	}
	return out
}

// fastClient is a client for the benchmark's own setup, fast enough not to be the limit.
func fastClient(b *testing.B) client.Client {
	b.Helper()
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 5000, 10000
	kube, err := client.New(fast, client.Options{Scheme: apischeme.New()})
	if err != nil {
		b.Fatal(err)
	}
	return kube
}

// waitForUnbound waits for the cache to hold n unbound pods.
func waitForUnbound(b *testing.B, kube client.Client, n int) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		list := &corev1.PodList{}
		if err := kube.List(context.Background(), list, client.MatchingFields{nodeclaim.PodNodeNameIndex: ""}, client.UnsafeDisableDeepCopy); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the cache holds %d unbound pods after a minute, want %d", len(list.Items), n)
		}
	}
}

// deleteNodeClaims deletes every NodeClaim, finalizers and all: no controller here
// terminates them.
func deleteNodeClaims(b *testing.B, kube client.Client) {
	b.Helper()
	ctx := context.Background()
	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil {
		b.Fatal(err)
	}
	testenv.Parallel(b, len(claims.Items), func(i int) error {
		nc := &claims.Items[i]
		nc.Finalizers = nil
		if err := kube.Update(ctx, nc); err != nil {
			return err
		}
		return client.IgnoreNotFound(kube.Delete(ctx, nc))
	})
}

// createHook calls created with each object its client has created.
type createHook struct {
	client.Client
	created func(client.Object) error
}

func (h createHook) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := h.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	return h.created(obj)
}
