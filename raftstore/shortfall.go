package raftstore

import (
	"strconv"
	"strings"

	"github.com/allot/allot/masterd/api"
)

// shortfall is one resource a write asks more of than there is: request is
// what the write itself asks for, others what the rest already holds
// (other roles' guarantees, other reservations on the agent), capacity what
// there is. Only messages and details are built here: what is refused is
// decided by the checks.
type shortfall struct {
	resource                  string
	request, others, capacity float64
}

// total is what the write and the others hold together.
func (f shortfall) total() float64 { return api.RoundScalar(f.request + f.others) }

// details keeps the names clients already read ("requested" is the total,
// as it always was) and adds the parts.
func (f shortfall) details() map[string]any {
	return map[string]any{
		"resource":  f.resource,
		"requested": f.total(),
		"capacity":  f.capacity,
		"request":   f.request,
		"others":    f.others,
		"short_by":  api.RoundScalar(f.total() - f.capacity),
	}
}

// describe says it in words: "cpus: 100 asked + 9 held by others = 109,
// capacity 108 (short by 1)", with the caller's words for each part.
func (f shortfall) describe(asked, others, capacity string) string {
	var b strings.Builder
	b.WriteString(f.resource + ": " + plain(f.request) + " " + asked)
	if f.others != 0 {
		b.WriteString(" + " + plain(f.others) + " " + others + " = " + plain(f.total()))
	}
	b.WriteString(", " + capacity + " " + plain(f.capacity) + " (short by " + plain(api.RoundScalar(f.total()-f.capacity)) + ")")
	return b.String()
}

// shortfallError lists every shortfall, in the message and in details.
func shortfallError(prefix string, shortfalls []shortfall, words [3]string, suffix string) *api.Error {
	parts := make([]string, len(shortfalls))
	details := make([]any, len(shortfalls))
	for i, f := range shortfalls {
		parts[i] = f.describe(words[0], words[1], words[2])
		details[i] = f.details()
	}
	return api.Errorf(api.CodeCapacityExceeded, "%s: %s; %s", prefix, strings.Join(parts, "; "), suffix).
		WithDetails(map[string]any{shortfallDetailsName: details})
}

// plain writes an amount as people write it: 1008192, never 1.008192e+06.
func plain(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
