package v1

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want string
	}{
		{720 * time.Hour, "720h"},
		{90 * time.Minute, "1h30m"},
		{30 * time.Minute, "30m"},
		{45 * time.Second, "45s"},
		{time.Hour + 5*time.Second, "1h0m5s"},
	} {
		if got := ShortDuration(tt.in); got != tt.want {
			t.Errorf("ShortDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
