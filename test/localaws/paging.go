package localaws

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// pageLimits are the bounds an action puts on MaxResults and its page size when none is asked.
type pageLimits struct {
	min, max, fallback int
	// tokenCode and paramCode are the error codes for a bad NextToken and a MaxResults out of
	// range, which differ between services. An empty paramCode means InvalidParameterValue.
	tokenCode string
	paramCode string
}

// tokenPrefix marks the tokens this server issues, so that a token from elsewhere is refused.
const tokenPrefix = "localaws:"

// paginate returns the page of items starting at the token's offset, and the token of the
// next page ("" on the last page). maxResults of 0 means the action's default page size.
func paginate[T any](items []T, maxResults int, token string, limits pageLimits) ([]T, string, error) {
	size := limits.fallback
	if maxResults != 0 {
		if maxResults < limits.min || maxResults > limits.max {
			code := limits.paramCode
			if code == "" {
				code = codeInvalidParameterValue
			}
			return nil, "", newAPIError(code, "Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", maxResults, limits.min, limits.max)
		}
		size = maxResults
	}
	offset := 0
	if token != "" {
		var ok bool
		if offset, ok = decodeToken(token); !ok || offset > len(items) {
			return nil, "", newAPIError(limits.tokenCode, "The token '%s' is invalid.", token)
		}
	}
	end := min(offset+size, len(items))
	next := ""
	if end < len(items) {
		next = encodeToken(end)
	}
	return items[offset:end], next, nil
}

func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + strconv.Itoa(offset)))
}

func decodeToken(token string) (int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !strings.HasPrefix(string(raw), tokenPrefix) {
		return 0, false
	}
	offset, err := strconv.Atoi(strings.TrimPrefix(string(raw), tokenPrefix))
	if err != nil || offset < 0 {
		return 0, false
	}
	return offset, true
}
