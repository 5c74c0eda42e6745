// Package jsonhash identifies API values by a digest of their JSON form. Object members
// whose value is zero (null, false, 0, "", {} or []) are left out before hashing, so that
// an unset optional field and one set to its zero value hash alike, and a field added to an
// API type hashes existing objects as before until it is set.
package jsonhash

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
)

// Sum returns the first 8 bytes of the SHA-256 of v's JSON, zero members left out, in hex.
// It panics when v cannot be encoded, which API types always can.
func Sum(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T for its hash: %v", v, err))
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var tree any
	if err := d.Decode(&tree); err != nil {
		panic(fmt.Sprintf("decoding %T for its hash: %v", v, err))
	}
	// Maps encode with their keys sorted: the encoding is canonical.
	b, err = json.Marshal(prune(tree))
	if err != nil {
		panic(fmt.Sprintf("encoding %T for its hash: %v", v, err))
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:8])
}

// prune drops the zero members of the objects in v. Array elements stay, zero or not: their
// position counts.
func prune(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, member := range v {
			if member = prune(member); isZero(member) {
				delete(v, k)
			} else {
				v[k] = member
			}
		}
	case []any:
		for i := range v {
			v[i] = prune(v[i])
		}
	}
	return v
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 0
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}
