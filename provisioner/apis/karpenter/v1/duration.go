package v1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Never is the value of a NillableDuration that is turned off.
const Never = "Never"

// NillableDuration is a duration that may also be "Never" (nil Duration).
type NillableDuration struct {
	// Duration is nil when the value is "Never".
	Duration *time.Duration `json:"-"`
}

// MustParseNillableDuration parses s ("30s", "720h", "Never") and panics on malformed input.
// It is meant for constants and tests.
func MustParseNillableDuration(s string) NillableDuration {
	var d NillableDuration
	if err := d.parse(s); err != nil {
		panic(err)
	}
	return d
}

// UnmarshalJSON accepts a Go duration string or "Never".
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding duration: %w", err)
	}
	return d.parse(s)
}

func (d *NillableDuration) parse(s string) error {
	if s == Never {
		d.Duration = nil
		return nil
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parsing duration %q (want a Go duration like \"30s\" or \"Never\"): %w", s, err)
	}
	d.Duration = &parsed
	return nil
}

// MarshalJSON writes "Never" for a nil Duration.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// String is the duration in the form the API accepts.
func (d NillableDuration) String() string {
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}

// ShortDuration writes a duration as users write one in a NodePool: 720h rather than
// 720h0m0s, 30m rather than 30m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
