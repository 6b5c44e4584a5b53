package ui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/allot/allot/masterd/api"
)

// What the page should show for an API answer, written independently of the
// page's JavaScript (format.js, diff.js) so that the two check each other.

// num is an amount to 0.001 with thousands separators: 2048 → "2,048".
func num(v float64) string {
	s := strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return sign + b.String()
}

var resourceOrder = map[string]int{"cpus": 0, "mem": 1, "disk": 2}

func resourceNames(maps ...api.Resources) []string {
	set := map[string]bool{}
	for _, m := range maps {
		for k := range m {
			set[k] = true
		}
	}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		oi, iok := resourceOrder[names[i]]
		oj, jok := resourceOrder[names[j]]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return names[i] < names[j]
	})
	return names
}

func amount(name string, v float64) string {
	if name == "mem" || name == "disk" {
		return num(v) + " MiB"
	}
	return num(v)
}

// resources is a resource map on one line, as the page folds it (its
// no-break spaces read as spaces): "cpus 1.5 · mem 2,048 MiB".
func resources(m api.Resources) string {
	if m == nil {
		return "—"
	}
	names := resourceNames(m)
	if len(names) == 0 {
		return "none"
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " " + amount(n, m[n])
	}
	return strings.Join(parts, " · ")
}

// limit is one task limit: ∞ for Infinity, — when the task set none.
func limit(l api.Limits, name string) string {
	v, ok := l[name]
	switch {
	case !ok:
		return "—"
	case v.Infinite:
		return "∞"
	}
	return num(v.Value)
}

// orDash is a request that may be missing.
func orDash(m api.Resources, name string) string {
	if v, ok := m[name]; ok {
		return num(v)
	}
	return "—"
}

// changes lists the fields an audit entry changed, as kind:path, sorted
// by path: objects are walked, arrays are leaves, and an empty object is
// the same as an absent one, except a role's lending_limit ({} lends
// nothing, absent lends without a cap).
func changes(before, after json.RawMessage) ([]string, error) {
	flat := func(raw json.RawMessage) (map[string]string, error) {
		out := map[string]string{}
		if len(raw) == 0 || string(raw) == "null" {
			return out, nil
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		var walk func(prefix string, v any)
		walk = func(prefix string, v any) {
			if m, ok := v.(map[string]any); ok && (len(m) > 0 || prefix != "lending_limit") {
				for k, x := range m {
					p := k
					if prefix != "" {
						p = prefix + "." + k
					}
					walk(p, x)
				}
				return
			}
			if prefix != "" {
				b, _ := json.Marshal(v)
				out[prefix] = string(b)
			}
		}
		walk("", v)
		return out, nil
	}
	a, err := flat(before)
	if err != nil {
		return nil, err
	}
	b, err := flat(after)
	if err != nil {
		return nil, err
	}
	paths := map[string]bool{}
	for k := range a {
		paths[k] = true
	}
	for k := range b {
		paths[k] = true
	}
	sorted := make([]string, 0, len(paths))
	for k := range paths {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, p := range sorted {
		va, inA := a[p]
		vb, inB := b[p]
		switch {
		case inA && !inB:
			out = append(out, "removed:"+p)
		case !inA && inB:
			out = append(out, "added:"+p)
		case va != vb:
			out = append(out, "changed:"+p)
		}
	}
	return out, nil
}

// metrics is one scrape of /metrics.
type metrics map[string]*dto.MetricFamily

func parseMetrics(text []byte) (metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(text))
}

// value is the value of the series of name whose labels include match
// (summed over every such series), and whether there is one.
func (m metrics) value(name string, match map[string]string) (float64, bool) {
	fam, ok := m[name]
	if !ok {
		return 0, false
	}
	sum, found := 0.0, false
next:
	for _, s := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range match {
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// diffRows compares what the page shows with what it should, by row id
// and cell, and says what differs.
func diffRows(table string, got []row, want map[string]map[string]string) error {
	var problems []string
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.ID] = true
		w, ok := want[r.ID]
		if !ok {
			problems = append(problems, fmt.Sprintf("row %q is not in the API's answer", r.ID))
			continue
		}
		for k, v := range w {
			g, ok := r.Cells[k]
			if !ok {
				g, ok = r.Fields[k]
			}
			if !ok {
				problems = append(problems, fmt.Sprintf("row %q has no %s", r.ID, k))
			} else if g != v {
				problems = append(problems, fmt.Sprintf("row %q %s: page %q, API %q", r.ID, k, g, v))
			}
		}
	}
	for id := range want {
		if !seen[id] {
			problems = append(problems, fmt.Sprintf("row %q is missing", id))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("table %s: %s", table, strings.Join(problems, "; "))
	}
	return nil
}

// rowIDs are the ids of rows in the order the page shows them.
func rowIDs(rows []row) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}
