package images

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Commit is the commit images are built from.
type Commit struct {
	// Revision is its hash.
	Revision string
	// Time is its committer time, which the images are stamped as created at.
	Time time.Time
}

// HeadCommit returns the commit checked out in the git work tree dir.
func HeadCommit(ctx context.Context, dir string) (Commit, error) {
	cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%H %ct")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Commit{}, fmt.Errorf("reading the commit checked out in %s: %w: %s", dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	rev, ct, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok {
		return Commit{}, fmt.Errorf("reading the commit checked out in %s: unexpected git output %q", dir, out)
	}
	t, err := ParseEpoch(ct)
	if err != nil {
		return Commit{}, fmt.Errorf("reading the commit checked out in %s: %w", dir, err)
	}
	return Commit{Revision: rev, Time: t}, nil
}

// ParseEpoch reads seconds since the Unix epoch, as SOURCE_DATE_EPOCH holds them.
func ParseEpoch(s string) (time.Time, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("%q is not a number of seconds since the Unix epoch", s)
	}
	return time.Unix(n, 0).UTC(), nil
}
