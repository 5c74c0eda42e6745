// Package batcher groups triggers into batches: a batch opens at the first trigger and
// closes when no trigger came for the idle duration, or when it has been open for the
// maximum duration, whichever is first.
package batcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Options configure a Batcher.
type Options struct {
	// Idle closes a batch after this long without a trigger (1s by default).
	Idle time.Duration
	// Max closes a batch this long after it opened (10s by default).
	Max time.Duration
	// Clock reads time; the real clock by default.
	Clock clock.Clock
}

// Batcher turns a stream of triggers into batches.
type Batcher struct {
	opts   Options
	signal chan struct{}

	mu sync.Mutex
	// open is true from the first trigger of a batch until Wait returns it.
	open        bool
	first, last time.Time
}

// New validates the options and returns a Batcher.
func New(opts Options) (*Batcher, error) {
	if opts.Idle == 0 {
		opts.Idle = time.Second
	}
	if opts.Max == 0 {
		opts.Max = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Idle < 0 || opts.Max < opts.Idle {
		return nil, fmt.Errorf("batch durations: idle %s must be positive and no longer than max %s", opts.Idle, opts.Max)
	}
	return &Batcher{opts: opts, signal: make(chan struct{}, 1)}, nil
}

// Trigger records that there is work for the next batch. It never blocks.
func (b *Batcher) Trigger() {
	now := b.opts.Clock.Now()
	b.mu.Lock()
	if !b.open {
		b.open, b.first = true, now
	}
	b.last = now
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

// Wait blocks until a batch has opened and closed. It returns false when ctx ends first.
func (b *Batcher) Wait(ctx context.Context) bool {
	for {
		b.mu.Lock()
		open, first, last := b.open, b.first, b.last
		b.mu.Unlock()
		if !open {
			select {
			case <-ctx.Done():
				return false
			case <-b.signal:
				continue
			}
		}
		deadline := last.Add(b.opts.Idle)
		if max := first.Add(b.opts.Max); max.Before(deadline) {
			deadline = max
		}
		wait := deadline.Sub(b.opts.Clock.Now())
		if wait <= 0 {
			b.mu.Lock()
			b.open = false
			b.mu.Unlock()
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-b.signal:
		case <-b.opts.Clock.After(wait):
		}
	}
}
