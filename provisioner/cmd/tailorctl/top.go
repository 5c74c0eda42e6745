package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
	"github.com/tailor-autoscaler/tailor/provisioner/top"
)

const topUsage = `Usage: tailorctl top [--once] [--kubeconfig FILE] [--context NAME] [--catalog FILE]

Shows every node with its instance type, zone, capacity type and hourly price, its CPU and
memory requested against allocatable, and its pods; totals per NodePool and for the cluster.
Prices come from the EC2 catalog: on-demand prices are real, spot prices of the embedded
catalog are synthetic; the cluster's NodeOverlays change them as they change planning.
Redraws on changes, at most twice a second; Ctrl-C quits.

Flags:
`

// defaultWidth is the width of frames written to something other than a terminal.
const defaultWidth = 160

func runTop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, topUsage)
		fs.PrintDefaults()
	}
	var cluster clusterFlags
	cluster.register(fs)
	once := fs.Bool("once", false, "Print one frame and exit.")
	catalogPath := fs.String("catalog", "", "EC2 catalog file (JSON) for prices; the embedded us-east-1 catalog by default.")
	positional, err := parse(fs, args)
	if err != nil {
		return helpIsNotAnError(err)
	}
	if len(positional) > 0 {
		return fmt.Errorf("unexpected arguments %q", positional)
	}
	cat, err := loadCatalog(*catalogPath)
	if err != nil {
		return err
	}
	cfg, err := cluster.clientConfig().ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	reader, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	opts := top.Options{Prices: top.NewCatalogPrices(cat), Overlays: overlay.ClientLister{Reader: reader}, NodeClaims: reader, Out: stdout, Width: func() int { return defaultWidth }, Once: *once}
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.FullScreen = true
		opts.Width = func() int {
			if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
				return w
			}
			return defaultWidth
		}
		opts.Redraw = resized(ctx)
	} else if w, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && w > 0 {
		opts.Width = func() int { return w }
	}
	return top.Run(ctx, cs, opts)
}

// resized signals each change of the terminal's size until ctx is done.
func resized(ctx context.Context) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	out := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

func loadCatalog(path string) (*catalog.Catalog, error) {
	if path == "" {
		return catalog.Embedded()
	}
	return catalog.LoadFile(path)
}
