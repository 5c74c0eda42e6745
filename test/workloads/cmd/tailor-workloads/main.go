// Command tailor-workloads prints a benchmark workload (package workloads) as a v1 List in
// JSON, for the planner's simulate command and the benchmark scripts:
//
//	tailor-workloads [--seed S] SHAPE PODS > workload.json
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tailor-autoscaler/tailor/test/workloads"
)

func main() {
	// A flag set of its own: the global one has the flags of the packages workloads imports.
	flags := flag.NewFlagSet("tailor-workloads", flag.ExitOnError)
	seed := flags.Int64("seed", workloads.DefaultSeed, "Seed of the workload's random draws.")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "Usage: tailor-workloads [--seed S] SHAPE PODS\nShapes: %s\n", strings.Join(workloads.Shapes, ", "))
		flags.PrintDefaults()
	}
	_ = flags.Parse(os.Args[1:])
	if flags.NArg() != 2 {
		flags.Usage()
		os.Exit(2)
	}
	pods, err := strconv.Atoi(flags.Arg(1))
	if err != nil || pods < 0 {
		fmt.Fprintf(os.Stderr, "tailor-workloads: PODS %q is not a number of pods\n", flags.Arg(1))
		os.Exit(2)
	}
	if err := workloads.Write(os.Stdout, flags.Arg(0), pods, *seed); err != nil {
		fmt.Fprintf(os.Stderr, "tailor-workloads: %v\n", err)
		os.Exit(1)
	}
}
