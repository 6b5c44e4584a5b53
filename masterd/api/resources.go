package api

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Resources maps a resource name to a scalar amount: cores for "cpus", MiB for
// "mem" and "disk". Values are kept at Mesos's fixed-point precision of 0.001 so
// that sums never drift and a config of 0.5004 reads back as 0.5.
type Resources map[string]float64

// resourcePrecision is the fixed point every scalar is rounded to.
const resourcePrecision = 1000

// MaxResourceNames is the most resource names one resource map of a request
// may hold: far more than any cluster has kinds of resources, few enough that
// invented names cannot bloat the replicated state.
const MaxResourceNames = 64

var resourceNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// RoundScalar rounds v to the 0.001 fixed point used for every stored scalar.
func RoundScalar(v float64) float64 {
	return math.Round(v*resourcePrecision) / resourcePrecision
}

// ValidateResourceName reports whether name is a legal resource name.
func ValidateResourceName(name string) error {
	if !resourceNamePattern.MatchString(name) {
		return fmt.Errorf("resource name %q must match %s", name, resourceNamePattern)
	}
	return nil
}

func validateScalar(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("resource %q: value must be finite", name)
	}
	if v < 0 {
		return fmt.Errorf("resource %q: value %v must not be negative", name, v)
	}
	// Beyond this the fixed-point representation loses precision.
	if v > 1e15 {
		return fmt.Errorf("resource %q: value %v is too large", name, v)
	}
	return nil
}

// Validate checks names and values; field names the map in error messages.
func (r Resources) Validate(field string) error {
	for _, name := range r.Names() {
		if err := ValidateResourceName(name); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		if err := validateScalar(name, r[name]); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}

// Normalized returns a copy rounded to the fixed point, never nil.
func (r Resources) Normalized() Resources {
	out := make(Resources, len(r))
	for k, v := range r {
		out[k] = RoundScalar(v)
	}
	return out
}

// Clone returns a copy; nil stays nil.
func (r Resources) Clone() Resources {
	if r == nil {
		return nil
	}
	out := make(Resources, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

// Names returns the resource names in sorted order, for deterministic output.
func (r Resources) Names() []string {
	names := make([]string, 0, len(r))
	for k := range r {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Add adds o into r (allocating r if needed) and returns it.
func (r Resources) Add(o Resources) Resources {
	if r == nil {
		r = make(Resources, len(o))
	}
	for k, v := range o {
		r[k] = RoundScalar(r[k] + v)
	}
	return r
}

// Subtract subtracts o from r, dropping nothing; results may be negative.
func (r Resources) Subtract(o Resources) Resources {
	if r == nil {
		r = make(Resources, len(o))
	}
	for k, v := range o {
		r[k] = RoundScalar(r[k] - v)
	}
	return r
}

// Contains reports whether r holds at least o of every resource.
func (r Resources) Contains(o Resources) bool {
	for k, v := range o {
		if r[k] < v {
			return false
		}
	}
	return true
}

// IsZero reports whether every value is zero.
func (r Resources) IsZero() bool {
	for _, v := range r {
		if v != 0 {
			return false
		}
	}
	return true
}

// String renders "cpus:2;mem:1024", the agentd -resources format.
func (r Resources) String() string {
	parts := make([]string, 0, len(r))
	for _, name := range r.Names() {
		parts = append(parts, fmt.Sprintf("%s:%g", name, r[name]))
	}
	return strings.Join(parts, ";")
}

// ParseResources parses "cpus:2;mem:1024;disk:4096".
func ParseResources(s string) (Resources, error) {
	out := Resources{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("resource %q: want name:value", part)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("resource %q: value %q is not a number", part, strings.TrimSpace(value))
		}
		name = strings.TrimSpace(name)
		if _, twice := out[name]; twice {
			return nil, fmt.Errorf("resource %q is named twice", name)
		}
		out[name] = v
	}
	if err := out.Validate("resources"); err != nil {
		return nil, err
	}
	return out.Normalized(), nil
}

// Infinity is the JSON spelling of an unconstrained task limit.
const Infinity = "Infinity"

// Limit is one task limit: a finite amount or Infinity.
type Limit struct {
	Value    float64
	Infinite bool
}

// MarshalJSON writes a number or the string "Infinity".
func (l Limit) MarshalJSON() ([]byte, error) {
	if l.Infinite {
		return json.Marshal(Infinity)
	}
	return json.Marshal(l.Value)
}

// UnmarshalJSON accepts a number or the string "Infinity".
func (l *Limit) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != Infinity {
			return fmt.Errorf("limit %q: want a number or %q", s, Infinity)
		}
		*l = Limit{Infinite: true}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("limit: want a number or %q", Infinity)
	}
	*l = Limit{Value: v}
	return nil
}

// Limits are a task's hard limits; only "cpus" and "mem" may be named.
type Limits map[string]Limit

// Validate checks the names, values and that every limit is at least the request.
func (l Limits) Validate(requests Resources) error {
	for name, limit := range l {
		if name != "cpus" && name != "mem" {
			return fmt.Errorf("limits: only cpus and mem may be limited, not %q", name)
		}
		if limit.Infinite {
			continue
		}
		if err := validateScalar(name, limit.Value); err != nil {
			return fmt.Errorf("limits: %w", err)
		}
		if RoundScalar(limit.Value) < requests[name] {
			return fmt.Errorf("limits: %s limit %v is below its request %v", name, limit.Value, requests[name])
		}
	}
	return nil
}

// ParseLimits parses task limits such as "cpus:1;mem:Infinity"; an empty
// string is no limits.
func ParseLimits(s string) (Limits, error) {
	out := Limits{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("limit %q: want name:value", part)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if _, twice := out[name]; twice {
			return nil, fmt.Errorf("limit %q is named twice", name)
		}
		if value == Infinity {
			out[name] = Limit{Infinite: true}
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("limit %q: value %q is not a number or %s", part, value, Infinity)
		}
		out[name] = Limit{Value: v}
	}
	return out, nil
}

// String writes limits as ParseLimits reads them, names in order.
func (l Limits) String() string {
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		if l[name].Infinite {
			parts = append(parts, name+":"+Infinity)
		} else {
			parts = append(parts, fmt.Sprintf("%s:%g", name, l[name].Value))
		}
	}
	return strings.Join(parts, ";")
}
