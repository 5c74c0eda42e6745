package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// Sizes of bench-scale (issue 20).
const (
	// ScaleNodes is the node count bench-scale drives the stack to.
	ScaleNodes = 5000
	// ScalePodsPerNode is about how many of the mix's pods the planner puts on a node at
	// that size: 24,000 pods (webmix 19,200 and diverse 4,800) plan onto 4,018 nodes,
	// 25,500 onto 5,147. The generator's shapes are fixed and sparse: diverse's hostname
	// anti-affinity class takes a node per pod, and webmix's general NodePool is limited to
	// 20,000 CPUs, past which its pods spill onto small on-demand nodes, so 50,000 pods
	// (webmix 45,000 and diverse 5,000) would need 12,725 nodes.
	ScalePodsPerNode = 5.0
	// scaleDiverseEvery: one pod in five is diverse's.
	scaleDiverseEvery = 5
)

// ScaleKeep is bench-scale's scale-down: a third of every workload's pods stay.
var ScaleKeep = KeepRule{Kept: 1, Every: 3}

// ScaleWorkloads splits pods into bench-scale's mix: four in five webmix, one in five
// diverse, each scaled down to a third.
func ScaleWorkloads(pods int) (first Workload, with []Workload) {
	diverse := pods / scaleDiverseEvery
	return Workload{Shape: "webmix", Pods: pods - diverse, Keep: ScaleKeep},
		[]Workload{{Shape: "diverse", Pods: diverse, Keep: ScaleKeep}}
}

// ScaleOptions configure bench-scale: a scale-down of two workloads at once on a stack
// started with localstack.Options Scale and Audit, measured beyond what ScaleDown measures.
type ScaleOptions struct {
	ScaleDownOptions
	// Nodes is the node count the run is sized for, reported beside the nodes bought.
	Nodes int
	// BatchWindow is the sidecar's --batch-max-duration: a pod waits up to that long in a
	// batch by design, so the latency to its NodeClaim is reported beyond it.
	BatchWindow time.Duration
	// MetricsInterval is how often the sidecar's decision histogram is read (a second).
	MetricsInterval time.Duration
	// Report, when set, is the JSON file the report is written to.
	Report string
}

// ScaleReport is what bench-scale measured: one field per row of its table.
type ScaleReport struct {
	// Workloads names the mix: "webmix 19200 → 6400 pods (keep 1/3) and diverse ...".
	Workloads   string `json:"workloads"`
	Pods        int    `json:"pods"`
	PodsKept    int    `json:"podsKept"`
	Deployments int    `json:"deployments"`
	NodesTarget int    `json:"nodesTarget"`

	// PodsRunningSeconds is the time from applying the Deployments to every pod running.
	PodsRunningSeconds float64 `json:"podsRunningSeconds"`
	PodsRunning        int     `json:"podsRunning"`
	// Nodes and BurstCostDollarsPerHour are the live instances bought for the burst;
	// FreshPlan* the planner's (simulate's) plan of the same pods on an empty cluster.
	Nodes                   int     `json:"nodes"`
	BurstCostDollarsPerHour float64 `json:"burstCostDollarsPerHour"`
	FreshPlanDollarsPerHour float64 `json:"freshPlanDollarsPerHour"`
	FreshPlanNodes          int     `json:"freshPlanNodes"`
	BurstCostRatio          float64 `json:"burstCostRatio"`

	// PodsPlanned counts the pods a NodeClaim was planned for; the latencies are from a
	// pod's creation to the first NodeClaim planned for it (the sidecar's
	// tailor_provisioner_pod_first_nodeclaim_seconds, observed once per pod, quantiles
	// interpolated within its buckets), less the batch window (not below zero).
	PodsPlanned                        int               `json:"podsPlanned"`
	BatchWindowSeconds                 float64           `json:"batchWindowSeconds"`
	PendingToNodeClaimP50Seconds       float64           `json:"pendingToNodeClaimP50Seconds"`
	PendingToNodeClaimP99Seconds       float64           `json:"pendingToNodeClaimP99Seconds"`
	PendingToNodeClaimRawP50Seconds    float64           `json:"pendingToNodeClaimRawP50Seconds"`
	PendingToNodeClaimRawP99Seconds    float64           `json:"pendingToNodeClaimRawP99Seconds"`
	PodsBoundPerSecond                 float64           `json:"podsBoundPerSecond"`
	BindSeconds                        float64           `json:"bindSeconds"`
	ProvisionerPeakRSSBytes            int64             `json:"provisionerPeakRSSBytes"`
	ProvisionerCPUSeconds              float64           `json:"provisionerCPUSeconds"`
	SchedulerPeakRSSBytes              int64             `json:"schedulerPeakRSSBytes"`
	SchedulerCPUSeconds                float64           `json:"schedulerCPUSeconds"`
	APIServerPeakRSSBytes              int64             `json:"apiServerPeakRSSBytes"`
	APIServerCPUSeconds                float64           `json:"apiServerCPUSeconds"`
	EtcdPeakRSSBytes                   int64             `json:"etcdPeakRSSBytes"`
	EtcdCPUSeconds                     float64           `json:"etcdCPUSeconds"`
	KwokPeakRSSBytes                   int64             `json:"kwokPeakRSSBytes"`
	KwokCPUSeconds                     float64           `json:"kwokCPUSeconds"`
	ControllerManagerPeakRSSBytes      int64             `json:"controllerManagerPeakRSSBytes"`
	ControllerManagerCPUSeconds        float64           `json:"controllerManagerCPUSeconds"`
	NodesLaunched                      int               `json:"nodesLaunched"`
	PodsBound                          int               `json:"podsBound"`
	APIRequests                        int               `json:"apiRequests"`
	APIRequestsPerPodBound             float64           `json:"apiRequestsPerPodBound"`
	APIRequestsPerNodeLaunched         float64           `json:"apiRequestsPerNodeLaunched"`
	APIRequestsBy                      []APIRequestCount `json:"apiRequestsBy"`
	ConsolidationDecisions             int               `json:"consolidationDecisions"`
	FirstConsolidationDecisionSeconds  float64           `json:"firstConsolidationDecisionSeconds"`
	MedianConsolidationDecisionSeconds float64           `json:"medianConsolidationDecisionSeconds"`

	NodesAfter              int     `json:"nodesAfter"`
	CostAfterDollarsPerHour float64 `json:"costAfterDollarsPerHour"`
	FreshKeptDollarsPerHour float64 `json:"freshKeptDollarsPerHour"`
	CostAfterRatio          float64 `json:"costAfterRatio"`
	NodesDisrupted          int     `json:"nodesDisrupted"`
	Evictions               int     `json:"evictions"`
	EvictedTwice            int     `json:"evictedTwice"`
	PDBViolations           int     `json:"pdbViolations"`
	Converged               bool    `json:"converged"`
	ConvergeSeconds         float64 `json:"convergeSeconds"`
	PodsRunningAfter        int     `json:"podsRunningAfter"`
	WallSeconds             float64 `json:"wallSeconds"`
	// CPUPressurePercent is the share of the run's time some task on the machine waited
	// for a CPU (/proc/pressure/cpu): near 100, the machine was oversubscribed and every
	// time above stretched with it.
	CPUPressurePercent float64 `json:"cpuPressurePercent"`
}

// APIRequestCount is the requests one of Tailor's binaries made with one verb on one
// resource while the burst ran.
type APIRequestCount struct {
	Component string `json:"component"`
	Verb      string `json:"verb"`
	// Resource is resource/subresource, or the path of a request for no resource.
	Resource        string  `json:"resource"`
	Count           int     `json:"count"`
	PerPodBound     float64 `json:"perPodBound"`
	PerNodeLaunched float64 `json:"perNodeLaunched"`
}

// Scale runs bench-scale on a stack started with Scale and Audit: the scale-down of
// opts.ScaleDownOptions, the burst's latencies and binds read once every pod runs, the
// sidecar's decision times read throughout, then the processes' usage and Tailor's requests.
// It prints the report's table to out and writes its JSON to opts.Report.
func Scale(ctx context.Context, stack *localstack.Stack, opts ScaleOptions, out io.Writer) (*ScaleReport, *ScaleDownResult, error) {
	if stack.AuditLog == "" {
		return nil, nil, errors.New("bench-scale: the stack must run with Audit")
	}
	if opts.BatchWindow == 0 {
		opts.BatchWindow = newNodeProtection
	}
	if opts.MetricsInterval == 0 {
		opts.MetricsInterval = time.Second
	}
	kube, err := client.New(stack.Config, client.Options{Scheme: apischeme.New()})
	if err != nil {
		return nil, nil, err
	}
	// Without pressure stall information (kernels before 4.20) the share is left at zero.
	pressureFrom, _ := cpuPressure()
	start := time.Now()
	var burst burstReading
	opts.Provisioned = func(ctx context.Context) error {
		b, err := readBurst(ctx, kube, stack.ProvisionerMetricsURLs)
		if err != nil {
			return err
		}
		burst = b
		// Consolidation may take long at scale: the burst's figures are printed now too.
		var early ScaleReport
		burst.report(&early, opts.BatchWindow)
		fmt.Fprintf(out, "burst: %d NodeClaims; pending → NodeClaim p50 %.0fs, p99 %.0fs beyond the batch window; %.1f pods bound a second over %.0fs\n",
			early.NodesLaunched, early.PendingToNodeClaimP50Seconds, early.PendingToNodeClaimP99Seconds, early.PodsBoundPerSecond, early.BindSeconds)
		return nil
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	decisions := &decisionPoll{}
	var polled sync.WaitGroup
	polled.Add(1)
	go func() {
		defer polled.Done()
		decisions.run(pollCtx, stack.ProvisionerMetricsURL, opts.MetricsInterval)
	}()
	r, err := ScaleDown(ctx, stack, opts.ScaleDownOptions, out)
	stopPoll()
	polled.Wait()
	if err != nil {
		return nil, nil, err
	}
	rep := &ScaleReport{
		Workloads: describeWorkloads(r.Workloads), Pods: r.From, PodsKept: r.To, Deployments: r.Deployments, NodesTarget: opts.Nodes,
		PodsRunningSeconds: r.Provisioned.Seconds(), PodsRunning: r.RunningBefore,
		Nodes: r.NodesBefore, BurstCostDollarsPerHour: r.CostBefore, FreshPlanDollarsPerHour: r.FreshAll, FreshPlanNodes: r.FreshAllNodes,
		BurstCostRatio:     ratio(r.CostBefore, r.FreshAll),
		BatchWindowSeconds: opts.BatchWindow.Seconds(),
		NodesAfter:         r.NodesAfter, CostAfterDollarsPerHour: r.CostAfter, FreshKeptDollarsPerHour: r.FreshKept, CostAfterRatio: r.Ratio(),
		NodesDisrupted: r.NodesDisrupted, Evictions: r.Evictions, EvictedTwice: r.EvictedTwice, PDBViolations: r.PDBViolations,
		Converged: r.Converged, ConvergeSeconds: r.Converge.Seconds(), PodsRunningAfter: r.Running,
	}
	burst.report(rep, opts.BatchWindow)
	decisions.report(rep, r.ConsolidationOn)
	for _, u := range []struct {
		component string
		rss       *int64
		cpu       *float64
	}{
		{localstack.Provisioner, &rep.ProvisionerPeakRSSBytes, &rep.ProvisionerCPUSeconds},
		{localstack.Scheduler, &rep.SchedulerPeakRSSBytes, &rep.SchedulerCPUSeconds},
		{localstack.APIServer, &rep.APIServerPeakRSSBytes, &rep.APIServerCPUSeconds},
		{localstack.Etcd, &rep.EtcdPeakRSSBytes, &rep.EtcdCPUSeconds},
		{localstack.Kwok, &rep.KwokPeakRSSBytes, &rep.KwokCPUSeconds},
		{localstack.ControllerManager, &rep.ControllerManagerPeakRSSBytes, &rep.ControllerManagerCPUSeconds},
	} {
		usage, err := stack.Usage(u.component)
		if err != nil {
			return nil, r, err
		}
		*u.rss, *u.cpu = usage.PeakRSSBytes, usage.CPUSeconds
	}
	burstEnd := r.Applied.Add(r.Provisioned)
	counts, err := countRequests(stack.AuditLog, r.Applied, burstEnd)
	if err != nil {
		return nil, r, err
	}
	rep.setRequests(counts)
	rep.WallSeconds = r.Wall.Seconds()
	if pressureTo, err := cpuPressure(); err == nil {
		rep.CPUPressurePercent = 100 * (pressureTo - pressureFrom).Seconds() / time.Since(start).Seconds()
	}
	PrintScale(out, rep)
	if opts.Report != "" {
		if err := writeReport(opts.Report, rep); err != nil {
			return nil, r, err
		}
		fmt.Fprintf(out, "report written to %s\n", opts.Report)
	}
	return rep, r, nil
}

// burstReading is what the burst's pods and the sidecars said once every pod ran.
type burstReading struct {
	// firstNodeClaim is the sidecars' histogram of the time from a pod's creation to the
	// first NodeClaim planned for it, every replica's series together.
	firstNodeClaim localstack.Metrics
	// binds are the times the pods were bound (their PodScheduled condition).
	binds []time.Time
	// nodeClaims counts the NodeClaims created.
	nodeClaims int
}

// firstNodeClaimMetric is the sidecar's histogram of waits for a first NodeClaim.
const firstNodeClaimMetric = "tailor_provisioner_pod_first_nodeclaim_seconds"

// readBurst reads the NodeClaims, when the workload's pods were bound, and each sidecar's
// histogram of waits for a first NodeClaim. A pod's first NodeClaim may be gone by now,
// taken back by a later batch, and the Planned events that dated it are dropped under a
// burst (client-go's broadcaster drops events past 1,000 queued): the sidecar counts each
// pod's wait when it writes that NodeClaim.
func readBurst(ctx context.Context, kube client.Client, metricsURLs []string) (burstReading, error) {
	b := burstReading{firstNodeClaim: localstack.Metrics{}}
	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil {
		return b, fmt.Errorf("listing NodeClaims: %w", err)
	}
	b.nodeClaims = len(claims.Items)
	for _, url := range metricsURLs {
		m, err := localstack.ScrapeMetrics(ctx, url)
		if err != nil {
			return b, err
		}
		family, ok := m[firstNodeClaimMetric]
		if !ok {
			continue
		}
		if merged, ok := b.firstNodeClaim[firstNodeClaimMetric]; ok {
			merged.Metric = append(merged.Metric, family.Metric...)
		} else {
			b.firstNodeClaim[firstNodeClaimMetric] = family
		}
	}
	// Tens of thousands of pods are listed a page at a time.
	opts := []client.ListOption{client.InNamespace(metav1.NamespaceDefault), client.HasLabels{DeploymentLabel}, client.Limit(5000)}
	for {
		pods := &corev1.PodList{}
		if err := kube.List(ctx, pods, opts...); err != nil {
			return b, fmt.Errorf("listing the workload's pods: %w", err)
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					b.binds = append(b.binds, c.LastTransitionTime.Time)
				}
			}
		}
		if pods.Continue == "" {
			return b, nil
		}
		opts = append(opts[:3], client.Limit(5000), client.Continue(pods.Continue))
	}
}

func (b burstReading) report(rep *ScaleReport, window time.Duration) {
	planned, _ := b.firstNodeClaim.Histogram(firstNodeClaimMetric)
	rep.PodsPlanned, rep.NodesLaunched, rep.PodsBound = int(planned), b.nodeClaims, len(b.binds)
	beyond := func(seconds float64) float64 { return max(0, seconds-window.Seconds()) }
	p50, ok50 := b.firstNodeClaim.Quantile(firstNodeClaimMetric, 0.5)
	p99, ok99 := b.firstNodeClaim.Quantile(firstNodeClaimMetric, 0.99)
	if ok50 && ok99 {
		rep.PendingToNodeClaimRawP50Seconds, rep.PendingToNodeClaimRawP99Seconds = p50, p99
		rep.PendingToNodeClaimP50Seconds, rep.PendingToNodeClaimP99Seconds = beyond(p50), beyond(p99)
	}
	if len(b.binds) > 1 {
		slices.SortFunc(b.binds, func(a, b time.Time) int { return a.Compare(b) })
		// Condition times are whole seconds: the span counts the last second whole.
		span := b.binds[len(b.binds)-1].Sub(b.binds[0]) + time.Second
		rep.BindSeconds = span.Seconds()
		rep.PodsBoundPerSecond = float64(len(b.binds)) / span.Seconds()
	}
}

// decisionPoll reads the sidecar's decision histogram (tailor_disruption_decide_duration_seconds)
// at an interval: between two reads that saw one more observation, its sum grew by exactly
// that observation, so decision times are read exactly from the unchanged product.
type decisionPoll struct {
	mu      sync.Mutex
	samples []decisionSample
}

type decisionSample struct {
	at    time.Time
	count uint64
	sum   float64
}

func (d *decisionPoll) run(ctx context.Context, url string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if m, err := localstack.ScrapeMetrics(ctx, url); err == nil {
			count, sum := m.Histogram("tailor_disruption_decide_duration_seconds")
			d.mu.Lock()
			d.samples = append(d.samples, decisionSample{at: time.Now(), count: count, sum: sum})
			d.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// decisions are the decision times observed after since, in order; where a read saw more
// than one new observation, each is taken as their mean.
func (d *decisionPoll) decisions(since time.Time) []float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []float64
	var last *decisionSample
	for i := range d.samples {
		s := &d.samples[i]
		if s.at.Before(since) {
			last = s
			continue
		}
		if last != nil && s.count > last.count {
			n := s.count - last.count
			for range n {
				out = append(out, (s.sum-last.sum)/float64(n))
			}
		}
		last = s
	}
	return out
}

func (d *decisionPoll) report(rep *ScaleReport, since time.Time) {
	ds := d.decisions(since)
	rep.ConsolidationDecisions = len(ds)
	if len(ds) == 0 {
		return
	}
	rep.FirstConsolidationDecisionSeconds = ds[0]
	slices.Sort(ds)
	rep.MedianConsolidationDecisionSeconds = ds[len(ds)/2]
}

// auditEvent is what bench-scale reads of an audit event.
type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	Verb      string `json:"verb"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestURI string           `json:"requestURI"`
	Received   metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// requestKey is a component, a verb and a resource.
type requestKey struct{ component, verb, resource string }

// countRequests counts the requests of Tailor's users in the audit log received from start
// to end, by component, verb and resource.
func countRequests(path string, start, end time.Time) (map[requestKey]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	counts := map[requestKey]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
		component, ok := localstack.TailorUsers[e.User.Username]
		if !ok || e.Received.Before(&metav1.MicroTime{Time: start}) || e.Received.After(end) {
			continue
		}
		k := requestKey{component: component, verb: e.Verb, resource: e.RequestURI}
		if e.ObjectRef != nil {
			k.resource = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				k.resource += "/" + e.ObjectRef.Subresource
			}
		}
		counts[k]++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	return counts, nil
}

func (rep *ScaleReport) setRequests(counts map[requestKey]int) {
	per := func(n, of int) float64 {
		if of == 0 {
			return 0
		}
		return float64(n) / float64(of)
	}
	rep.APIRequestsBy = []APIRequestCount{}
	for k, n := range counts {
		rep.APIRequests += n
		rep.APIRequestsBy = append(rep.APIRequestsBy, APIRequestCount{
			Component: k.component, Verb: k.verb, Resource: k.resource, Count: n,
			PerPodBound: per(n, rep.PodsBound), PerNodeLaunched: per(n, rep.NodesLaunched),
		})
	}
	sort.Slice(rep.APIRequestsBy, func(i, j int) bool {
		a, b := rep.APIRequestsBy[i], rep.APIRequestsBy[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return fmt.Sprint(a.Component, a.Verb, a.Resource) < fmt.Sprint(b.Component, b.Verb, b.Resource)
	})
	rep.APIRequestsPerPodBound, rep.APIRequestsPerNodeLaunched = per(rep.APIRequests, rep.PodsBound), per(rep.APIRequests, rep.NodesLaunched)
}

func writeReport(path string, rep *ScaleReport) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

// PrintScale prints bench-scale's table, in one write.
func PrintScale(w io.Writer, rep *ScaleReport) {
	out := &bytes.Buffer{}
	defer func() { _, _ = w.Write(out.Bytes()) }()
	fmt.Fprintf(out, "\nbench-scale: %s, %d Deployments each with a PodDisruptionBudget of maxUnavailable 1\n", rep.Workloads, rep.Deployments)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t"+format+"\n", append([]any{k}, args...)...)
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	row("pods running", "%d of %d pods %.0fs after apply", rep.PodsRunning, rep.Pods, rep.PodsRunningSeconds)
	row("burst cost", "$%.2f/hour on %d nodes (target %d); simulate's plan $%.2f/hour on %d nodes: ×%.3f",
		rep.BurstCostDollarsPerHour, rep.Nodes, rep.NodesTarget, rep.FreshPlanDollarsPerHour, rep.FreshPlanNodes, rep.BurstCostRatio)
	row("pending → NodeClaim", "p50 %.0fs, p99 %.0fs beyond the %.0fs batch window (%.0fs, %.0fs in all; %d pods planned onto NodeClaims)",
		rep.PendingToNodeClaimP50Seconds, rep.PendingToNodeClaimP99Seconds, rep.BatchWindowSeconds,
		rep.PendingToNodeClaimRawP50Seconds, rep.PendingToNodeClaimRawP99Seconds, rep.PodsPlanned)
	row("pods bound", "%.1f/s by tailor-scheduler (%d pods bound over %.0fs)", rep.PodsBoundPerSecond, rep.PodsBound, rep.BindSeconds)
	for _, p := range []struct {
		name string
		rss  int64
		cpu  float64
	}{
		{"tailor-provisioner", rep.ProvisionerPeakRSSBytes, rep.ProvisionerCPUSeconds},
		{"tailor-scheduler", rep.SchedulerPeakRSSBytes, rep.SchedulerCPUSeconds},
		{"kube-apiserver", rep.APIServerPeakRSSBytes, rep.APIServerCPUSeconds},
		{"etcd", rep.EtcdPeakRSSBytes, rep.EtcdCPUSeconds},
		{"kwok", rep.KwokPeakRSSBytes, rep.KwokCPUSeconds},
		{"kube-controller-manager", rep.ControllerManagerPeakRSSBytes, rep.ControllerManagerCPUSeconds},
	} {
		row(p.name, "peak RSS %.0f MiB, %.0f CPU seconds", mib(p.rss), p.cpu)
	}
	row("API requests", "%d by Tailor during the burst: %.2f per pod bound, %.2f per node launched (%d NodeClaims)",
		rep.APIRequests, rep.APIRequestsPerPodBound, rep.APIRequestsPerNodeLaunched, rep.NodesLaunched)
	for _, c := range rep.APIRequestsBy {
		row("  "+c.Component, "%s %s\t%d\t%.3f/pod\t%.3f/node", c.Verb, c.Resource, c.Count, c.PerPodBound, c.PerNodeLaunched)
	}
	row("consolidation decisions", "first %.2fs, median %.2fs (%d decisions)",
		rep.FirstConsolidationDecisionSeconds, rep.MedianConsolidationDecisionSeconds, rep.ConsolidationDecisions)
	row("cost after", "$%.2f/hour on %d nodes; fresh plan of the %d pods kept $%.2f/hour: ×%.3f",
		rep.CostAfterDollarsPerHour, rep.NodesAfter, rep.PodsKept, rep.FreshKeptDollarsPerHour, rep.CostAfterRatio)
	row("nodes disrupted", "%d", rep.NodesDisrupted)
	row("evictions", "%d (%d pods evicted twice)", rep.Evictions, rep.EvictedTwice)
	row("PDB violations", "%d", rep.PDBViolations)
	if rep.Converged {
		row("converged", "in %.0fs after the scale-down, %d kept pods running", rep.ConvergeSeconds, rep.PodsRunningAfter)
	} else {
		row("converged", "NO: last NodeClaim change %.0fs after the scale-down, %d kept pods running", rep.ConvergeSeconds, rep.PodsRunningAfter)
	}
	row("wall time", "%.0fs", rep.WallSeconds)
	row("CPU pressure", "%.0f%% of the time some task waited for a CPU (the machine is shared)", rep.CPUPressurePercent)
	tw.Flush()
}

// cpuPressure reads how long, in all, some task of the machine waited for a CPU.
func cpuPressure() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, err
	}
	var avg10, avg60, avg300 float64
	var total int64
	if _, err := fmt.Sscanf(string(raw), "some avg10=%f avg60=%f avg300=%f total=%d", &avg10, &avg60, &avg300, &total); err != nil {
		return 0, fmt.Errorf("reading /proc/pressure/cpu: %w", err)
	}
	return time.Duration(total) * time.Microsecond, nil
}
