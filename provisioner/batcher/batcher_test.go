package batcher

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// batch runs Wait in the background and reports when it returns.
func batch(ctx context.Context, b *Batcher) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- b.Wait(ctx) }()
	return done
}

// step advances the fake clock once Wait is sleeping on it, so no deadline is skipped.
func step(t *testing.T, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Wait never slept on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(d)
}

func closed(done <-chan bool) bool {
	select {
	case <-done:
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

func TestBatchClosesAfterIdle(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b, err := New(Options{Idle: time.Second, Max: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	b.Trigger()
	done := batch(context.Background(), b)
	step(t, clk, 999*time.Millisecond)
	if closed(done) {
		t.Fatal("batch closed before the idle duration")
	}
	step(t, clk, time.Millisecond)
	if !<-done {
		t.Fatal("Wait() = false, want true")
	}
}

func TestTriggersExtendTheBatchUpToMax(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b, err := New(Options{Idle: time.Second, Max: 3 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	b.Trigger()
	done := batch(context.Background(), b)
	for elapsed := 600 * time.Millisecond; elapsed < 3*time.Second; elapsed += 600 * time.Millisecond {
		step(t, clk, 600*time.Millisecond)
		b.Trigger()
		if closed(done) {
			t.Fatalf("batch closed at %s, before max", elapsed)
		}
	}
	step(t, clk, 600*time.Millisecond)
	if !<-done {
		t.Fatal("Wait() = false, want true")
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := batch(ctx, b)
	cancel()
	if <-done {
		t.Fatal("Wait() = true after cancel, want false")
	}
}

func TestNewRejectsIdleLongerThanMax(t *testing.T) {
	if _, err := New(Options{Idle: 5 * time.Second, Max: time.Second}); err == nil {
		t.Fatal("New() error = nil, want an error naming idle and max")
	}
}
