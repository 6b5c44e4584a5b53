// Package strictjson decodes a JSON request body into a Go value and refuses
// everything encoding/json lets through by default: duplicate keys (where
// the last one silently wins), field names that match a struct tag only
// when case is ignored ({"QPS": 3} for `json:"qps"`), null where a value is
// required, and numbers that do not fit their field. Its errors name the
// JSON field and the JSON kind that was expected, never a Go type, so they
// can be shown to the API's users as they are.
//
// It makes a first pass over the tokens, guided by the type of the target,
// and decodes with encoding/json only once that pass found nothing wrong;
// a second pass over the decoded value runs the caller's per-type checks
// and turns every -0 into 0.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Error is a body that was refused. Path names the offending JSON field
// ("limits.cpus", "tasks[0].resources"); it is empty for the body as a whole.
type Error struct {
	Path    string
	Message string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "request body " + e.Message
	}
	return e.Path + ": " + e.Message
}

// Check judges a decoded value of one type, found at path. It may change the
// value (a map through SetMapIndex) to normalise it.
type Check func(path string, v reflect.Value) error

// Options are a decoder's rules beyond JSON's own.
type Options struct {
	// Checks run on every value of their type in the decoded body.
	Checks map[reflect.Type]Check
}

// Decode decodes data, which must hold exactly one JSON object, into v, a
// non-nil pointer to a struct.
func Decode(data []byte, v any, opts Options) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Decode needs a non-nil pointer, not %T", v)
	}
	return decode(data, v, rv, opts, json.Valid(data))
}

// decode is Decode with the choice of the first pass's token source: a body
// that is valid JSON (the common case) is read by validTokens, which gives
// the tokens encoding/json's Decoder.Token would give at a fraction of its
// cost; any other goes through the Decoder, whose syntax errors the
// messages quote.
func decode(data []byte, v any, rv reflect.Value, opts Options, valid bool) error {
	var dec tokenSource
	if valid {
		dec = &validTokens{data: data}
	} else {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		dec = d
	}
	w := &walker{dec: dec}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return &Error{Message: "is empty: a JSON object is required"}
		}
		return w.syntaxError(err)
	}
	switch tok {
	case nil:
		return &Error{Message: "is null: a JSON object is required"}
	case json.Delim('{'):
	default:
		return &Error{Message: "is " + describe(tok) + ": a JSON object is required"}
	}
	if err := w.object(rv.Type().Elem(), ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &Error{Message: "has data after the JSON object"}
	}

	// The walk above refused every input encoding/json would fail on, so
	// a failure here is a custom decoder's own complaint.
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		return &Error{Message: plainJSONError(err)}
	}
	return postWalk(rv.Elem(), "", opts)
}

// walker is the first pass: it reads tokens and compares them with the type
// they will be decoded into.
type walker struct {
	dec tokenSource
}

// tokenSource is what the walker reads: *json.Decoder (with UseNumber), or
// validTokens.
type tokenSource interface {
	Token() (json.Token, error)
	More() bool
	// Decode reads the next value whole; v is a *json.RawMessage.
	Decode(v any) error
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// value checks the next JSON value against t.
func (w *walker) value(t reflect.Type, path string) error {
	if decodesItself(t) {
		return w.custom(t, path)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.syntaxError(err)
	}
	if tok == nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			return nil // absent, as if the field were left out
		}
		return &Error{Path: path, Message: "null is not allowed here: want " + kindOf(t) + " (or leave the field out)"}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return w.skip(tok)
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch {
		case tok == '{' && t.Kind() == reflect.Struct:
			return w.object(t, path)
		case tok == '{' && t.Kind() == reflect.Map:
			return w.mapValue(t, path)
		case tok == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			return w.array(t, path)
		}
	case string:
		if t.Kind() == reflect.String {
			return nil
		}
	case bool:
		if t.Kind() == reflect.Bool {
			return nil
		}
	case json.Number:
		if e := number(t, tok); e != "" {
			return &Error{Path: path, Message: e}
		}
		return nil
	}
	return &Error{Path: path, Message: "want " + kindOf(t) + ", not " + describe(tok)}
}

// decodesItself reports whether t (or what it points to) has its own
// UnmarshalJSON.
func decodesItself(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return reflect.PointerTo(t).Implements(unmarshalerType)
}

// custom hands a value whose type decodes itself to its own decoder, so
// that its complaint comes with the path.
func (w *walker) custom(t reflect.Type, path string) error {
	var raw json.RawMessage
	if err := w.dec.Decode(&raw); err != nil {
		return w.syntaxError(err)
	}
	if t.Kind() == reflect.Pointer {
		if string(raw) == "null" {
			return nil
		}
		t = t.Elem()
	} else if string(raw) == "null" && t != reflect.TypeFor[json.RawMessage]() {
		return &Error{Path: path, Message: "null is not allowed here (leave the field out)"}
	}
	if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
		return &Error{Path: path, Message: plainJSONError(err)}
	}
	return nil
}

// object checks the members of an object whose '{' was read.
func (w *walker) object(t reflect.Type, path string) error {
	fields := fieldsOf(t)
	seen := map[string]bool{}
	for w.dec.More() {
		key, err := w.key()
		if err != nil {
			return err
		}
		at := Join(path, key)
		if seen[key] {
			return &Error{Path: at, Message: "appears more than once"}
		}
		seen[key] = true
		f, ok := fields.byName[key]
		if !ok {
			msg := "unknown field"
			if name, ok := fields.byFold[strings.ToLower(key)]; ok {
				msg += fmt.Sprintf(" (field names are case-sensitive: did you mean %q?)", name)
			} else if len(fields.names) > 0 {
				msg += " (known: " + strings.Join(fields.names, ", ") + ")"
			}
			return &Error{Path: at, Message: msg}
		}
		if err := w.value(f.typ, at); err != nil {
			return err
		}
	}
	return w.closing()
}

// mapValue checks the entries of a map whose '{' was read.
func (w *walker) mapValue(t reflect.Type, path string) error {
	seen := map[string]bool{}
	for w.dec.More() {
		key, err := w.key()
		if err != nil {
			return err
		}
		at := Join(path, key)
		if seen[key] {
			return &Error{Path: at, Message: "appears more than once"}
		}
		seen[key] = true
		if err := w.value(t.Elem(), at); err != nil {
			return err
		}
	}
	return w.closing()
}

// array checks the elements of an array whose '[' was read.
func (w *walker) array(t reflect.Type, path string) error {
	for i := 0; w.dec.More(); i++ {
		if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	return w.closing()
}

func (w *walker) key() (string, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return "", w.syntaxError(err)
	}
	key, ok := tok.(string)
	if !ok {
		return "", &Error{Message: "is not valid JSON: an object key must be a string"}
	}
	return key, nil
}

// closing reads the '}' or ']' that ends the current object or array.
func (w *walker) closing() error {
	if _, err := w.dec.Token(); err != nil {
		return w.syntaxError(err)
	}
	return nil
}

// skip reads the rest of a value whose first token was tok.
func (w *walker) skip(tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := w.dec.Token()
		if err != nil {
			return w.syntaxError(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func (w *walker) syntaxError(err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Message: "ends in the middle of the JSON value"}
	case errors.As(err, &syntax):
		return &Error{Message: fmt.Sprintf("is not valid JSON at byte %d: %s", syntax.Offset, syntax.Error())}
	}
	return &Error{Message: "is not valid JSON: " + plainJSONError(err)}
}

// number reports why n cannot be decoded into t ("" when it can).
func number(t reflect.Type, n json.Number) string {
	s := string(n)
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		if _, err := strconv.ParseFloat(s, t.Bits()); err != nil {
			return fmt.Sprintf("%s is out of range for a number", shorten(s))
		}
		return ""
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(s, 10, t.Bits()); err != nil {
			lo, hi := int64(math.MinInt64)>>(64-t.Bits()), int64(math.MaxInt64)>>(64-t.Bits())
			return intProblem(s, float64(lo), float64(hi), strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10))
		}
		return ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err := strconv.ParseUint(s, 10, t.Bits()); err != nil {
			hi := uint64(math.MaxUint64) >> (64 - t.Bits())
			return intProblem(s, 0, float64(hi), "0", strconv.FormatUint(hi, 10))
		}
		return ""
	}
	return "want " + kindOf(t) + ", not the number " + shorten(s)
}

// intProblem says why s is not a whole number from lo to hi.
func intProblem(s string, lo, hi float64, loText, hiText string) string {
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err == nil && f != math.Trunc(f):
		return fmt.Sprintf("want a whole number, not %s", shorten(s))
	case err == nil && f >= lo && f <= hi:
		return fmt.Sprintf("want a whole number written without a fraction or exponent, not %s", shorten(s))
	}
	return fmt.Sprintf("%s is out of range: want a whole number from %s to %s", shorten(s), loText, hiText)
}

// kindOf names the JSON kind a Go type is decoded from.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return "a valid value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

// describe names the JSON value a token starts.
func describe(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "the string " + strconv.Quote(shorten(tok))
	case bool:
		return strconv.FormatBool(tok)
	case json.Number:
		return "the number " + shorten(string(tok))
	case nil:
		return "null"
	}
	return "a JSON value"
}

// shorten bounds what an error message repeats of the input.
func shorten(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

var goTypeInMessage = regexp.MustCompile(`Go (struct field|value of type) [^ ]+( of type [^ ]+)?`)

// plainJSONError is an encoding/json or custom decoder error without the Go
// types it names.
func plainJSONError(err error) string {
	var typeError *json.UnmarshalTypeError
	if errors.As(err, &typeError) {
		return "want " + kindOf(typeError.Type) + ", not " + typeError.Value
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return goTypeInMessage.ReplaceAllString(msg, "this field")
}

// Join appends a key to a path: "limits" + "cpus" = "limits.cpus"; keys that
// are not plain words are quoted.
func Join(path, key string) string {
	if !plainKey(key) {
		return fmt.Sprintf("%s[%s]", path, strconv.Quote(shorten(key)))
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// plainKey reports whether key is a plain word: [A-Za-z0-9_-]+. (A loop,
// not a regexp: every key of every body passes here.)
func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// --- struct fields ---

type field struct {
	typ   reflect.Type
	index []int
}

type structFields struct {
	byName map[string]field
	byFold map[string]string // lower-case name → exact name
	names  []string          // sorted, for messages
}

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf lists the JSON names of a struct's fields, as encoding/json
// names them: the tag's name, else the Go name; fields of embedded structs
// without a tag are promoted unless an outer field has their name.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string]field{}, byFold: map[string]string{}}
	collectFields(t, nil, sf, map[reflect.Type]bool{})
	for name := range sf.byName {
		sf.names = append(sf.names, name)
		sf.byFold[strings.ToLower(name)] = name
	}
	sort.Strings(sf.names)
	fieldCache.Store(t, sf)
	return sf
}

func collectFields(t reflect.Type, index []int, sf *structFields, visiting map[reflect.Type]bool) {
	if visiting[t] {
		return
	}
	visiting[t] = true
	var embedded []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
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
				embedded = append(embedded, f)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := sf.byName[name]; !taken {
			sf.byName[name] = field{typ: f.Type, index: append(append([]int(nil), index...), i)}
		}
	}
	for _, f := range embedded {
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		collectFields(ft, append(append([]int(nil), index...), f.Index...), sf, visiting)
	}
}

// --- second pass ---

// postWalk runs the checks on the decoded value and turns -0 into 0.
func postWalk(v reflect.Value, path string, opts Options) error {
	if check, ok := opts.Checks[v.Type()]; ok {
		if err := check(path, v); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return e
			}
			return &Error{Path: path, Message: err.Error()}
		}
	}
	if v.Type() != reflect.TypeFor[json.RawMessage]() && reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		return nil // decodes itself; its type's check above is the only one
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return postWalk(v.Elem(), path, opts)
		}
	case reflect.Struct:
		fields := fieldsOf(v.Type())
		for _, name := range fields.names {
			fv, err := v.FieldByIndexErr(fields.byName[name].index)
			if err != nil {
				continue // behind a nil embedded pointer
			}
			if err := postWalk(fv, Join(path, name), opts); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := postWalk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), opts); err != nil {
				return err
			}
		}
	case reflect.Map:
		if plainFloats(v.Type(), opts) {
			// Nothing to check in an element, only -0 to turn into 0: the
			// generic walk below copies and stores back every entry.
			iter := v.MapRange()
			for iter.Next() {
				if iter.Value().Float() == 0 {
					v.SetMapIndex(iter.Key(), reflect.Zero(v.Type().Elem()))
				}
			}
			return nil
		}
		keys := v.MapKeys()
		name := func(k reflect.Value) string { return fmt.Sprint(k) }
		if v.Type().Key().Kind() == reflect.String {
			name = reflect.Value.String
		}
		sort.Slice(keys, func(i, j int) bool { return name(keys[i]) < name(keys[j]) })
		for _, k := range keys {
			// Map values are not addressable: work on a copy, store it back.
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(v.MapIndex(k))
			if err := postWalk(elem, Join(path, name(k)), opts); err != nil {
				return err
			}
			v.SetMapIndex(k, elem)
		}
	case reflect.Float32, reflect.Float64:
		if v.Float() == 0 && v.CanSet() {
			v.SetFloat(0) // -0 is read as 0
		}
	}
	return nil
}

// plainFloats reports whether t is a map whose elements are plain numbers
// that no check looks at (api.Resources: its check runs on the whole map).
func plainFloats(t reflect.Type, opts Options) bool {
	e := t.Elem()
	if k := e.Kind(); k != reflect.Float64 && k != reflect.Float32 {
		return false
	}
	_, checked := opts.Checks[e]
	return !checked && !reflect.PointerTo(e).Implements(unmarshalerType)
}
