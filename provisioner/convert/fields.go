package convert

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// fields reads one map of a document and remembers which keys it read, so that every key
// left unread is reported as not carried over instead of being dropped silently.
type fields struct {
	path string // the map's field path, "spec" or "spec.provider"; empty for the document
	m    map[string]any
	read map[string]bool
	doc  *document
}

func newFields(doc *document, path string, m map[string]any) *fields {
	return &fields{path: path, m: m, read: map[string]bool{}, doc: doc}
}

// at is the path of key in this map.
func (f *fields) at(key string) string {
	if f.path == "" {
		return key
	}
	return f.path + "." + key
}

// get reads key; a null value counts as absent.
func (f *fields) get(key string) (any, bool) {
	f.read[key] = true
	v, ok := f.m[key]
	return v, ok && v != nil
}

// has says whether key is set, without reading it.
func (f *fields) has(key string) bool {
	v, ok := f.m[key]
	return ok && v != nil
}

// sub reads key as a map; a missing key is an empty map.
func (f *fields) sub(key string) *fields {
	v, ok := f.get(key)
	m, isMap := v.(map[string]any)
	if ok && !isMap {
		f.doc.fail(f.at(key), fmt.Sprintf("is %s, want a map", describe(v)))
	}
	if m == nil {
		m = map[string]any{}
	}
	return newFields(f.doc, f.at(key), m)
}

func (f *fields) str(key string) (string, bool) {
	v, ok := f.get(key)
	if !ok {
		return "", false
	}
	s, isString := v.(string)
	if !isString {
		f.doc.fail(f.at(key), fmt.Sprintf("is %s, want a string", describe(v)))
		return "", false
	}
	return s, true
}

func (f *fields) integer(key string) (int64, bool) {
	v, ok := f.get(key)
	if !ok {
		return 0, false
	}
	// sigs.k8s.io/yaml decodes through JSON, so numbers arrive as float64.
	n, isNumber := v.(float64)
	if !isNumber || n != float64(int64(n)) {
		f.doc.fail(f.at(key), fmt.Sprintf("is %s, want an integer", describe(v)))
		return 0, false
	}
	return int64(n), true
}

func (f *fields) boolean(key string) (bool, bool) {
	v, ok := f.get(key)
	if !ok {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		f.doc.fail(f.at(key), fmt.Sprintf("is %s, want true or false", describe(v)))
		return false, false
	}
	return b, true
}

// stringMap reads key as a map of strings.
func (f *fields) stringMap(key string) map[string]string {
	var out map[string]string
	f.decode(key, &out)
	return out
}

// decode reads key into a typed value. Fields of the input the type does not have are
// reported as not carried over, each with its path.
func (f *fields) decode(key string, into any) bool {
	v, ok := f.get(key)
	if !ok {
		return false
	}
	return f.doc.decodeValue(f.at(key), v, into)
}

// unread reports every key of the map that no conversion rule read.
func (f *fields) unread(why string) {
	keys := make([]string, 0, len(f.m))
	for k := range f.m {
		if !f.read[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		f.doc.dropped(f.at(k), why)
	}
}

// decodeValue decodes v into a typed value and reports the parts of v the value lost.
func (d *document) decodeValue(path string, v, into any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		d.fail(path, err.Error())
		return false
	}
	if err := json.Unmarshal(data, into); err != nil {
		d.fail(path, fmt.Sprintf("cannot be read as %s: %v", typeName(into), err))
		return false
	}
	back, err := json.Marshal(into)
	if err != nil {
		d.fail(path, err.Error())
		return false
	}
	var got any
	if err := json.Unmarshal(back, &got); err != nil {
		d.fail(path, err.Error())
		return false
	}
	for _, lost := range lostFields(path, v, got) {
		d.dropped(lost, "unknown field: the v1 API has no such field")
	}
	return true
}

// lostFields lists the paths of non-empty values in in that out lacks.
func lostFields(path string, in, out any) []string {
	var lost []string
	switch in := in.(type) {
	case map[string]any:
		outMap, _ := out.(map[string]any)
		keys := make([]string, 0, len(in))
		for k := range in {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := path + "." + k
			o, ok := outMap[k]
			if !ok {
				if !isEmpty(in[k]) {
					lost = append(lost, sub)
				}
				continue
			}
			lost = append(lost, lostFields(sub, in[k], o)...)
		}
	case []any:
		outList, _ := out.([]any)
		for i, e := range in {
			var o any
			if i < len(outList) {
				o = outList[i]
			}
			lost = append(lost, lostFields(fmt.Sprintf("%s[%d]", path, i), e, o)...)
		}
	}
	return lost
}

func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.String:
		return rv.Len() == 0
	}
	return rv.IsZero()
}

func describe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case float64:
		return fmt.Sprintf("the number %v", v)
	case bool:
		return fmt.Sprintf("%v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}

func typeName(v any) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return strings.TrimPrefix(t.String(), "*")
	}
	return t.Name()
}
