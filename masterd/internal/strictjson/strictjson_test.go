package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

type amounts map[string]float64

// level decodes itself, as api.Limit does: a number or the string "max".
type level struct {
	value float64
	max   bool
}

func (l *level) UnmarshalJSON(b []byte) error {
	if string(b) == `"max"` {
		l.max = true
		return nil
	}
	if err := json.Unmarshal(b, &l.value); err != nil {
		return errors.New(`want a number or "max"`)
	}
	return nil
}

type inner struct {
	Name   string           `json:"name"`
	Levels map[string]level `json:"levels"`
}

type request struct {
	QPS      *float64          `json:"qps"`
	Burst    *int              `json:"burst"`
	Count    uint8             `json:"count"`
	Force    bool              `json:"force"`
	Amounts  amounts           `json:"amounts,omitempty"`
	Items    []inner           `json:"items"`
	Inner    *inner            `json:"inner"`
	Env      map[string]string `json:"env"`
	Weight   float64           `json:"weight"`
	Ignored  string            `json:"-"`
	Untagged string
	Raw      json.RawMessage `json:"raw"`
}

func TestDecodeRefuses(t *testing.T) {
	tests := map[string]struct {
		body string
		path string // Error.Path
		want string // in the message
	}{
		"empty":                      {``, "", "is empty"},
		"only spaces":                {"  \n", "", "is empty"},
		"null body":                  {`null`, "", "is null"},
		"array body":                 {`[1]`, "", "is an array"},
		"string body":                {`"x"`, "", `is the string "x"`},
		"trailing data":              {`{} x`, "", "data after the JSON object"},
		"second object":              {`{}{}`, "", "data after the JSON object"},
		"truncated":                  {`{"qps":1`, "", "ends in the middle"},
		"bad syntax":                 {`{"qps":}`, "", "not valid JSON at byte 7"},
		"duplicate field":            {`{"qps":1,"qps":2}`, "qps", "appears more than once"},
		"duplicate map key":          {`{"amounts":{"cpus":1,"cpus":2}}`, "amounts.cpus", "appears more than once"},
		"duplicate nested":           {`{"items":[{"name":"a","name":"b"}]}`, "items[0].name", "appears more than once"},
		"case-insensitive match":     {`{"QPS":3}`, "QPS", `case-sensitive: did you mean "qps"?`},
		"case-insensitive untagged":  {`{"untagged":"x"}`, "untagged", `did you mean "Untagged"?`},
		"unknown field":              {`{"qpss":3}`, "qpss", "unknown field (known: Untagged, amounts, burst,"},
		"dash field is not a name":   {`{"Ignored":"x"}`, "Ignored", "unknown field"},
		"unknown nested field":       {`{"inner":{"nam":"x"}}`, "inner.nam", "unknown field (known: levels, name)"},
		"string for number":          {`{"qps":"3"}`, "qps", `want a number, not the string "3"`},
		"bool for string":            {`{"items":[{"name":true}]}`, "items[0].name", "want a string, not true"},
		"object for array":           {`{"items":{}}`, "items", "want an array, not an object"},
		"number for bool":            {`{"force":1}`, "force", "want true or false, not the number 1"},
		"null for bool":              {`{"force":null}`, "force", "null is not allowed here: want true or false"},
		"null for map value":         {`{"amounts":{"cpus":null}}`, "amounts.cpus", "null is not allowed here: want a number"},
		"null for a custom value":    {`{"inner":{"levels":{"a":null}}}`, "inner.levels.a", "null is not allowed here"},
		"fraction for int":           {`{"burst":1.5}`, "burst", "want a whole number, not 1.5"},
		"exponent for int":           {`{"burst":1e3}`, "burst", "without a fraction or exponent, not 1e3"},
		"int out of range":           {`{"burst":99999999999999999999}`, "burst", "out of range: want a whole number from -9223372036854775808"},
		"negative for unsigned":      {`{"count":-1}`, "count", "out of range: want a whole number from 0 to 255"},
		"unsigned out of range":      {`{"count":256}`, "count", "from 0 to 255"},
		"float out of range":         {`{"weight":1e400}`, "weight", "1e400 is out of range for a number"},
		"custom decoder complaint":   {`{"inner":{"levels":{"a":"min"}}}`, "inner.levels.a", `want a number or "max"`},
		"odd key is quoted in paths": {`{"amounts":{"a b":1,"a b":2}}`, `amounts["a b"]`, "appears more than once"},
		"long values are shortened":  {`{"qps":"` + strings.Repeat("x", 1000) + `"}`, "qps", "…"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var req request
			err := Decode([]byte(tc.body), &req, Options{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%s) = %v, want an *Error", tc.body, err)
			}
			if e.Path != tc.path || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("Decode(%s) = path %q message %q, want path %q and %q in the message", tc.body, e.Path, e.Message, tc.path, tc.want)
			}
			for _, goWord := range []string{"float64", "int64", "uint8", "bool", "map[", "strictjson.", "struct", "Go "} {
				if strings.Contains(e.Error(), goWord) {
					t.Errorf("message %q names a Go type (%s)", e.Error(), goWord)
				}
			}
			if len(e.Error()) > 300 {
				t.Errorf("message is %d bytes long: %.100s…", len(e.Error()), e.Error())
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	var req request
	body := `{"qps":null,"burst":2,"count":255,"force":false,"amounts":{"cpus":-0,"mem":-0.0,"disk":1.5},
		"items":[{"name":"a","levels":{"x":"max","y":-0}}],"inner":null,"env":{"A":"1"},"weight":-0e3,
		"Untagged":"u","raw":{"anything":[1,{"goes":null}]}}`
	if err := Decode([]byte(body), &req, Options{}); err != nil {
		t.Fatal(err)
	}
	if req.QPS != nil || *req.Burst != 2 || req.Count != 255 || req.Inner != nil || req.Untagged != "u" || req.Env["A"] != "1" {
		t.Fatalf("decoded %+v", req)
	}
	for name, v := range map[string]float64{"amounts.cpus": req.Amounts["cpus"], "amounts.mem": req.Amounts["mem"], "weight": req.Weight} {
		if v != 0 || math.Signbit(v) {
			t.Errorf("%s = %v, want 0 (not -0)", name, v)
		}
	}
	if req.Amounts["disk"] != 1.5 || !req.Items[0].Levels["x"].max {
		t.Fatalf("decoded %+v", req)
	}
}

func TestDecodeRunsChecksWithPaths(t *testing.T) {
	var seen []string
	opts := Options{Checks: map[reflect.Type]Check{
		reflect.TypeFor[amounts](): func(path string, v reflect.Value) error {
			seen = append(seen, path)
			if v.Len() > 2 {
				return fmt.Errorf("at most 2 names, not %d", v.Len())
			}
			return nil
		},
	}}
	var req request
	if err := Decode([]byte(`{"amounts":{"a":1,"b":2}}`), &req, opts); err != nil {
		t.Fatal(err)
	}
	err := Decode([]byte(`{"amounts":{"a":1,"b":2,"c":3}}`), &req, opts)
	var e *Error
	if !errors.As(err, &e) || e.Path != "amounts" || e.Message != "at most 2 names, not 3" {
		t.Fatalf("err = %v, want the check's complaint at amounts", err)
	}
	if want := []string{"amounts", "amounts"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("check saw %q, want %q", seen, want)
	}
}

// FuzzValidTokensReadAsTheDecoder: a valid body is read by validTokens, any
// other by encoding/json's Decoder. On a valid body both must give the same
// answer: the same error, or the same decoded value.
func FuzzValidTokensReadAsTheDecoder(f *testing.F) {
	for _, seed := range []string{
		`{"qps":1,"burst":2,"count":3,"force":true,"amounts":{"cpus":-0,"mem":1e3,"a b":2}}`,
		`{"items":[{"name":"a\u00e9\"\\/","levels":{"x":"max","y":-0}},{"name":"\xff"}],"inner":null}`,
		`{"env":{"A":"1","A":"2"}}`, `{"QPS":3}`, `{"qps":"3"}`, `{"burst":1.5}`, `{"count":-1}`, `{"weight":1e400}`,
		`{"raw":{"x":[1,{"y":"}]"}]},"Untagged":"u"}`, `{"inner":{"levels":{"a":"min"}}}`, ` {"force":null} `,
		`null`, `[1]`, `"x"`, `{"amounts":{"cpus":null}}`, `{"items":[[],{}]}`, `{"raw":null}`, `{"raw":"\ud83d\ude00"}`,
	} {
		f.Add(seed)
	}
	opts := Options{Checks: map[reflect.Type]Check{
		reflect.TypeFor[amounts](): func(path string, v reflect.Value) error {
			if v.Len() > 2 {
				return fmt.Errorf("at most 2 names, not %d", v.Len())
			}
			return nil
		},
	}}
	f.Fuzz(func(t *testing.T, body string) {
		data := []byte(body)
		if !json.Valid(data) {
			return
		}
		var fast, slow request
		errFast := decode(data, &fast, reflect.ValueOf(&fast), opts, true)
		errSlow := decode(data, &slow, reflect.ValueOf(&slow), opts, false)
		if fmt.Sprint(errFast) != fmt.Sprint(errSlow) {
			t.Fatalf("%s: validTokens: %v; Decoder: %v", body, errFast, errSlow)
		}
		if errFast == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: validTokens decoded %+v; Decoder %+v", body, fast, slow)
		}
	})
}

// BenchmarkDecode compares the first pass's two token sources on a quota
// PUT's body: json.Decoder.Token (what every body used before, and invalid
// ones still use) and validTokens.
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"limits": {"cpus": 17, "mem": 1024}}`)
	type quota struct {
		Guarantees amounts `json:"guarantees"`
		Limits     amounts `json:"limits"`
		Force      bool    `json:"force"`
	}
	for _, source := range []struct {
		name  string
		valid bool
	}{{"decoder", false}, {"valid", true}} {
		b.Run("tokens="+source.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var q quota
				if err := decode(body, &q, reflect.ValueOf(&q), Options{}, source.valid); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
