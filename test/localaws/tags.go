package localaws

import (
	"sort"
	"strings"
)

// Limits EC2 enforces on tags.
const (
	maxTagsPerResource = 50
	maxTagKeyLength    = 128
	maxTagValueLength  = 256
)

// tag is one key/value tag of a resource.
type tag struct {
	key   string
	value string
}

// xmlTag is a tag on the EC2 wire.
type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

// sortedTags returns the tags ordered by key, so that responses are stable.
func sortedTags(tags ...tag) []tag {
	out := append([]tag(nil), tags...)
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// mergeTags returns base with every tag of add set, replacing values of existing keys.
func mergeTags(base []tag, add []tag) []tag {
	byKey := make(map[string]string, len(base)+len(add))
	for _, t := range base {
		byKey[t.key] = t.value
	}
	for _, t := range add {
		byKey[t.key] = t.value
	}
	out := make([]tag, 0, len(byKey))
	for k, v := range byKey {
		out = append(out, tag{k, v})
	}
	return sortedTags(out...)
}

// tagValue returns the value of the tag with the key.
func tagValue(tags []tag, key string) (string, bool) {
	for _, t := range tags {
		if t.key == key {
			return t.value, true
		}
	}
	return "", false
}

// tagMap returns the tags as a map.
func tagMap(tags []tag) map[string]string {
	out := make(map[string]string, len(tags))
	for _, t := range tags {
		out[t.key] = t.value
	}
	return out
}

// toXMLTags converts tags for an EC2 response.
func toXMLTags(tags []tag) []xmlTag {
	out := make([]xmlTag, 0, len(tags))
	for _, t := range tags {
		out = append(out, xmlTag{Key: t.key, Value: t.value})
	}
	return out
}

// validateTags applies EC2's rules for user tags, counting the tags a resource already has.
func validateTags(existing, add []tag) error {
	for _, t := range add {
		switch {
		case t.key == "" || len(t.key) > maxTagKeyLength:
			return invalidParameter("Tag keys must be 1 to %d characters long, got %q.", maxTagKeyLength, t.key)
		case len(t.value) > maxTagValueLength:
			return invalidParameter("Tag values may be at most %d characters long; the value of %q is longer.", maxTagValueLength, t.key)
		case strings.HasPrefix(strings.ToLower(t.key), "aws:"):
			return invalidParameter("Tag keys starting with 'aws:' are reserved for internal use: %q.", t.key)
		}
	}
	if n := len(mergeTags(existing, add)); n > maxTagsPerResource {
		return newAPIError("TagLimitExceeded", "The maximum number of tags for a resource is %d, the request would leave %d.", maxTagsPerResource, n)
	}
	return nil
}
