// Package scheduler builds the tailor-scheduler command: kube-scheduler, with its own flags,
// configuration and every default plugin, plus Tailor's NodeProvisioning plugin and
// scheduler-plugins' Coscheduling (gangs) and CapacityScheduling (elastic quotas). It differs
// from kube-scheduler in one respect: the leader election identity starts with the name of
// the replica (see provisioner/leader), so the provisioner sidecar in the same pod can tell
// when its scheduler leads, and lead with it.
package scheduler

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	// The args of Coscheduling and CapacityScheduling decode with kube-scheduler's own.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/capacityscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config/scheme"
	"github.com/tailor-autoscaler/tailor/plugin/nodeprovisioning"
	"github.com/tailor-autoscaler/tailor/provisioner/leader"
)

// NewCommand returns the tailor-scheduler command; extra registers plugins beyond Tailor's
// own (the tests' fault plugins).
func NewCommand(extra ...app.Option) *cobra.Command {
	scheme.AddToScheduler()
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use:  "tailor-scheduler",
		Long: "kube-scheduler with Tailor's NodeProvisioning plugin, which hands pods that fit no node to the provisioner sidecar and holds them to the nodes it plans for them.",
		// Feature gates are set before anything reads them.
		PersistentPreRunE: func(*cobra.Command, []string) error { return opts.ComponentGlobalsRegistry.Set() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, opts, extra)
		},
		Args: cobra.NoArgs,
	}
	named := opts.Flags
	verflag.AddFlags(named.FlagSet("global"))
	globalflag.AddGlobalFlags(named.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, fs := range named.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *named, cols)
	return cmd
}

func run(cmd *cobra.Command, opts *options.Options, extra []app.Option) error {
	verflag.PrintAndExitIfRequested()
	gates := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, gates); err != nil {
		return fmt.Errorf("configuring logging: %w", err)
	}
	cliflag.PrintFlags(cmd.Flags())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	plugins := append([]app.Option{
		app.WithPlugin(nodeprovisioning.Name, nodeprovisioning.New),
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(capacityscheduling.Name, capacityscheduling.New),
	}, extra...)
	cc, sched, err := app.Setup(ctx, opts, plugins...)
	if err != nil {
		return err
	}
	if cc.LeaderElection != nil {
		if err := useReplicaIdentity(cc.LeaderElection.Lock); err != nil {
			return err
		}
	}
	checkSkew(ctx, cc.Client.Discovery())
	if mutable, ok := gates.(featuregate.MutableFeatureGate); ok {
		mutable.AddMetrics()
	}
	opts.ComponentGlobalsRegistry.AddMetrics()
	return app.Run(ctx, cc, sched)
}

// useReplicaIdentity gives the scheduler's Lease lock the identity of this replica.
func useReplicaIdentity(lock resourcelock.Interface) error {
	lease, ok := lock.(*resourcelock.LeaseLock)
	if !ok {
		return fmt.Errorf("leaderElection.resourceLock: the provisioner sidecar follows a Lease, got a %T lock; set resourceLock: leases", lock)
	}
	replica, err := leader.Replica()
	if err != nil {
		return err
	}
	lease.LockConfig.Identity = leader.Identity(replica)
	return nil
}
