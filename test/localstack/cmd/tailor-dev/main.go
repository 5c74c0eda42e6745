// Command tailor-dev runs Tailor's local stack:
//
//	tailor-dev up      start everything and leave it running; prints what to export
//	tailor-dev env     print the exports of the running stack
//	tailor-dev down    stop the running stack and remove its state
//	tailor-dev demo    start a fresh stack, run the demo scenario, print it, stop the stack
//	tailor-dev scaledown
//	                   for each scale-down (by default the two issue 5 measures), start a
//	                   fresh stack, run it, print its report, stop the stack
//	tailor-dev scale   start a fresh stack tuned for scale, run bench-scale (a burst of
//	                   webmix and diverse pods to thousands of nodes, scaled down to a
//	                   third), print its table, write its JSON, stop the stack
//	tailor-dev disruption
//	                   start a fresh stack, run bench-disruption (replace-before-evict:
//	                   single-replica Deployments behind Services, half opted in, every
//	                   node drifted), print its table, write its JSON, stop the stack
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/scenario"
)

func main() {
	fs := flag.NewFlagSet("tailor-dev", flag.ExitOnError)
	root := fs.String("root", ".", "Repository root (binaries in _output/bin, manifests in manifests/).")
	dir := fs.String("dir", ".local", "State directory of the stack started by up.")
	bootDelay := fs.Duration("boot-delay", 2*time.Second, "How long a launched instance takes to register its node.")
	serverVersion := fs.String("kube-server-version", os.Getenv("KUBE_SERVER_VERSION"), "up, demo: the Kubernetes release (1.37.2) of the control plane, from _output/bin/kubernetes-<version> (hack/build-server.sh); empty (env KUBE_SERVER_VERSION) runs the release go.mod pins.")
	var sd scaleDownFlags
	fs.StringVar(&sd.shape, "shape", "", "scaledown: workload shape (webmix, diverse, ...); empty runs the scale-downs of issue 5 (webmix 2000 keep 1/4, diverse 1000 keep 7/10).")
	fs.StringVar(&sd.keep, "keep", "", "scaledown: keep rule K/N, pod i of the workload is kept when i%N < K; empty takes issue 5's for the shape.")
	fs.DurationVar(&sd.consolidateAfter, "consolidate-after", scenario.DefaultConsolidateAfter, "scaledown, disruption: consolidateAfter of the workload's NodePools.")
	fs.DurationVar(&sd.disruptionInterval, "disruption-interval", scenario.DefaultDisruptionInterval, "scaledown, disruption: the sidecar's --disruption-interval.")
	fs.BoolVar(&sd.keepLogs, "keep-logs", false, "scaledown, disruption: keep the stack's logs also of a run that converged.")
	fs.StringVar(&sd.snapshotDir, "snapshot-dir", "", "scaledown: write the start of consolidation (nodes and the workload's pods on them) to DIR/SHAPE-PODS-start.json, to replay in memory.")
	fs.IntVar(&sd.provisionerVerbosity, "provisioner-v", 1, "scaledown, disruption: the sidecar's log verbosity (-v); 2 also logs the room each decision reserves per node.")
	fs.StringVar(&sd.featureGates, "feature-gates", "", "scaledown, scale: the sidecar's --feature-gates (SpotToSpotConsolidation=true lets consolidation replace spot nodes with cheaper spot); empty keeps Karpenter's defaults.")
	fs.StringVar(&sd.report, "scaledown-report", "_output/bench/scaledown.json", "scaledown: the JSON report (one entry per scale-down), relative to --root.")
	fs.BoolVar(&sd.deletionCosts, "pod-deletion-costs", true, "scaledown, scale: let the sidecar steer the scale-down with pod deletion costs (false runs it with --pod-deletion-cost-schedulers=, as the ReplicaSet controller deletes alone).")
	fs.BoolVar(&sd.duringScaleDown, "consolidate-during-scale-down", false, "scaledown: turn consolidation on when the Deployments are scaled, while they still delete pods, instead of once they are done.")
	var sc scaleFlags
	fs.IntVar(&sc.nodes, "nodes", 0, fmt.Sprintf("scale: the node count to reach (%d); the pods follow at %.1f a node unless --pods is given.", scenario.ScaleNodes, scenario.ScalePodsPerNode))
	fs.IntVar(&sc.pods, "pods", 0, "scale: pods in all, four in five webmix, one in five diverse (scaledown: pods before the scale-down; 0 takes issue 5's for the shape).")
	fs.StringVar(&sc.report, "report", "_output/bench/scale.json", "scale: the JSON report, relative to --root.")
	fs.DurationVar(&sc.convergeTimeout, "converge-timeout", 2*time.Hour, "scale: how long consolidation may take to converge.")
	var dr disruptionFlags
	fs.IntVar(&dr.deployments, "deployments", scenario.DefaultDisruptionDeployments, "disruption: single-replica Deployments behind a Service and a PodDisruptionBudget of minAvailable 1; the first half opt in to replace-before-evict.")
	fs.DurationVar(&dr.runTimeout, "run-timeout", 5*time.Minute, "disruption: how long the set-up may take to run every pod with every Service ready.")
	fs.DurationVar(&dr.timeout, "timeout", 20*time.Minute, "disruption: bounds the whole run; the opted-in pool not converged by then is reported as timed out.")
	fs.StringVar(&dr.report, "disruption-report", "_output/bench/disruption.json", "disruption: the JSON report, relative to --root.")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tailor-dev up|env|down|demo|scaledown|scale|disruption [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	_ = fs.Parse(os.Args[2:])
	sd.pods = sc.pods
	// The scale-down watches through controller-runtime's cache, which logs through this.
	ctrllog.SetLogger(klog.Background())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	absRoot, err := filepath.Abs(*root)
	if err == nil {
		err = run(ctx, cmd, stackOptions{root: absRoot, bootDelay: *bootDelay, serverVersion: *serverVersion}, *dir, sd, sc, dr)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailor-dev "+cmd+": "+err.Error())
		os.Exit(1)
	}
}

// stackOptions are the flags every command's stack takes.
type stackOptions struct {
	root          string
	bootDelay     time.Duration
	serverVersion string
}

// options are the stack's options in dir, as the flags say.
func (o stackOptions) options(dir string) localstack.Options {
	return localstack.Options{Root: o.root, Dir: dir, BootDelay: o.bootDelay, ServerVersion: o.serverVersion, Progress: os.Stdout}
}

func run(ctx context.Context, cmd string, so stackOptions, dir string, sd scaleDownFlags, sc scaleFlags, dr disruptionFlags) error {
	root, bootDelay := so.root, so.bootDelay
	switch cmd {
	case "up":
		absDir, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(absDir, "state.json")); err == nil {
			return fmt.Errorf("a stack is already running in %s: run make down first", absDir)
		}
		fmt.Println("starting the local stack")
		opts := so.options(absDir)
		opts.Detach = true
		stack, err := localstack.Up(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Printf("\nthe local stack is running (logs in %s/logs). To use it:\n\n", absDir)
		for _, e := range stack.Exports() {
			fmt.Println("export " + e)
		}
		fmt.Println("\nthen for example: kubectl apply -f manifests/examples/general.yaml -f manifests/examples/demo.yaml")
		return nil
	case "env":
		exports, err := localstack.ReadExports(dir)
		if err != nil {
			return err
		}
		for _, e := range exports {
			fmt.Println("export " + e)
		}
		return nil
	case "down":
		if err := localstack.DownDetached(dir); err != nil {
			return err
		}
		return os.RemoveAll(dir)
	case "demo":
		return demo(ctx, so)
	case "scaledown":
		runs, err := sd.scaleDowns(root)
		if err != nil {
			return err
		}
		return scaleDown(ctx, root, bootDelay, sd, runs)
	case "scale":
		return scale(ctx, root, bootDelay, sd, sc)
	case "disruption":
		return disruption(ctx, root, bootDelay, sd, dr)
	}
	return fmt.Errorf("unknown command %q: use up, env, down, demo, scaledown, scale or disruption", cmd)
}

func demo(ctx context.Context, so stackOptions) (err error) {
	root := so.root
	dir, err := os.MkdirTemp("", "tailor-demo-")
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Println("starting the local stack: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, local AWS endpoint, tailor-provisioner, tailor-scheduler")
	stack, err := localstack.Up(ctx, so.options(dir))
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping the local stack")
		stack.Down()
		if err == nil {
			err = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "logs kept in %s/logs\n", dir)
		}
	}()
	fmt.Printf("stack ready in %.1fs\n\n", time.Since(start).Seconds())
	result, err := scenario.Demo(ctx, stack, root, os.Stdout)
	if err != nil {
		return err
	}
	if result.Running != result.Total {
		return errors.New("not every pod ran on a node Tailor launched")
	}
	return nil
}

// stallTimeout is how long tailor-dev scaledown waits for one more pod to run before it
// scales down with some pods pending.
const stallTimeout = 2 * time.Minute

// scaleDownFlags are the flags of tailor-dev scaledown.
type scaleDownFlags struct {
	shape                                string
	pods                                 int
	keep                                 string
	consolidateAfter, disruptionInterval time.Duration
	duringScaleDown, keepLogs            bool
	deletionCosts                        bool
	report                               string
	provisionerVerbosity                 int
	snapshotDir                          string
	featureGates                         string
}

// provisionerArgs are the sidecar's flags for a scale-down or a scale run.
func (f scaleDownFlags) provisionerArgs() []string {
	args := []string{"--disruption-interval", f.disruptionInterval.String(), "-v", strconv.Itoa(f.provisionerVerbosity)}
	if f.featureGates != "" {
		args = append(args, "--feature-gates", f.featureGates)
	}
	if !f.deletionCosts {
		args = append(args, "--pod-deletion-cost-schedulers=")
	}
	return args
}

// scaleDowns are the scale-downs the flags ask for: issue 5's, or one shape's, whose pods
// and keep rule default to issue 5's for that shape.
func (f scaleDownFlags) scaleDowns(root string) ([]scenario.ScaleDownOptions, error) {
	var runs []scenario.ScaleDownOptions
	for _, o := range scenario.IssueScaleDowns() {
		if f.shape == "" || f.shape == o.Shape {
			runs = append(runs, o)
		}
	}
	if f.shape != "" && len(runs) == 0 {
		runs = []scenario.ScaleDownOptions{{Shape: f.shape}}
	}
	for i := range runs {
		o := &runs[i]
		o.Root, o.ConsolidateAfter, o.DisruptionInterval = root, f.consolidateAfter, f.disruptionInterval
		o.ConsolidateDuringScaleDown = f.duringScaleDown
		// Pods stuck pending must not keep the scale-down from being measured; they are
		// reported.
		o.StallTimeout = stallTimeout
		if f.pods > 0 {
			o.Pods = f.pods
		}
		if f.keep != "" {
			k, err := scenario.ParseKeepRule(f.keep)
			if err != nil {
				return nil, err
			}
			o.Keep = k
		}
		if o.Pods == 0 || o.Keep.Every == 0 {
			return nil, fmt.Errorf("shape %s: give --pods and --keep", o.Shape)
		}
		if f.snapshotDir != "" {
			o.Snapshot = filepath.Join(f.snapshotDir, fmt.Sprintf("%s-%d-start.json", o.Shape, o.Pods))
		}
	}
	return runs, nil
}

// scaleDown runs each scale-down on a fresh stack and fails when one did not converge with
// every kept pod running.
func scaleDown(ctx context.Context, root string, bootDelay time.Duration, f scaleDownFlags, runs []scenario.ScaleDownOptions) error {
	var failed []string
	var results []*scenario.ScaleDownResult
	for _, o := range runs {
		r, err := scaleDownOnce(ctx, root, bootDelay, f, o)
		if err != nil {
			return fmt.Errorf("%s: %w", o.Shape, err)
		}
		results = append(results, r)
		if !r.Converged || r.Running != r.To {
			failed = append(failed, o.Shape)
		}
	}
	if len(results) > 1 {
		fmt.Println("\nall scale-downs:")
		for _, r := range results {
			scenario.PrintScaleDown(os.Stdout, r)
		}
	}
	report := f.report
	if !filepath.IsAbs(report) {
		report = filepath.Join(root, report)
	}
	if err := scenario.WriteScaleDownReports(report, results); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", report)
	if len(failed) > 0 {
		return fmt.Errorf("did not converge with every kept pod running: %v", failed)
	}
	return nil
}

func scaleDownOnce(ctx context.Context, root string, bootDelay time.Duration, f scaleDownFlags, o scenario.ScaleDownOptions) (_ *scenario.ScaleDownResult, err error) {
	dir, err := os.MkdirTemp("", "tailor-scaledown-")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	fmt.Printf("starting a fresh local stack for %s (sidecar %s)\n", o.Shape, strings.Join(f.provisionerArgs(), " "))
	stack, err := localstack.Up(ctx, localstack.Options{
		Root: root, Dir: dir, BootDelay: bootDelay, Progress: os.Stdout,
		ProvisionerArgs: f.provisionerArgs(),
	})
	if err != nil {
		return nil, err
	}
	var r *scenario.ScaleDownResult
	defer func() {
		fmt.Println("stopping the local stack")
		stack.Down()
		if err == nil && r.Converged && r.Running == r.To && !f.keepLogs {
			err = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "logs kept in %s/logs\n", dir)
		}
	}()
	fmt.Printf("stack ready in %.1fs\n\n", time.Since(start).Seconds())
	r, err = scenario.ScaleDown(ctx, stack, o, os.Stdout)
	return r, err
}

// scaleFlags are the flags of tailor-dev scale.
type scaleFlags struct {
	nodes, pods     int
	report          string
	convergeTimeout time.Duration
}

// scale runs bench-scale on a fresh stack tuned for scale and fails when its pods did not
// all run or consolidation did not converge.
func scale(ctx context.Context, root string, bootDelay time.Duration, sd scaleDownFlags, f scaleFlags) (err error) {
	nodes, pods := f.nodes, f.pods
	switch {
	case nodes == 0 && pods == 0:
		nodes = scenario.ScaleNodes
		fallthrough
	case pods == 0:
		pods = int(float64(nodes) * scenario.ScalePodsPerNode)
	case nodes == 0:
		nodes = int(float64(pods) / scenario.ScalePodsPerNode)
	}
	first, with := scenario.ScaleWorkloads(pods)
	opts := scenario.ScaleOptions{
		ScaleDownOptions: scenario.ScaleDownOptions{
			Root: root, Shape: first.Shape, Pods: first.Pods, Keep: first.Keep, With: with,
			ConsolidateAfter: sd.consolidateAfter, DisruptionInterval: sd.disruptionInterval,
			// A burst of tens of thousands of pods takes many minutes; one stuck pod must not
			// keep the scale-down from being measured.
			RunTimeout: f.convergeTimeout, ConvergeTimeout: f.convergeTimeout, StallTimeout: 5 * stallTimeout,
		},
		Nodes:  nodes,
		Report: filepath.Join(root, f.report),
	}
	if filepath.IsAbs(f.report) {
		opts.Report = f.report
	}
	dir, err := os.MkdirTemp("", "tailor-scale-")
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Printf("starting a fresh local stack tuned for scale: %d pods, %d nodes\n", pods, nodes)
	stack, err := localstack.Up(ctx, localstack.Options{
		Root: root, Dir: dir, BootDelay: bootDelay, Progress: os.Stdout, Scale: true, Audit: true,
		ProvisionerArgs: sd.provisionerArgs(),
	})
	if err != nil {
		return err
	}
	var rep *scenario.ScaleReport
	defer func() {
		fmt.Println("stopping the local stack")
		stack.Down()
		if err == nil && !sd.keepLogs {
			err = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "logs kept in %s/logs\n", dir)
		}
	}()
	fmt.Printf("stack ready in %.1fs\n\n", time.Since(start).Seconds())
	rep, _, err = scenario.Scale(ctx, stack, opts, os.Stdout)
	if err != nil {
		return err
	}
	if rep.PodsRunning != rep.Pods || !rep.Converged || rep.PodsRunningAfter != rep.PodsKept {
		return fmt.Errorf("%d of %d pods ran, converged %t with %d of %d kept pods running", rep.PodsRunning, rep.Pods, rep.Converged, rep.PodsRunningAfter, rep.PodsKept)
	}
	return nil
}

// disruptionFlags are the flags of tailor-dev disruption.
type disruptionFlags struct {
	deployments         int
	runTimeout, timeout time.Duration
	report              string
}

// disruption runs bench-disruption on a fresh stack, writes its report, and fails when the
// opted-in pool did not converge within the timeout.
func disruption(ctx context.Context, root string, bootDelay time.Duration, sd scaleDownFlags, f disruptionFlags) (err error) {
	dir, err := os.MkdirTemp("", "tailor-disruption-")
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Printf("starting a fresh local stack for bench-disruption (sidecar %s)\n", strings.Join(sd.provisionerArgs(), " "))
	stack, err := localstack.Up(ctx, localstack.Options{
		Root: root, Dir: dir, BootDelay: bootDelay, Progress: os.Stdout,
		ProvisionerArgs: sd.provisionerArgs(),
	})
	if err != nil {
		return err
	}
	var r scenario.DisruptionResult
	defer func() {
		fmt.Println("stopping the local stack")
		stack.Down()
		if err == nil && !sd.keepLogs {
			err = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "logs kept in %s/logs\n", dir)
		}
	}()
	fmt.Printf("stack ready in %.1fs\n\n", time.Since(start).Seconds())
	r, err = scenario.Disruption(ctx, stack, scenario.DisruptionOptions{
		Deployments: f.deployments, ConsolidateAfter: sd.consolidateAfter, DisruptionInterval: sd.disruptionInterval,
		RunTimeout: f.runTimeout, Timeout: f.timeout,
	}, os.Stdout)
	if err != nil {
		return err
	}
	report := f.report
	if !filepath.IsAbs(report) {
		report = filepath.Join(root, report)
	}
	if err := scenario.WriteDisruptionReport(report, r); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", report)
	if r.TimedOut {
		return fmt.Errorf("the opted-in pool did not converge within %s: waiting for %s", f.timeout, r.Waiting)
	}
	return nil
}
