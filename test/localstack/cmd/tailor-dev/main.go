// Command tailor-dev runs Tailor's local stack:
//
//	tailor-dev up      start everything and leave it running; prints what to export
//	tailor-dev env     print the exports of the running stack
//	tailor-dev down    stop the running stack and remove its state
//	tailor-dev demo    start a fresh stack, run the demo scenario, print it, stop the stack
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/scenario"
)

func main() {
	fs := flag.NewFlagSet("tailor-dev", flag.ExitOnError)
	root := fs.String("root", ".", "Repository root (binaries in _output/bin, manifests in manifests/).")
	dir := fs.String("dir", ".local", "State directory of the stack started by up.")
	bootDelay := fs.Duration("boot-delay", 2*time.Second, "How long a launched instance takes to register its node.")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tailor-dev up|env|down|demo [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	absRoot, err := filepath.Abs(*root)
	if err == nil {
		err = run(ctx, cmd, absRoot, *dir, *bootDelay)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailor-dev "+cmd+": "+err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd, root, dir string, bootDelay time.Duration) error {
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
		stack, err := localstack.Up(ctx, localstack.Options{Root: root, Dir: absDir, BootDelay: bootDelay, Detach: true, Progress: os.Stdout})
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
		return demo(ctx, root, bootDelay)
	}
	return fmt.Errorf("unknown command %q: use up, env, down or demo", cmd)
}

func demo(ctx context.Context, root string, bootDelay time.Duration) (err error) {
	dir, err := os.MkdirTemp("", "tailor-demo-")
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Println("starting the local stack: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, local AWS endpoint, tailor-provisioner, tailor-scheduler")
	stack, err := localstack.Up(ctx, localstack.Options{Root: root, Dir: dir, BootDelay: bootDelay, Progress: os.Stdout})
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
