package backoff

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestFailures(t *testing.T) {
	// step is one thing that happens to the object "a", after advance.
	type step struct {
		advance time.Duration
		fail    bool   // a failed attempt, else a look at the wait
		version string // "" means "v1"
		forget  bool
	}
	tests := []struct {
		name  string
		steps []step
		want  []time.Duration // what each step returns: Failed's wait, or Wait's
	}{
		{
			name:  "never failed",
			steps: []step{{}},
			want:  []time.Duration{0},
		},
		{
			name:  "waits double from the initial one up to the cap",
			steps: []step{{fail: true}, {fail: true}, {fail: true}, {fail: true}, {fail: true}, {fail: true}, {fail: true}, {fail: true}},
			want:  []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second},
		},
		{
			name:  "the wait counts down with the clock",
			steps: []step{{fail: true}, {fail: true}, {advance: 4 * time.Second}, {advance: 6 * time.Second}, {advance: time.Second}},
			want:  []time.Duration{5 * time.Second, 10 * time.Second, 6 * time.Second, 0, 0},
		},
		{
			name:  "a new version does not wait and starts afresh",
			steps: []step{{fail: true}, {fail: true}, {version: "v2"}, {fail: true, version: "v2"}, {version: "v1"}},
			want:  []time.Duration{5 * time.Second, 10 * time.Second, 0, 5 * time.Second, 0},
		},
		{
			name:  "forgotten after a success",
			steps: []step{{fail: true}, {fail: true}, {forget: true}, {}, {fail: true}},
			want:  []time.Duration{5 * time.Second, 10 * time.Second, 0, 0, 5 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			f := New(clk, DefaultInitial, DefaultMax)
			var got []time.Duration
			for _, s := range tt.steps {
				clk.Step(s.advance)
				version := s.version
				if version == "" {
					version = "v1"
				}
				switch {
				case s.forget:
					f.Forget("a")
					got = append(got, f.Wait("a", version))
				case s.fail:
					got = append(got, f.Failed("a", version))
				default:
					got = append(got, f.Wait("a", version))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFailuresWithinTenMinutes is the budget the controllers are held to: a persistently
// failing object makes 7 attempts in its first ten minutes, then one every five.
func TestFailuresWithinTenMinutes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	f := New(clk, DefaultInitial, DefaultMax)
	var attempts []time.Duration
	for clk.Since(start) <= 20*time.Minute {
		attempts = append(attempts, clk.Since(start))
		clk.Step(f.Failed("a", "v1"))
	}
	want := []time.Duration{0, 5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second, 155 * time.Second, 315 * time.Second, 615 * time.Second, 915 * time.Second}
	if diff := cmp.Diff(want, attempts); diff != "" {
		t.Errorf("attempt times (-want +got):\n%s", diff)
	}
}

func TestRetain(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	f := New(clk, DefaultInitial, DefaultMax)
	for _, key := range []string{"a", "b", "c"} {
		f.Failed(key, "v1")
	}
	f.Retain(func(key string) bool { return key != "b" })
	got := map[string]time.Duration{}
	for _, key := range []string{"a", "b", "c"} {
		got[key] = f.Wait(key, "v1")
	}
	if diff := cmp.Diff(map[string]time.Duration{"a": 5 * time.Second, "b": 0, "c": 5 * time.Second}, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestNewQueueDelaysFollowTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	queue := NewQueue(clk)("test", nil)
	defer queue.ShutDown()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	queue.AddAfter(req, time.Minute)
	time.Sleep(50 * time.Millisecond)
	if n := queue.Len(); n != 0 {
		t.Fatalf("%d items due before the clock moved", n)
	}
	clk.Step(time.Minute)
	got := make(chan reconcile.Request)
	go func() {
		item, _ := queue.Get()
		got <- item
	}()
	select {
	case item := <-got:
		if diff := cmp.Diff(req, item); diff != "" {
			t.Errorf("item (-want +got):\n%s", diff)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the item did not come due once the clock reached its time")
	}
}
