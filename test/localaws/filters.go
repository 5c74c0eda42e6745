package localaws

import "strings"

// filter is one EC2 Filter: a name and values, any of which may match.
type filter struct {
	name   string
	values []string
}

// filterFields describes how a kind of resource is filtered: the values each supported filter
// name sees on a resource, and the resource's tags for tag:KEY and tag-key filters (nil when
// the resource has no tags).
type filterFields[T any] struct {
	fields map[string]func(T) []string
	tags   func(T) []tag
}

// compile checks the filter names and returns a predicate that holds when every filter has a
// value matching one of the resource's values. Values may use the * and ? wildcards.
func (ff filterFields[T]) compile(filters []filter) (func(T) bool, error) {
	type compiled struct {
		values  func(T) []string
		pattern []string
	}
	var checks []compiled
	for _, f := range filters {
		c := compiled{pattern: f.values}
		switch {
		case ff.tags != nil && strings.HasPrefix(f.name, "tag:"):
			key := strings.TrimPrefix(f.name, "tag:")
			c.values = func(v T) []string {
				if value, ok := tagValue(ff.tags(v), key); ok {
					return []string{value}
				}
				return nil
			}
		case ff.tags != nil && f.name == "tag-key":
			c.values = func(v T) []string {
				var keys []string
				for _, t := range ff.tags(v) {
					keys = append(keys, t.key)
				}
				return keys
			}
		default:
			values, ok := ff.fields[f.name]
			if !ok {
				return nil, invalidParameter("The filter '%s' is invalid", f.name)
			}
			c.values = values
		}
		checks = append(checks, c)
	}
	return func(v T) bool {
		for _, c := range checks {
			if !anyMatch(c.pattern, c.values(v)) {
				return false
			}
		}
		return true
	}, nil
}

// anyMatch reports whether any of the values matches any of the patterns.
func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if wildcardMatch(p, v) {
				return true
			}
		}
	}
	return false
}

// wildcardMatch matches s against an EC2 filter pattern: * is any run of characters, ? is one
// character, and a backslash escapes the next character.
func wildcardMatch(pattern, s string) bool {
	p, str := []rune(pattern), []rune(s)
	// Iterative matching with backtracking to the last star keeps this linear in practice.
	pi, si, starP, starS := 0, 0, -1, 0
	for si < len(str) {
		switch {
		case pi < len(p) && p[pi] == '*':
			starP, starS = pi, si
			pi++
		case pi < len(p) && p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == str[si]:
			pi += 2
			si++
		case pi < len(p) && p[pi] != '\\' && (p[pi] == '?' || p[pi] == str[si]):
			pi++
			si++
		case starP >= 0:
			starS++
			pi, si = starP+1, starS
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// filterSlice returns the items the predicate keeps.
func filterSlice[T any](items []T, keep func(T) bool) []T {
	var out []T
	for _, item := range items {
		if keep(item) {
			out = append(out, item)
		}
	}
	return out
}

// oneValue wraps a single filter value.
func oneValue(v string) []string { return []string{v} }

// boolValue renders a boolean the way EC2 filters compare it.
func boolValue(b bool) []string {
	if b {
		return []string{"true"}
	}
	return []string{"false"}
}
