package launchlimit

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestLimiter(t *testing.T) {
	// step is one thing that happens after advance: a rejection of pod on claim, a pod
	// landing, a pod forgotten, or (none of those) a check of pod.
	type step struct {
		advance time.Duration
		pod     types.UID
		// group and version default to "g" and "v1"; groupVersion to "p1".
		group, version, groupVersion string
		reject                       string // the NodeClaim that rejected the pod
		landed, forget               bool
	}
	// got is what a step's verdict says, in short.
	type got struct {
		State    State
		Launches int
		ByGroup  bool
		Wait     time.Duration
	}
	tests := []struct {
		name  string
		steps []step
		want  []got
	}{
		{
			name:  "a pod never rejected is free",
			steps: []step{{pod: "a"}},
			want:  []got{{State: Free}},
		},
		{
			name: "each rejection doubles the wait, up to the limit",
			steps: []step{
				{pod: "a", reject: "nc-1"}, {pod: "a", advance: 29 * time.Second},
				{pod: "a", advance: time.Second},
				{pod: "a", reject: "nc-2"}, {pod: "a", advance: 60 * time.Second},
				{pod: "a", reject: "nc-3"}, {pod: "a", advance: time.Hour},
			},
			want: []got{
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second}, {State: BackingOff, Launches: 1, Wait: time.Second},
				{State: Free, Launches: 1},
				{State: BackingOff, Launches: 2, Wait: time.Minute}, {State: Free, Launches: 2},
				{State: Limited, Launches: 3}, {State: Limited, Launches: 3},
			},
		},
		{
			name:  "the same NodeClaim counts once",
			steps: []step{{pod: "a", reject: "nc-1"}, {pod: "a", reject: "nc-1"}},
			want:  []got{{State: BackingOff, Launches: 1, Wait: 30 * time.Second}, {State: BackingOff, Launches: 1, Wait: 30 * time.Second}},
		},
		{
			name: "a new version of the pod starts afresh",
			steps: []step{
				{pod: "a", group: "-", reject: "nc-1"}, {pod: "a", group: "-", reject: "nc-2"}, {pod: "a", group: "-", reject: "nc-3"},
				{pod: "a", group: "-", version: "v2"},
				{pod: "a", group: "-", version: "v2", reject: "nc-4"},
			},
			want: []got{
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second}, {State: BackingOff, Launches: 2, Wait: time.Minute}, {State: Limited, Launches: 3},
				{State: Free},
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second},
			},
		},
		{
			name: "a group's pods share its launches: a new pod of a limited group is held",
			steps: []step{
				{pod: "a", reject: "nc-1"}, {pod: "b", reject: "nc-2"}, {pod: "c", reject: "nc-3"},
				{pod: "d", reject: "nc-4"}, {pod: "e", reject: "nc-5"}, {pod: "f", reject: "nc-6"},
				{pod: "g"},
				{pod: "g", groupVersion: "p2"},
			},
			want: []got{
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second},
				{State: BackingOff, Launches: 2, ByGroup: true, Wait: time.Minute},
				{State: BackingOff, Launches: 3, ByGroup: true, Wait: 2 * time.Minute},
				{State: BackingOff, Launches: 4, ByGroup: true, Wait: 4 * time.Minute},
				{State: BackingOff, Launches: 5, ByGroup: true, Wait: 8 * time.Minute},
				{State: Limited, Launches: 6, ByGroup: true},
				{State: Limited, Launches: 6, ByGroup: true},
				{State: Free},
			},
		},
		{
			name: "pods of a group rejected on one NodeClaim count once for the group",
			steps: []step{
				{pod: "a", reject: "nc-1"}, {pod: "b", reject: "nc-1"}, {pod: "c", reject: "nc-1"},
				{pod: "d"},
			},
			want: []got{
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second},
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second},
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second},
				{State: BackingOff, Launches: 1, ByGroup: true, Wait: 30 * time.Second},
			},
		},
		{
			name: "a pod of the group landing on planned capacity frees the group",
			steps: []step{
				{pod: "a", reject: "nc-1"}, {pod: "b", reject: "nc-2"},
				{pod: "a", landed: true},
				{pod: "c"}, {pod: "b"},
			},
			want: []got{
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second},
				{State: BackingOff, Launches: 2, ByGroup: true, Wait: time.Minute},
				{},
				{State: Free}, {State: BackingOff, Launches: 1, Wait: 30 * time.Second},
			},
		},
		{
			name: "a forgotten pod leaves its group's count behind",
			steps: []step{
				{pod: "a", reject: "nc-1"}, {pod: "a", forget: true}, {pod: "a"}, {pod: "b"},
			},
			want: []got{
				{State: BackingOff, Launches: 1, Wait: 30 * time.Second}, {},
				{State: BackingOff, Launches: 1, ByGroup: true, Wait: 30 * time.Second},
				{State: BackingOff, Launches: 1, ByGroup: true, Wait: 30 * time.Second},
			},
		},
		{
			name: "pods without a group do not share launches",
			steps: []step{
				{pod: "a", group: "-", reject: "nc-1"}, {pod: "b", group: "-"},
			},
			want: []got{{State: BackingOff, Launches: 1, Wait: 30 * time.Second}, {State: Free}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(epoch)
			l, err := New(Options{Clock: clk, PerPod: 3, PerGroup: 6, Backoff: 30 * time.Second, MaxBackoff: 10 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var gots []got
			for _, s := range tt.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				sub := Subject{UID: s.pod, Group: or(s.group, "g"), Version: or(s.version, "v1"), GroupVersion: or(s.groupVersion, "p1")}
				if sub.Group == "-" {
					sub.Group = ""
				}
				var v Verdict
				switch {
				case s.landed:
					l.Landed(s.pod)
				case s.forget:
					l.Forget(s.pod)
				case s.reject != "":
					v = l.Rejected(sub, Rejection{Plugin: "DynamicResources", Reason: "cannot allocate all claims", NodeClaim: s.reject, At: clk.Now()})
				default:
					v = l.Check(sub)
				}
				if s.landed || s.forget {
					gots = append(gots, got{})
					continue
				}
				g := got{State: v.State, Launches: v.Launches, ByGroup: v.ByGroup && v.State != Free}
				if v.State == BackingOff {
					g.Wait = v.Until.Sub(clk.Now())
				}
				gots = append(gots, g)
			}
			if diff := cmp.Diff(tt.want, gots); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaitIsCapped(t *testing.T) {
	l, err := New(Options{Clock: clocktesting.NewFakePassiveClock(epoch), PerPod: 100, PerGroup: 100, Backoff: 30 * time.Second, MaxBackoff: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for _, n := range []int{1, 2, 5, 6, 7, 40} {
		got = append(got, l.wait(n))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestRestoreSeedsWhatARestartLost(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(epoch)
	newLimiter := func() *Limiter {
		l, err := New(Options{Clock: clk, PerPod: 3, PerGroup: 6, Backoff: 30 * time.Second, MaxBackoff: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	r := Rejection{Plugin: "DynamicResources", Reason: "cannot allocate all claims", At: epoch}
	s := Subject{UID: "a", Group: "g", Version: "v1", GroupVersion: "p1"}

	l := newLimiter()
	if !l.Restore(s, 3, false, r) {
		t.Fatal("Restore of a pod the limiter does not count reported false")
	}
	if l.Restore(s, 1, false, r) {
		t.Error("Restore of a pod the limiter counts already reported true")
	}
	if v := l.Check(s); v.State != Limited || v.Launches != 3 || v.Last.String() != "DynamicResources: cannot allocate all claims" {
		t.Errorf("pod restored at its limit: %+v, want Limited at 3 launches with its rejection", v)
	}
	if v := l.Check(Subject{UID: "a", Group: "g", Version: "v2", GroupVersion: "p1"}); v.State != Free {
		t.Errorf("pod restored at its limit, at a new version: %v, want Free", v.State)
	}

	l = newLimiter()
	l.Restore(s, 2, false, r)
	clk.SetTime(epoch.Add(59 * time.Second))
	if v := l.Check(s); v.State != BackingOff || v.Launches != 2 {
		t.Errorf("pod restored at 2 launches, 59 s after its rejection: %+v, want backing off for its second wait", v)
	}
	clk.SetTime(epoch.Add(time.Minute))
	if v := l.Rejected(s, Rejection{NodeClaim: "nc-3", At: clk.Now()}); v.State != Limited || v.Launches != 3 {
		t.Errorf("one more rejection after a restore at 2: %+v, want Limited at 3", v)
	}

	l = newLimiter()
	l.Restore(s, 6, true, r)
	if v := l.Check(Subject{UID: "b", Group: "g", Version: "v1", GroupVersion: "p1"}); v.State != Limited || !v.ByGroup {
		t.Errorf("another pod of a group restored at its limit: %+v, want Limited by its group", v)
	}
	l.Landed("a")
	if v := l.Check(Subject{UID: "b", Group: "g", Version: "v1", GroupVersion: "p1"}); v.State != Free {
		t.Errorf("after a restored pod of the group landed: %v, want Free", v.State)
	}
	if l.Restore(s, 0, false, r) {
		t.Error("Restore of no launches reported true")
	}
}

func TestOptionsNameTheFlagToFix(t *testing.T) {
	good := Options{Clock: clocktesting.NewFakePassiveClock(epoch), PerPod: 3, PerGroup: 6, Backoff: time.Second, MaxBackoff: time.Minute}
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"per pod", func(o *Options) { o.PerPod = 0 }, "--launch-limit-per-pod is 0: it must be at least 1"},
		{"per group", func(o *Options) { o.PerGroup = -1 }, "--launch-limit-per-group is -1: it must be at least 1"},
		{"backoff", func(o *Options) { o.Backoff = 0 }, "--launch-backoff is 0s: it must be positive"},
		{"cap", func(o *Options) { o.MaxBackoff = time.Millisecond }, "the launch backoff's cap 1ms is below --launch-backoff 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.change(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if _, err := New(good); err != nil {
		t.Errorf("New with good options: %v", err)
	}
}

func TestRejectionReadsAsPluginAndReason(t *testing.T) {
	tests := []struct {
		r    Rejection
		want string
	}{
		{Rejection{Plugin: "DynamicResources", Reason: "cannot allocate all claims"}, "DynamicResources: cannot allocate all claims"},
		{Rejection{Plugin: "RejectLaunched"}, "RejectLaunched"},
		{Rejection{Reason: "node(s) didn't match"}, "node(s) didn't match"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
