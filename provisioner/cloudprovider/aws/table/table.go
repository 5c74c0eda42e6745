// Package table reads the data tables Tailor embeds and reads from files (the EC2 catalog,
// the trunking table, the node cost table): one JSON value each, decoded strictly. A field
// the Go type has no place for, a value of the wrong kind and anything after the value are
// errors, each naming the line, column and path of the offending value and what to do, so
// that a misspelt field is reported rather than silently read as zero.
package table

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decode reads r to its end and decodes what it holds, one JSON value, into v, a non-nil
// pointer, strictly. A field missing from the data is left zero: which fields a table must
// have is for its own validation.
func Decode(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		if _, tokErr := dec.Token(); !errors.Is(tokErr, io.EOF) {
			err = errors.New("unexpected data after the JSON value")
		}
	}
	if err == nil {
		return nil
	}
	// The decoder's errors say what but seldom where: read the data again, this time
	// following the type, to find the first value that is wrong.
	if located := check(data, reflect.TypeOf(v).Elem()); located != nil {
		return located
	}
	return err
}

// checker walks the data's tokens alongside the Go type they decode into.
type checker struct {
	data []byte
	dec  *json.Decoder
}

// check returns the error of the first value in data that does not decode into t, nil when
// there is none.
func check(data []byte, t reflect.Type) error {
	c := &checker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	c.dec.UseNumber()
	if len(bytes.TrimSpace(data)) == 0 {
		return c.errorAt(0, "", "empty: want one JSON value")
	}
	if err := c.value(t, ""); err != nil {
		return err
	}
	at := c.next()
	if _, err := c.dec.Token(); !errors.Is(err, io.EOF) {
		return c.errorAt(at, "", "unexpected data after the JSON value: a table is one JSON value")
	}
	return nil
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// value checks the next value, which decodes into t at path.
func (c *checker) value(t reflect.Type, path string) error {
	at := c.next()
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		var raw json.RawMessage
		if err := c.dec.Decode(&raw); err != nil {
			return c.syntaxError(at, err)
		}
		if nullable && string(raw) == "null" {
			return nil
		}
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			return c.errorAt(at, path, err.Error())
		}
		return nil
	}
	tok, err := c.dec.Token()
	if err != nil {
		return c.syntaxError(at, err)
	}
	if tok == nil || t.Kind() == reflect.Interface {
		return c.skip(tok, at)
	}
	if d, ok := tok.(json.Delim); ok {
		switch {
		case d == '{' && t.Kind() == reflect.Struct:
			return c.object(func(key string, at int64) (reflect.Type, string, error) {
				f, ok := field(t, key)
				if !ok {
					return nil, "", c.errorAt(at, join(path, key), "unknown field"+suggest(key, fieldNames(t)))
				}
				return f.Type, join(path, key), nil
			})
		case d == '{' && t.Kind() == reflect.Map:
			return c.object(func(key string, _ int64) (reflect.Type, string, error) {
				return t.Elem(), fmt.Sprintf("%s[%q]", path, key), nil
			})
		case d == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			for i := 0; c.dec.More(); i++ {
				if err := c.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
			return c.end()
		}
		return c.errorAt(at, path, fmt.Sprintf("%s, where %s is wanted", describe(tok), want(t)))
	}
	if _, ok := tok.(string); ok && reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	if problem := scalar(tok, t); problem != "" {
		return c.errorAt(at, path, problem)
	}
	return nil
}

// object checks the members of an object whose '{' was read; member gives each key's type
// and path, or the error of a key that has no place.
func (c *checker) object(member func(key string, at int64) (reflect.Type, string, error)) error {
	for c.dec.More() {
		at := c.next()
		tok, err := c.dec.Token()
		if err != nil {
			return c.syntaxError(at, err)
		}
		t, path, err := member(tok.(string), at)
		if err != nil {
			return err
		}
		if err := c.value(t, path); err != nil {
			return err
		}
	}
	return c.end()
}

// end reads the '}' or ']' that closes an object or list.
func (c *checker) end() error {
	at := c.next()
	if _, err := c.dec.Token(); err != nil {
		return c.syntaxError(at, err)
	}
	return nil
}

// skip reads the rest of a value that is not checked, tok its first token, read at at.
func (c *checker) skip(tok json.Token, at int64) error {
	for depth := nesting(tok); depth > 0; {
		inner, err := c.dec.Token()
		if err != nil {
			return c.syntaxError(at, err)
		}
		depth += nesting(inner)
	}
	return nil
}

// nesting is 1 for a token that opens an object or list, -1 for one that closes it, else 0.
func nesting(tok json.Token) int {
	switch tok {
	case json.Delim('{'), json.Delim('['):
		return 1
	case json.Delim('}'), json.Delim(']'):
		return -1
	}
	return 0
}

// scalar is what is wrong with the string, number or boolean tok as a value of t, "" when
// nothing is.
func scalar(tok json.Token, t reflect.Type) string {
	switch v := tok.(type) {
	case json.Number:
		var err error
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, err = strconv.ParseInt(string(v), 10, t.Bits())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			_, err = strconv.ParseUint(string(v), 10, t.Bits())
		case reflect.Float32, reflect.Float64:
			_, err = strconv.ParseFloat(string(v), t.Bits())
		default:
			return fmt.Sprintf("%s, where %s is wanted", describe(tok), want(t))
		}
		if err != nil {
			return fmt.Sprintf("%s is not %s", v, want(t))
		}
	case string:
		if t.Kind() != reflect.String && (t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Uint8) {
			return fmt.Sprintf("%s, where %s is wanted", describe(tok), want(t))
		}
	case bool:
		if t.Kind() != reflect.Bool {
			return fmt.Sprintf("%s, where %s is wanted", describe(tok), want(t))
		}
	}
	return ""
}

// describe names the JSON value tok begins.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "a list"
	case json.Number:
		return "the number " + string(v)
	case string:
		return "the string " + strconv.Quote(v)
	case bool:
		return strconv.FormatBool(v)
	}
	return "null"
}

// want names the JSON values that decode into t.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a whole number (%s)", t.Kind())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number, not negative (%s)", t.Kind())
	case reflect.Float32, reflect.Float64:
		return fmt.Sprintf("a number (%s)", t.Kind())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return t.String()
}

// field is the field of struct type t that the JSON key decodes into: the one of that name,
// else one of that name but for case, as encoding/json matches them.
func field(t reflect.Type, key string) (reflect.StructField, bool) {
	fields := jsonFields(t)
	for _, f := range fields {
		if f.name == key {
			return f.StructField, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f.StructField, true
		}
	}
	return reflect.StructField{}, false
}

// namedField is a struct field and its JSON name.
type namedField struct {
	reflect.StructField
	name string
}

// jsonFields are the fields of struct type t that encoding/json decodes into, those of
// embedded structs included.
func jsonFields(t reflect.Type) []namedField {
	var out []namedField
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, namedField{StructField: f, name: name})
	}
	return out
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for _, f := range jsonFields(t) {
		names = append(names, f.name)
	}
	return names
}

// suggest is the fix for an unknown field: the known field it is likely a misspelling of,
// else the list of the known fields.
func suggest(key string, known []string) string {
	best, bestDistance := "", 3
	for _, name := range known {
		if d := distance(strings.ToLower(key), strings.ToLower(name)); d < bestDistance {
			best, bestDistance = name, d
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	slices.Sort(known)
	return "; the fields here are " + strings.Join(known, ", ")
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// join is the path of a struct field below path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// next is the offset of the next token: past the white space, and the ',' or ':' that the
// decoder reads with the token.
func (c *checker) next() int64 {
	i := c.dec.InputOffset()
	for i < int64(len(c.data)) && strings.IndexByte(" \t\r\n,:", c.data[i]) >= 0 {
		i++
	}
	return i
}

// syntaxError is err, met reading the value at at, as an error that says where.
func (c *checker) syntaxError(at int64, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Error() != "unexpected end of JSON input" {
		return c.errorAt(max(se.Offset-1, 0), "", se.Error()+": the table is not valid JSON")
	}
	if se != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return c.errorAt(int64(len(c.data)), "", "the data ends inside a value: the table is cut short")
	}
	return c.errorAt(at, "", err.Error())
}

// valueError is a value of a table that does not decode.
type valueError struct {
	// Line and Column (in characters) are where the value starts, from 1.
	Line, Column int
	// Path is the value's place in the table, as instanceTypes[3].vcpu; empty for the
	// table as a whole.
	Path string
	// Problem is what is wrong and how to put it right.
	Problem string
}

func (e *valueError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Problem)
	}
	return fmt.Sprintf("line %d, column %d: %s: %s", e.Line, e.Column, e.Path, e.Problem)
}

func (c *checker) errorAt(offset int64, path, problem string) error {
	offset = min(offset, int64(len(c.data)))
	before := c.data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	column := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return &valueError{Line: line, Column: column, Path: path, Problem: problem}
}
