// Command tailor-chaos runs the randomized fault trials (make chaos) on a local stack and
// prints their table; it exits non-zero on any breach.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tailor-autoscaler/tailor/test/chaos"
)

func main() {
	trials := flag.Int("trials", 100, "How many trials to run.")
	seed := flag.Uint64("seed", 0, "Seed of the first trial (trial i runs from seed+i); 0 picks one from the time. --seed s --trials 1 replays the trial of seed s.")
	root := flag.String("root", ".", "Repository root: binaries in <root>/_output/bin.")
	dir := flag.String("dir", "", "Directory of the stack's state and logs; <root>/_output/chaos by default.")
	report := flag.String("report", "", "JSON report; <root>/_output/bench/chaos.json by default.")
	stacks := flag.Int("stacks", 1, "How many local stacks run trials side by side (each in <dir>/stack-<i> when more than one).")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	if *dir == "" {
		*dir = filepath.Join(*root, "_output", "chaos")
	}
	// The scheduler takes only an absolute socket path.
	for _, p := range []*string{root, dir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*p = abs
	}
	if *report == "" {
		*report = filepath.Join(*root, "_output", "bench", "chaos.json")
	}
	if err := os.RemoveAll(*dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("chaos: %d trials from seed %d on %d stacks\n", *trials, *seed, *stacks)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	r, err := chaos.Run(ctx, chaos.Options{Root: *root, Dir: *dir, Trials: *trials, Seed: *seed, Stacks: *stacks, Out: os.Stdout})
	stop()
	if r != nil {
		r.Print(os.Stdout)
		if werr := r.Write(*report); werr != nil {
			fmt.Fprintln(os.Stderr, werr)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v (logs in %s)\n", err, filepath.Join(*dir, "logs"))
		os.Exit(1)
	}
	if len(r.Breaches) > 0 {
		os.Exit(1)
	}
}
