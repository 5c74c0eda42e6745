// Package expiring holds values read at a time and reused for a time to live.
package expiring

import "time"

// Value is a value read at a time; the zero Value holds nothing.
type Value[T any] struct {
	// Value is what was read.
	Value T
	// At is when it was read.
	At time.Time
	// Valid is set once a value was read.
	Valid bool
}

// Of is v read at now.
func Of[T any](v T, now time.Time) Value[T] { return Value[T]{Value: v, At: now, Valid: true} }

// Fresh reports whether a value was read less than ttl before now.
func (c Value[T]) Fresh(now time.Time, ttl time.Duration) bool {
	return c.Valid && now.Sub(c.At) < ttl
}
