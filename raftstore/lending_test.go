package raftstore

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// lendingLimits are the three kinds of lending limit: none (no cap), empty
// (lend nothing) and one of zero cpus, which api.Resources.IsZero also calls
// zero (an encoding that asked it would drop it with the empty one).
var lendingLimits = map[string]api.Resources{"no-cap": nil, "lend-nothing": {}, "zero-cpus": {"cpus": 0}}

// Under store version 2 an empty lending limit (lend nothing) and none (no
// cap) stay apart in the log, the state, the audit trail and the snapshot;
// a version 1 entry or snapshot reads an empty one as none, as version 1
// did.
func TestEmptyLendingLimitIsKeptApartFromNone(t *testing.T) {
	s := NewState()
	for _, role := range sortedKeys(lendingLimits) {
		c := &RoleSet{WriteMeta: meta(), Role: role, Weight: 1, LendingLimit: lendingLimits[role].Clone()}
		c.Rules = 2
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		wantKey := map[string]string{"no-cap": "", "lend-nothing": `,"lending_limit":{}}`, "zero-cpus": `,"lending_limit":{"cpus":0}}`}[role]
		if got := string(data); (wantKey == "") == strings.Contains(got, "lending_limit") || !strings.HasSuffix(got, wantKey) {
			t.Errorf("%s encodes as %s", role, got)
		}
		mustApply(t, s, c) // through Encode and Decode
	}
	for role, want := range lendingLimits {
		if p, _ := s.RolePolicy(role); !reflect.DeepEqual(p.LendingLimit, want) {
			t.Errorf("%s: stored lending limit %#v, want %#v", role, p.LendingLimit, want)
		}
	}
	if audit := s.Audit(0, 0); !strings.Contains(string(audit[0].After), `"lending_limit":{}`) {
		t.Errorf("the audit trail of the lend-nothing write: %s", audit[0].After)
	}

	// Format 2 keeps them apart; the golden file pins how.
	data := snapshotBytes(t, s)
	compareGolden(t, filepath.Join("testdata", "snapshot-v2-lending-limits.json"), data)
	restored, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored, s) {
		t.Fatalf("the snapshot reads back as another state:\n%+v\nwant\n%+v", restored, s)
	}

	// Version 1 entries: an empty limit is none, a zero one stays.
	v1 := NewState()
	for _, role := range sortedKeys(lendingLimits) {
		mustApply(t, v1, &RoleSet{WriteMeta: meta(), Role: role, Weight: 1, LendingLimit: lendingLimits[role].Clone()})
	}
	for role, want := range map[string]api.Resources{"no-cap": nil, "lend-nothing": nil, "zero-cpus": {"cpus": 0}} {
		if p, _ := v1.RolePolicy(role); !reflect.DeepEqual(p.LendingLimit, want) {
			t.Errorf("version 1 entry %s: stored lending limit %#v, want %#v", role, p.LendingLimit, want)
		}
	}
	// A format 1 snapshot never held an empty one; read, it is none too.
	golden, err := os.ReadFile(filepath.Join("testdata", "snapshot-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(golden, []byte(`"weight": 0.5,`), []byte(`"weight": 0.5, "lending_limit": {},`), 1)
	if bytes.Equal(edited, golden) {
		t.Fatal("the format 1 golden snapshot has no role of weight 0.5 to edit")
	}
	old, err := ReadSnapshot(bytes.NewReader(edited))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := old.RolePolicy("ops"); p.LendingLimit != nil {
		t.Errorf("format 1 snapshot: an empty lending limit read as %#v, want none", p.LendingLimit)
	}
}
