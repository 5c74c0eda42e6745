// Package chaos runs randomized fault trials on one long-lived local stack (test/localstack)
// with two replicas of tailor-scheduler and its sidecar: each trial, drawn from a printed
// seed, runs a workload phase (a scale-up burst, a scale-down, a drift roll-out after an AMI
// change, spot reclaims) while random faults strike at random moments (processes killed,
// the control plane restarted, the scheduler's socket removed, EC2 failing in the ways the
// local endpoint can), then checks, once the faults stop, that the system came back to a
// sound rest. make chaos runs it; a short run is a Go test of this package.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// interruptionQueue is the SQS queue the chaos stack's sidecars read spot warnings from.
const interruptionQueue = "tailor-chaos-interruptions"

// Options configure a run.
type Options struct {
	// Root is the repository root (binaries in Root/_output/bin); Dir holds the stack.
	Root, Dir string
	// Trials is how many trials run; Seed the first trial's seed, trial i running from
	// Seed+i, so that SEED=s TRIALS=1 replays the trial of seed s.
	Trials int
	Seed   uint64
	// Stacks is how many local stacks Run starts side by side (one when zero), each in its
	// own directory under Dir and taking the next trial when it is done with one: a trial
	// mostly waits (for batch windows, consolidation, reclaims), and its stack leaves most
	// of two cores idle.
	Stacks int
	// Window bounds the faults of a trial.
	Window Window
	// Recovery bounds the time from the last fault's end to a sound rest; a trial not at
	// rest by then breaches the invariants that do not hold.
	Recovery time.Duration
	// Out receives progress and the report.
	Out io.Writer
}

// DefaultWindow allows up to four faults within the 20s after a phase starts, each up to 15s;
// Deployments of up to 10 pods.
var DefaultWindow = Window{Within: 20 * time.Second, MaxFaults: 4, MaxFor: 15 * time.Second, MaxReplicas: 10}

// DefaultRecovery bounds a trial's recovery: a NodeClaim that never registers is given up
// after the stack's 30s registration timeout, and a launch may then take tens of seconds.
const DefaultRecovery = 4 * time.Minute

// MovedPodsHold is the chaos stack's --moved-pods-hold: how long the sidecar keeps
// consolidation off the pods it moved, within which none may be evicted again.
const MovedPodsHold = 30 * time.Second

// ReplacementReadyTimeout is the chaos stack's --replacement-ready-timeout.
const ReplacementReadyTimeout = 30 * time.Second

// StackOptions are the chaos stack's: two replicas, an interruption queue, and windows
// shortened so that a trial comes to rest in a minute or two. The sidecar's flags:
// --disruption-interval 2s (10s), --orphan-instance-grace 10s (30s),
// --nodeclaim-registration-timeout 30s (15m), --unavailable-offerings-ttl 20s (3m), and
// --feature-gates SpotToSpotConsolidation=true, without which a spot node is never replaced
// by a cheaper spot one and the cost at rest cannot come within 1.05 of a fresh plan (which
// is mostly spot), and --moved-pods-hold 30s (1h): nodes holding pods that a disruption
// moved, drift's replacements among them, are not consolidated for that long, so a drift
// roll-out that replaced nodes one for one would stay above 1.05 for an hour, and
// --spot-to-spot-savings 0.05 (0.2): a spot node is replaced by cheaper spot once that saves
// what the cost bound allows, or a lone spot node 6% dearer than a fresh plan stays (seed
// 1018), and --replacement-ready-timeout 30s (each Deployment's progressDeadlineSeconds,
// 600s): a copy of a pod replaced before its eviction is Ready within seconds once it
// lands, and one that is not is deleted, its disruption abandoned, within a trial's
// recovery bound. Spot instances are reclaimed 20s after their warning (EC2's two
// minutes). The schedulers run the RejectLaunchedNodes filter, which only the
// UnmodelledRejection fault's pods meet.
func StackOptions(root, dir string) localstack.Options {
	return localstack.Options{
		Root: root, Dir: dir, Replicas: 2, BootDelay: 2 * time.Second, RejectLaunchedNodes: true,
		InterruptionQueue: interruptionQueue, SpotReclaimDelay: 20 * time.Second,
		ProvisionerArgs: []string{
			"--disruption-interval", "2s", "--orphan-instance-grace", "10s",
			"--nodeclaim-registration-timeout", "30s", "--unavailable-offerings-ttl", "20s",
			"--feature-gates", "SpotToSpotConsolidation=true", "--moved-pods-hold", MovedPodsHold.String(),
			"--spot-to-spot-savings", "0.05", "--replacement-ready-timeout", ReplacementReadyTimeout.String(),
		},
	}
}

// Run starts the stacks, runs the trials on them (RunOn) and stops them.
func Run(ctx context.Context, opts Options) (*Report, error) {
	n := max(opts.Stacks, 1)
	stacks := make([]*localstack.Stack, 0, n)
	defer func() {
		for _, s := range stacks {
			s.Down()
		}
	}()
	for i := range n {
		dir := opts.Dir
		if n > 1 {
			dir = filepath.Join(opts.Dir, fmt.Sprintf("stack-%d", i+1))
		}
		stackOpts := StackOptions(opts.Root, dir)
		stackOpts.Progress = opts.Out
		if opts.Out != nil {
			fmt.Fprintf(opts.Out, "chaos: starting the local stack in %s\n", dir)
		}
		stack, err := localstack.Up(ctx, stackOpts)
		if err != nil {
			return nil, err
		}
		stacks = append(stacks, stack)
	}
	return RunOn(ctx, opts, stacks...)
}

// RunOn runs the trials on stacks started with StackOptions, each stack taking the next
// trial when done with one, and returns their report; it fails only when a stack cannot run
// them, never for a breach (the report holds those).
func RunOn(ctx context.Context, opts Options, stacks ...*localstack.Stack) (*Report, error) {
	if opts.Trials < 1 {
		return nil, errors.New("chaos: at least one trial")
	}
	if len(stacks) == 0 {
		return nil, errors.New("chaos: no stack to run the trials on")
	}
	if opts.Window.Within == 0 {
		opts.Window = DefaultWindow
	}
	if opts.Recovery == 0 {
		opts.Recovery = DefaultRecovery
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	runners := make([]*runner, len(stacks))
	for i, stack := range stacks {
		r, err := newRunner(ctx, stack, opts)
		if err != nil {
			return nil, err
		}
		runners[i] = r
	}
	superviseCtx, stopSupervising := context.WithCancel(ctx)
	var supervised sync.WaitGroup
	for _, r := range runners {
		supervised.Go(func() { r.inject.supervise(superviseCtx) })
	}
	defer func() {
		stopSupervising()
		supervised.Wait()
	}()
	report := newReport(opts)
	results := make([]*TrialResult, opts.Trials)
	errs := make([]error, len(runners))
	var next atomic.Int64
	var failed atomic.Bool
	var workers sync.WaitGroup
	for s, r := range runners {
		label := ""
		if len(runners) > 1 {
			label = fmt.Sprintf(" (stack %d)", s+1)
		}
		workers.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= opts.Trials {
					return
				}
				plan := NewPlan(opts.Seed+uint64(i), opts.Window)
				fmt.Fprintf(opts.Out, "chaos: trial %d/%d%s, %s\n", i+1, opts.Trials, label, plan)
				res, err := r.trial(ctx, plan)
				if err != nil {
					// The other stacks finish the trials they are in, and take no more.
					errs[s] = fmt.Errorf("trial of seed %d%s: %w", plan.Seed, label, err)
					failed.Store(true)
					return
				}
				results[i] = res
				for _, b := range res.Breaches {
					fmt.Fprintf(opts.Out, "chaos: BREACH seed %d (%s): %s: %s\n", plan.Seed, plan.Phase, b.Invariant, b.Detail)
				}
				fmt.Fprintf(opts.Out, "chaos: trial %d/%d%s, seed %d: %d checks passed, %d breaches, at rest %.1fs after the faults\n",
					i+1, opts.Trials, label, plan.Seed, len(res.Held), len(res.Breaches), res.Recovery.Seconds())
			}
		})
	}
	workers.Wait()
	for _, res := range results {
		if res != nil {
			report.add(res)
		}
	}
	injectors := make([]*injector, len(runners))
	var samples []sample
	for i, r := range runners {
		injectors[i] = r.inject
		samples = append(samples, r.samples...)
	}
	report.finish(injectors, samples)
	return report, errors.Join(errs...)
}

// runner runs trials on one stack.
type runner struct {
	opts    Options
	stack   *localstack.Stack
	cs      kubernetes.Interface
	kube    client.Client
	inject  *injector
	fresh   *freshPlanner
	applier *localstack.Applier
	// alias is the AMI release the EC2NodeClass is pinned to now.
	alias int
	// samples are the processes' goroutines and memory after each trial.
	samples []sample
}

func newRunner(ctx context.Context, stack *localstack.Stack, opts Options) (*runner, error) {
	cfg := rest.CopyConfig(stack.Config)
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		return nil, err
	}
	fresh, err := newFreshPlanner(stack.Dir(), stack.ClusterName())
	if err != nil {
		return nil, err
	}
	applier, err := localstack.NewApplier(stack.Config)
	if err != nil {
		return nil, err
	}
	r := &runner{opts: opts, stack: stack, cs: cs, kube: kube, inject: newInjector(stack, cs, interruptionQueue), fresh: fresh, applier: applier}
	return r, r.applyPool(ctx)
}

func (r *runner) applyPool(ctx context.Context) error {
	return r.applier.Apply(ctx, []byte(poolManifest(r.stack.ClusterName(), amiAliases[r.alias])))
}
