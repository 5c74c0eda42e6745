package localaws

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// hexDigits returns n lower-case hex digits derived from the parts. Ids are derived rather
// than random so that a run repeats exactly, which keeps tests and demo transcripts stable.
func hexDigits(n int, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:n]
}

// uuidFrom formats 32 hex digits derived from the parts as a UUID.
func uuidFrom(parts ...string) string {
	h := hexDigits(32, parts...)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newID returns a fresh id such as "i-0123456789abcdef0": prefix, dash, n hex digits.
// s.mu must be held.
func (s *Server) newID(prefix string, n int) string {
	return prefix + "-" + hexDigits(n, s.clusterName, prefix, strconv.FormatUint(s.nextSequence(), 10))
}

// newRequestID returns the id of one API request.
func (s *Server) newRequestID() string {
	return uuidFrom(s.clusterName, "request", strconv.FormatUint(s.requests.Add(1), 10))
}
