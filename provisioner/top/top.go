package top

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
)

// Terminal control sequences of a full-screen view.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l" // alternate screen, cursor hidden
	leaveScreen = "\x1b[?25h\x1b[?1049l"
	clearScreen = "\x1b[H\x1b[2J"
)

// DefaultInterval is the shortest time between two frames.
const DefaultInterval = 500 * time.Millisecond

// Options configure the view.
type Options struct {
	// Prices of the nodes' offerings.
	Prices Prices
	// Overlays lists the NodeOverlays that change the prices, read at each frame; nil for
	// none. Without the NodeOverlay kind in the cluster there are none.
	Overlays overlay.Lister
	// NodeClaims reads the NodeClaims whose nodes' costs besides the instance are added to
	// their prices, at each frame; nil for none, as without the NodeClaim kind.
	NodeClaims client.Reader
	// Out receives the frames.
	Out io.Writer
	// Width is the terminal's width, read before each frame.
	Width func() int
	// Once draws one frame, once the caches are synced, and returns.
	Once bool
	// FullScreen draws on the terminal's alternate screen, each frame over the last.
	FullScreen bool
	// Interval is the shortest time between frames; DefaultInterval when zero.
	Interval time.Duration
	// Redraw asks for a frame (the terminal was resized, say).
	Redraw <-chan struct{}
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// Run shows the view of the cluster until ctx is done: it watches nodes and pods with
// informers and redraws after changes, at most once per interval.
func Run(ctx context.Context, cs kubernetes.Interface, opts Options) error {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes()
	pods := factory.Core().V1().Pods()
	changed := make(chan struct{}, 1)
	mark := func() {
		select {
		case changed <- struct{}{}:
		default: // a frame is already due
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mark() },
		UpdateFunc: func(any, any) { mark() },
		DeleteFunc: func(any) { mark() },
	}
	if _, err := nodes.Informer().AddEventHandler(handler); err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	if _, err := pods.Informer().AddEventHandler(handler); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	// The informers stop when Run returns: Shutdown waits for them, after cancel.
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("listing %v: the API server did not answer before %w", typ, context.Cause(ctx))
		}
	}

	draw := func() error {
		ns, err := nodes.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		ps, err := pods.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		var overlays []v1alpha1.NodeOverlay
		if opts.Overlays != nil {
			if overlays, err = opts.Overlays.ListNodeOverlays(ctx); err != nil && !meta.IsNoMatchError(err) {
				return err
			}
		}
		claims := &karpv1.NodeClaimList{}
		if opts.NodeClaims != nil {
			if err := opts.NodeClaims.List(ctx, claims); err != nil && !meta.IsNoMatchError(err) {
				return fmt.Errorf("listing NodeClaims: %w", err)
			}
		}
		frame := Render(Build(ns, ps, opts.Prices, overlays, claims.Items), opts.Width())
		if opts.FullScreen && !opts.Once {
			frame = clearScreen + frame
		}
		if _, err := io.WriteString(opts.Out, frame); err != nil {
			return fmt.Errorf("drawing: %w", err)
		}
		return nil
	}
	if opts.Once {
		return draw()
	}
	if opts.FullScreen {
		if _, err := io.WriteString(opts.Out, enterScreen); err != nil {
			return fmt.Errorf("drawing: %w", err)
		}
		defer io.WriteString(opts.Out, leaveScreen) //nolint:errcheck // the terminal is going away
	}
	for {
		if err := draw(); err != nil {
			return err
		}
		// Changes during the interval are coalesced into the next frame.
		select {
		case <-ctx.Done():
			return nil
		case <-opts.Clock.After(opts.Interval):
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-opts.Redraw:
		}
	}
}
