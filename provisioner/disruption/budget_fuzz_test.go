package disruption

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// FuzzBudget reads a NodePool's budget (nodes, schedule, duration) at any time: either an
// error naming the budget's field, or an allowance within the NodePool's nodes that is the
// budget's exactly when a schedule time (UTC, on the minute) falls in the last duration.
func FuzzBudget(f *testing.F) {
	f.Add("10%", "0 9 * * 1-5", int64(8*time.Hour), int64(1764234000), 7)
	f.Add("0", "@daily", int64(time.Hour), int64(0), 3)
	f.Add("100%", "TZ=", int64(time.Minute), int64(1), 1)
	f.Add("5", "CRON_TZ=Europe/Paris 0 0 * * *", int64(time.Hour), int64(1), 10)
	f.Add("5", "@every 1m", int64(time.Hour), int64(1), 10)
	f.Add("1", "0 0 30 2 *", int64(24*time.Hour), int64(1764234000), 10)
	f.Add("-1", "* * * * *", int64(-1), int64(-62135596800), 0)
	f.Add("101%", "", int64(1<<62), int64(1<<40), -1)
	f.Add("9223372036854775807", "*/0 * * * *", int64(0), int64(0), 1)
	f.Fuzz(func(t *testing.T, count, schedule string, duration, unix int64, total int) {
		total = min(max(total, 0), 1<<20)
		// The clock reads 1970 to about 2242: cron's Next answers the zero time, year 1, when
		// it finds no time, so a schedule time in year 1 cannot be told from none.
		unix = min(max(unix, 0), 1<<33)
		b := karpv1.Budget{Nodes: count, Schedule: ptr.To(schedule), Duration: &metav1.Duration{Duration: time.Duration(duration)}}
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}}
		np.Spec.Disruption.Budgets = []karpv1.Budget{b}
		now := time.Unix(unix, 0)
		allowed, err := Allowed(np, karpv1.DisruptionReasonEmpty, total, 0, now)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "NodePool fuzz spec.disruption.budgets[0]"), "error %q names no budget", err)
			field := strings.TrimPrefix(err.Error(), "NodePool fuzz spec.disruption.budgets[0]")
			require.True(t, strings.HasPrefix(field, ".nodes: ") || strings.HasPrefix(field, ": schedule ") || strings.HasPrefix(field, ": duration "), "error %q names no field", err)
			require.Zero(t, allowed)
			return
		}
		require.GreaterOrEqual(t, allowed, 0)
		require.LessOrEqual(t, allowed, max(total, 0))
		// Check the window by brute force, minute by minute, where that is cheap.
		if duration < 0 || duration > int64(3*time.Hour) {
			return
		}
		sched, err := parseSchedule(schedule)
		require.NoError(t, err)
		open := false
		start := now.UTC().Add(-time.Duration(duration))
		for m := start.Truncate(time.Minute); !m.After(now); m = m.Add(time.Minute) {
			if !m.Before(start) && sched.Next(m.Add(-time.Second)).Equal(m) {
				open = true
				break
			}
		}
		want := total
		if open {
			// A budget's node count is read only while its window is open.
			budget, err := nodes(b.Nodes, total)
			require.NoError(t, err)
			want = min(budget, total)
		}
		require.Equal(t, want, allowed, "window open %v", open)
	})
}
