package raftstore

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// richCommands builds a state with every kind of object, deleted objects and
// a rejected write, stamped with fixed times.
func richCommands() []Command {
	at := func(minutes int, principal string) WriteMeta {
		return WriteMeta{Time: time.Date(2025, 3, 1, 12, minutes, 0, 500, time.UTC), Principal: principal}
	}
	forceAt := func(minutes int, principal string) WriteMeta {
		m := at(minutes, principal)
		m.Force = true
		return m
	}
	return []Command{
		&ServerSet{WriteMeta: at(0, ""), ID: "m1", RaftAddress: "10.0.0.1:7000", APIAddress: "http://10.0.0.1:5050"},
		&ServerSet{WriteMeta: at(1, ""), ID: "m2", RaftAddress: "10.0.0.2:7000", APIAddress: "http://10.0.0.2:5050"},
		&AgentAdmit{WriteMeta: at(2, ""), ID: "a1", Name: "node-1", Hostname: "node-1.example.net",
			Resources: api.Resources{"cpus": 16, "mem": 65536, "disk": 1e6}, Capabilities: []string{"TASK_RESOURCE_LIMITS"}},
		&AgentAdmit{WriteMeta: at(3, ""), ID: "a2", Name: "node-2", Hostname: "node-2.example.net",
			Resources: api.Resources{"cpus": 8, "mem": 32768}},
		&QuotaSet{WriteMeta: at(4, "alice"), Role: "eng",
			Guarantees: api.Resources{"cpus": 8, "mem": 16384}, Limits: api.Resources{"cpus": 16, "mem": 32768}},
		&QuotaSet{WriteMeta: at(5, "alice"), Role: "eng/ml",
			Guarantees: api.Resources{"cpus": 4.5, "mem": 8192}, Limits: api.Resources{"cpus": 12}},
		&QuotaSet{WriteMeta: at(6, "bob"), Role: "ops", Guarantees: api.Resources{"cpus": 2.25}},
		&QuotaSet{WriteMeta: at(7, "bob"), Role: "tmp", Guarantees: api.Resources{"cpus": 1}},
		&QuotaDelete{WriteMeta: at(8, "bob"), Role: "tmp"},
		&RoleSet{WriteMeta: at(9, "alice"), Role: "eng/ml", Weight: 2, LendingLimit: api.Resources{"cpus": 4}},
		&RoleSet{WriteMeta: at(10, "alice"), Role: "ops", Weight: 0.5},
		&ReservationSet{WriteMeta: at(11, "carol"), Name: "db-node-1", Agent: "node-1", Role: "db",
			Resources: api.Resources{"cpus": 4, "mem": 8192}},
		&ReservationSet{WriteMeta: forceAt(12, "carol"), Name: "big-node-2", Agent: "node-2", Role: "eng/ml",
			Resources: api.Resources{"cpus": 12}},
		&RateLimitConfigReplace{WriteMeta: at(13, "dave"), Limits: []RateLimitSet{
			{Principal: "spark", QPS: qps(55.5), Burst: 56, Capacity: 1000},
			{Principal: "batch", Capacity: 10},
		}, Default: &RateLimitDefaultSet{QPS: qps(33.3), Burst: 34, Capacity: 1000}},
		&RateLimitSet{WriteMeta: at(14, "dave"), Principal: "analytics", QPS: qps(2.5), Burst: 3, Capacity: 0},
		&QuotaSet{WriteMeta: at(15, "eve"), Role: "ops", Guarantees: api.Resources{"cpus": 3}, Limits: api.Resources{"cpus": 2}},
		// The framework registry came later: its commands follow, so the
		// objects above keep their versions in the golden snapshot.
		&FrameworkSet{WriteMeta: at(16, "scheduler"), ID: "f1", Name: "spark", Principal: "spark-sched",
			Roles: []string{"*", "eng/ml"}, Capabilities: []string{"REVOCABLE_RESOURCES"}, FailoverTimeoutSeconds: 3600},
		&FrameworkSet{WriteMeta: at(17, "scheduler"), ID: "f2", Name: "batch", Roles: []string{"ops"}},
		&FrameworkSet{WriteMeta: at(18, "scheduler"), ID: "f3", Name: "short-lived", Roles: []string{"*"}},
		&FrameworkSet{WriteMeta: at(19, "scheduler"), ID: "f1", Name: "spark", Principal: "spark-sched",
			Roles: []string{"eng/ml"}, Capabilities: []string{"REVOCABLE_RESOURCES"}, FailoverTimeoutSeconds: 7200},
		&FrameworkRemove{WriteMeta: at(20, "scheduler"), ID: "f3"},
	}
}

// richCommandsBeforeFrameworks is how many of richCommands predate the
// framework registry.
const richCommandsBeforeFrameworks = 16

// richStateUnder applies richCommands stamped with store version rules.
func richStateUnder(t testing.TB, rules uint32) *State {
	t.Helper()
	f := NewFSM(nil)
	for i, c := range richCommands() {
		// A leader proposes only valid, normalized writes under version
		// 2; the invalid one stays a version 1 entry, which Apply rejects.
		if rules >= 2 && c.validate(rules) == nil {
			Meta(c).Rules = rules
		}
		f.Apply(logEntry(t, uint64(i+1), c))
	}
	var s *State
	f.Read(func(st *State) { s = st.clone() })
	return s
}

// TestSnapshotGolden pins the snapshot formats: each store version's golden
// snapshot reads back, and a change that alters the bytes needs a new format.
// The same writes judged by either version's rules store the same objects.
func TestSnapshotGolden(t *testing.T) {
	v1, v2 := richStateUnder(t, 1), richStateUnder(t, 2)
	if v2.RulesVersion() != 2 || v1.RulesVersion() != 1 {
		t.Fatalf("rules versions %d and %d, want 1 and 2", v1.RulesVersion(), v2.RulesVersion())
	}
	same := v2.clone()
	same.rulesVersion = v1.rulesVersion
	if !reflect.DeepEqual(same, v1) {
		t.Fatalf("version 2 rules stored another state than version 1's:\n%+v\nwant\n%+v", v2, v1)
	}
	testSnapshotGolden(t, v1, "snapshot-v1.json")
	testSnapshotGolden(t, v2, "snapshot-v2.json")
}

func testSnapshotGolden(t *testing.T, s *State, golden string) {
	if len(s.Quotas()) == 0 || len(s.RolePolicies()) == 0 || len(s.Reservations()) < 2 || len(s.RateLimits()) == 0 ||
		s.rateLimitDefault == nil || len(s.Agents()) == 0 || len(s.Frameworks()) < 2 || len(s.Servers()) == 0 || len(s.audit) == 0 {
		t.Fatal("the rich state lacks a kind of object")
	}
	if r, _ := s.Reservation("big-node-2"); r.Status != api.ReservationPending {
		t.Fatal("the rich state lacks a pending reservation")
	}
	path := filepath.Join("testdata", golden)
	got := snapshotBytes(t, s)
	compareGolden(t, path, got)

	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := ReadSnapshot(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if again := snapshotBytes(t, restored); !bytes.Equal(again, want) {
		t.Fatalf("ReadSnapshot → WriteSnapshot changed the golden snapshot:\n%s", again)
	}
	if !reflect.DeepEqual(restored, s) {
		t.Fatalf("the golden snapshot reads back as a different state:\n%+v\nwant\n%+v", restored, s)
	}
}

// TestSnapshotWithoutFrameworks: a snapshot of a state with no framework has
// no "frameworks" key, as snapshots written before the registry existed, and
// it reads back to a state whose registry takes writes.
func TestSnapshotWithoutFrameworks(t *testing.T) {
	f := NewFSM(nil)
	for i, c := range richCommands()[:richCommandsBeforeFrameworks] {
		if _, ok := c.(*FrameworkSet); ok {
			t.Fatal("richCommandsBeforeFrameworks counts a framework command")
		}
		f.Apply(logEntry(t, uint64(i+1), c))
	}
	var s *State
	f.Read(func(st *State) { s = st.clone() })
	data := snapshotBytes(t, s)
	if bytes.Contains(data, []byte(`"frameworks"`)) {
		t.Fatalf("a snapshot without frameworks names them:\n%s", data)
	}
	restored, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored, s) {
		t.Fatalf("restored state differs:\n%+v\nwant\n%+v", restored, s)
	}
	mustApply(t, restored, &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Roles: []string{"*"}})
	if _, ok := restored.Framework("f1"); !ok {
		t.Fatal("the restored registry lost a framework set after the restore")
	}
}

func TestReadSnapshotErrors(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "snapshot-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		data    string
		wantErr string
	}{
		"future format": {
			data:    strings.Replace(string(golden), `"format": 1`, `"format": 4`, 1),
			wantErr: "format 4, this server reads 1 to 3",
		},
		"unknown field": {
			data:    strings.Replace(string(golden), `"format": 1,`, `"format": 1, "secrets": [],`, 1),
			wantErr: "unknown field",
		},
		"truncated": {
			data:    string(golden[:len(golden)/2]),
			wantErr: "read snapshot",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.data == string(golden) {
				t.Fatal("the test did not alter the snapshot")
			}
			_, err := ReadSnapshot(strings.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
