package raftstore

import (
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestCapacityMessages: a capacity error names what the write asks for, what
// the others already hold and what there is, per resource, in plain numbers.
func TestCapacityMessages(t *testing.T) {
	tests := map[string]struct {
		setup    []Command
		cmd      Command
		want     []string // in the message, in order
		notWants []string
	}{
		"quota: the request apart from the other roles' guarantees": {
			setup: []Command{admit("n1", api.Resources{"cpus": 108}), quotaSet("eng", api.Resources{"cpus": 9}, nil)},
			cmd:   quotaSet("big", api.Resources{"cpus": 100}, nil),
			want: []string{"quota guarantees exceed the cluster's capacity",
				"cpus: 100 guaranteed to big + 9 to other roles = 109, the admitted agents have 108 (short by 1)",
				"set force"},
			notWants: []string{"109 requested", "cpus: 109"},
		},
		"quota: every short resource, large amounts in plain numbers": {
			setup: []Command{admit("n1", api.Resources{"cpus": 8, "mem": 1008192})},
			cmd:   quotaSet("big", api.Resources{"cpus": 9, "mem": 2000000.5}, nil),
			want: []string{"cpus: 9 guaranteed to big, the admitted agents have 8 (short by 1)",
				"mem: 2000000.5 guaranteed to big, the admitted agents have 1008192 (short by 991808.5)"},
			notWants: []string{"e+"},
		},
		"reservation: the request apart from the agent's other reservations": {
			setup: []Command{admit("n1", api.Resources{"cpus": 108, "mem": 1008192}), reserve("db-1", "n1", "db", api.Resources{"cpus": 9})},
			cmd:   reserve("db-2", "n1", "db", api.Resources{"cpus": 100, "mem": 1008193}),
			want: []string{"reservation db-2 does not fit on agent n1",
				"cpus: 100 reserved by it + 9 by other reservations = 109, the agent has 108 (short by 1)",
				"mem: 1008193 reserved by it, the agent has 1008192 (short by 1)", "set force"},
			notWants: []string{"e+", "109 requested"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, tc.setup...)
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, api.CodeCapacityExceeded)
			msg := res.Err.Message
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("message %q lacks %q (after what came before)", msg, w)
				}
				rest = rest[i+len(w):]
			}
			for _, nw := range tc.notWants {
				if strings.Contains(msg, nw) {
					t.Errorf("message %q contains %q", msg, nw)
				}
			}
		})
	}
}
