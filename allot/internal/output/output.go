// Package output renders what the allot CLI prints: aligned tables, resources
// and task limits in one compact form, indented JSON, and the before→after
// diff of an audit entry. It does no I/O of its own beyond the writer it is
// given, so every rendering is tested on its own.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/allot/allot/masterd/api"
)

// Infinity is how an "Infinity" task limit is shown, as the web UI shows it.
const Infinity = "∞"

// None stands for an empty cell: no resources, no value.
const None = "-"

// Number writes a scalar without an exponent or trailing zeros: 1024, 0.5,
// 1500000 (never 1.5e+06, which reads as a typo in a table of MiB).
func Number(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Resources writes "cpus:2 mem:1024", names in order; None when empty. The
// form is the one agentd's -resources reads, with spaces for semicolons so a
// table cell stays readable.
func Resources(r api.Resources) string {
	if len(r) == 0 {
		return None
	}
	parts := make([]string, 0, len(r))
	for _, name := range r.Names() {
		parts = append(parts, name+":"+Number(r[name]))
	}
	return strings.Join(parts, " ")
}

// Limits writes task limits as Resources writes requests, "Infinity" as ∞:
// "cpus:2 mem:∞"; None when the task has none.
func Limits(l api.Limits) string {
	if len(l) == 0 {
		return None
	}
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		v := Infinity
		if !l[name].Infinite {
			v = Number(l[name].Value)
		}
		parts = append(parts, name+":"+v)
	}
	return strings.Join(parts, " ")
}

// OrNone returns s, or None when s is empty.
func OrNone(s string) string {
	if s == "" {
		return None
	}
	return s
}

// YesNo writes a boolean for a table.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// JSON writes v indented, with a final newline, as the API would answer it
// (the API types carry their own encodings: "Infinity" limits, lending
// limits left out only when absent).
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Resource and role names are plain; escaping < > & would only make
	// the output differ from what the API sends.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// Table writes rows in aligned columns, two spaces apart, as nomad and
// consul print theirs.
type Table struct {
	w *tabwriter.Writer
}

// NewTable starts a table on w; header, when given, is its first row.
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{w: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.Row(header...)
	}
	return t
}

// Row adds one row; an empty cell is shown as None so columns never shift.
func (t *Table) Row(cells ...string) {
	for i, c := range cells {
		cells[i] = OrNone(strings.ReplaceAll(c, "\t", " "))
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

// Flush writes the table out; call it once every row is in.
func (t *Table) Flush() error {
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// Fields writes "Name  value" lines aligned on the values, as a get
// command shows one object. pairs alternate names and values.
func Fields(w io.Writer, pairs ...string) error {
	t := NewTable(w)
	for i := 0; i+1 < len(pairs); i += 2 {
		t.Row(pairs[i], pairs[i+1])
	}
	return t.Flush()
}
