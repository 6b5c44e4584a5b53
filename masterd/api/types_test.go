package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRoleLendingLimitJSON: a role's lending limit is left out only when it
// is nil (no cap); {} (lend nothing) and a limit of zeros are written and
// read back as they are.
func TestRoleLendingLimitJSON(t *testing.T) {
	tests := map[string]struct {
		limit Resources
		want  string // the lending_limit member, "" for none
	}{
		"no cap":       {nil, ""},
		"lend nothing": {Resources{}, `"lending_limit":{}`},
		"zero cpus":    {Resources{"cpus": 0}, `"lending_limit":{"cpus":0}`},
		"some of each": {Resources{"cpus": 2, "mem": 512}, `"lending_limit":{"cpus":2,"mem":512}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(Role{Role: "db", Weight: 1, LendingLimit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			if tc.want == "" && strings.Contains(s, "lending_limit") || tc.want != "" && !strings.Contains(s, tc.want) {
				t.Fatalf("encoded %s, want lending_limit %q", s, tc.want)
			}
			if !strings.Contains(s, `"role":"db"`) || !strings.Contains(s, `"weight":1`) {
				t.Fatalf("encoded %s: the other fields are missing", s)
			}
			var back Role
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if (back.LendingLimit == nil) != (tc.limit == nil) || len(back.LendingLimit) != len(tc.limit) {
				t.Fatalf("read back %#v, want %#v", back.LendingLimit, tc.limit)
			}
		})
	}
}
