package output

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// Diff describes how an audit entry's object changed, compactly, on one
// line: "guarantees.cpus: 2→4, limits.mem: -→2048" for an update, "+ agent=node-1
// role=db resources.cpus=1" for a creation, "- …" for a deletion. Nested
// objects are flattened to dotted paths and arrays shown as compact JSON.
// An empty object says what an absent one says (guarantees {} and no
// guarantees are both none), so it is left out and only real changes show;
// the exception is lending_limit, whose {} lends nothing where an absent
// one lends without a cap. The top-level version is left out: it is the
// entry's own index and would be in every line.
func Diff(before, after json.RawMessage) string {
	old, oldOK := flatten(before)
	cur, curOK := flatten(after)
	switch {
	case !oldOK && !curOK:
		return ""
	case !oldOK:
		return "+ " + assignments(cur)
	case !curOK:
		return "- " + assignments(old)
	}
	var changes []string
	for _, path := range unionKeys(old, cur) {
		a, inOld := old[path]
		b, inCur := cur[path]
		if inOld && inCur && a == b {
			continue
		}
		if !inOld {
			a = None
		}
		if !inCur {
			b = None
		}
		changes = append(changes, path+": "+a+"→"+b)
	}
	if len(changes) == 0 {
		return "(no change)"
	}
	return strings.Join(changes, ", ")
}

// flatten turns a JSON object into dotted paths and their rendered values;
// ok is false for null, absent or non-object JSON (nothing to compare).
func flatten(raw json.RawMessage) (map[string]string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return map[string]string{"value": strings.TrimSpace(string(raw))}, true
	}
	delete(obj, "version")
	out := map[string]string{}
	walk("", obj, out)
	return out, true
}

// emptyMeansSomething names the fields whose empty object differs from
// their absence (see Diff).
var emptyMeansSomething = map[string]bool{"lending_limit": true}

func walk(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok {
		if len(m) == 0 {
			if emptyMeansSomething[prefix] {
				out[prefix] = "{}"
			}
			return
		}
		for k, child := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			walk(path, child, out)
		}
		return
	}
	out[prefix] = leaf(v)
}

// leaf renders one value: strings bare, everything else as compact JSON.
func leaf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

func assignments(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range unionKeys(m, nil) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func unionKeys(a, b map[string]string) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, dup := a[k]; !dup {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
