package disruption

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// defaultBudget applies to NodePools that set no budgets.
var defaultBudget = karpv1.Budget{Nodes: "10%"}

// cronParser reads budget schedules: five fields or a descriptor such as @daily.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSchedule reads a budget's schedule in UTC, as Karpenter does: the parser would
// otherwise read it in the process's local time zone, or in one the schedule names (and
// panic on a TZ= prefix without a schedule after it). @every is refused: its times follow
// the moment it is asked, not the clock, so its window would always be open.
func parseSchedule(schedule string) (cron.Schedule, error) {
	if strings.HasPrefix(strings.TrimSpace(schedule), "@every") {
		return nil, fmt.Errorf("schedule %q: @every is not a time of day; write five cron fields or @hourly, @daily, @weekly, @monthly, @yearly", schedule)
	}
	sched, err := cronParser.Parse("TZ=UTC " + schedule)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	return sched, nil
}

// Allowed is how many more of a NodePool's nodes may be disrupted for reason now: the
// smallest of its active budgets that cover the reason, less the nodes already being
// disrupted. total is the NodePool's node count.
func Allowed(np *karpv1.NodePool, reason karpv1.DisruptionReason, total, disrupting int, now time.Time) (int, error) {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{defaultBudget}
	}
	allowed := math.MaxInt
	for i, b := range budgets {
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		active, err := activeAt(b, now)
		if err != nil {
			return 0, fmt.Errorf("NodePool %s spec.disruption.budgets[%d]: %w", np.Name, i, err)
		}
		if !active {
			continue
		}
		n, err := nodes(b.Nodes, total)
		if err != nil {
			return 0, fmt.Errorf("NodePool %s spec.disruption.budgets[%d].nodes: %w", np.Name, i, err)
		}
		allowed = min(allowed, n)
	}
	if allowed == math.MaxInt {
		// No budget covers the reason at this time: nothing limits it.
		allowed = total
	}
	return max(0, min(allowed, total)-disrupting), nil
}

// nodes reads a budget's node count: a number, or a percentage of total rounded up, as
// Karpenter does (so 10% of 5 nodes is 1).
func nodes(value string, total int) (int, error) {
	if pct, ok := strings.CutSuffix(value, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 0 || p > 100 {
			return 0, fmt.Errorf("%q is not a percentage from 0%% to 100%%", value)
		}
		return int(math.Ceil(float64(total) * float64(p) / 100)), nil
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is neither a node count nor a percentage", value)
	}
	return n, nil
}

// activeAt reports whether a budget applies at t: always without a schedule, otherwise
// within Duration of the schedule's latest time at or before t.
func activeAt(b karpv1.Budget, t time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil {
		return false, fmt.Errorf("schedule %q has no duration; set both", *b.Schedule)
	}
	if b.Duration.Duration < 0 {
		return false, fmt.Errorf("duration %s must not be negative", b.Duration.Duration)
	}
	sched, err := parseSchedule(*b.Schedule)
	if err != nil {
		return false, err
	}
	t = t.UTC()
	// The latest activation at or before t is the first one at or after t-duration, if it is
	// not after t; Next gives the first whole second strictly after its argument. A
	// schedule that never fires (30 February) has no next time: never active.
	next := sched.Next(t.Add(-b.Duration.Duration).Add(-time.Nanosecond))
	return !next.IsZero() && !next.After(t), nil
}

// withinBudget keeps candidates, in order, while their NodePool's budget lasts, at most limit.
func withinBudget(candidates []Candidate, reason karpv1.DisruptionReason, budget Budget, limit int) []Candidate {
	left := map[string]int{}
	var out []Candidate
	for _, cand := range candidates {
		if len(out) == limit {
			break
		}
		n, seen := left[cand.NodePool]
		if !seen {
			n = budget(cand.NodePool, reason)
		}
		if n <= 0 {
			left[cand.NodePool] = 0
			continue
		}
		left[cand.NodePool] = n - 1
		out = append(out, cand)
	}
	return out
}

// wholeGroups takes groups in order while every NodePool's budget and the cap allow all of
// a group, skipping those that do not fit.
func wholeGroups(groups [][]Candidate, budget Budget, limit int) []Candidate {
	left := map[string]int{}
	var out []Candidate
	for _, g := range groups {
		if len(out)+len(g) > limit {
			continue
		}
		need := map[string]int{}
		for _, cand := range g {
			need[cand.NodePool]++
		}
		fits := true
		for pool, n := range need {
			if _, seen := left[pool]; !seen {
				left[pool] = budget(pool, karpv1.DisruptionReasonUnderutilized)
			}
			fits = fits && n <= left[pool]
		}
		if !fits {
			continue
		}
		for pool, n := range need {
			left[pool] -= n
		}
		out = append(out, g...)
	}
	return out
}

// blockedKey is a NodePool and a disruption reason.
type blockedKey struct {
	nodePool string
	reason   karpv1.DisruptionReason
}

// budgetBlocked counts, per NodePool and reason, the candidates a pass would disrupt for
// that reason (drifted; empty; consolidatable with pods) and whether the NodePool's budgets
// allow any of them now: the count is 0 where they do.
func budgetBlocked(candidates []Candidate, budget Budget) map[blockedKey]int {
	out := map[blockedKey]int{}
	allowed := map[blockedKey]bool{}
	for _, cand := range candidates {
		var reason karpv1.DisruptionReason
		switch {
		case cand.Drifted:
			reason = karpv1.DisruptionReasonDrifted
		case cand.MayRemoveEmpty && len(cand.Pods) == 0:
			reason = karpv1.DisruptionReasonEmpty
		case cand.MayConsolidate && len(cand.Pods) > 0:
			reason = karpv1.DisruptionReasonUnderutilized
		default:
			continue
		}
		key := blockedKey{nodePool: cand.NodePool, reason: reason}
		ok, seen := allowed[key]
		if !seen {
			ok = budget(cand.NodePool, reason) > 0
			allowed[key] = ok
			out[key] = 0
		}
		if !ok {
			out[key]++
		}
	}
	return out
}
