// Command tailorctl is Tailor's command line: it plans offline (simulate), converts older
// Karpenter configuration (convert), explains where a pod stands (explain) and shows the
// cluster's nodes, their use and their price live (top).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
)

const usage = `Usage: tailorctl COMMAND [flags]

Commands:
  simulate -f FILE ...   plan capacity for the pods of manifests, offline (as tailor-provisioner simulate)
  convert -f FILE        convert Karpenter v1alpha5/v1beta1 NodePool configuration to v1
  explain POD [-n NS]    say why a pod is pending or where it is headed
  top [--once]           live view of nodes: use, pods and price, per NodePool

Run tailorctl COMMAND -h for a command's flags.
`

// command runs one subcommand with its arguments.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

func main() {
	commands := map[string]command{
		"simulate": simulate.Run,
		"convert":  runConvert,
		"explain":  runExplain,
		"top":      runTop,
	}
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprint(os.Stderr, usage)
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	name := os.Args[1]
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "tailorctl: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[2:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tailorctl %s: %v\n", name, err)
		os.Exit(1)
	}
}

// parse parses flags that may come before, between or after the positional arguments, and
// returns the positional arguments. Asking for help is reported as flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// helpIsNotAnError turns a request for help into success.
func helpIsNotAnError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}
