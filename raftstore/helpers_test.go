package raftstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/hashicorp/raft"
)

// testTime is the leader time stamped into test commands; fixed so that
// snapshots and audit entries compare byte for byte.
var testTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func meta() WriteMeta { return WriteMeta{Time: testTime, Principal: "operator"} }

func ifMatch(version uint64) WriteMeta {
	m := meta()
	m.IfMatch = version
	return m
}

func ifNoneMatch() WriteMeta {
	m := meta()
	m.IfNoneMatch = true
	return m
}

func qps(v float64) *float64 { return &v }

func quotaSet(role string, guarantees, limits api.Resources) *QuotaSet {
	return &QuotaSet{WriteMeta: meta(), Role: role, Guarantees: guarantees, Limits: limits}
}

func forcedQuotaSet(role string, guarantees, limits api.Resources) *QuotaSet {
	c := quotaSet(role, guarantees, limits)
	c.Force = true
	return c
}

func admit(name string, resources api.Resources) *AgentAdmit {
	return &AgentAdmit{WriteMeta: meta(), ID: "id-" + name, Name: name, Hostname: name + ".example.net", Resources: resources}
}

func reserve(name, agent, role string, resources api.Resources) *ReservationSet {
	return &ReservationSet{WriteMeta: meta(), Name: name, Agent: agent, Role: role, Resources: resources}
}

func snapshotBytes(t testing.TB, s *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, s); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	return buf.Bytes()
}

// applyNext applies c at the next index, through Encode and Decode. A rejected command must leave the
// state as it was but for the index, which always advances to the entry
// applied; applyNext checks that on every rejection any test provokes.
func applyNext(t testing.TB, s *State, c Command) Result {
	t.Helper()
	// Go through the log encoding as Raft does, so that a field the encoding
	// loses shows up here; values it cannot carry (NaN) are applied as they are.
	if data, err := Encode(c); err == nil {
		decoded, err := Decode(data)
		if err != nil {
			t.Fatalf("decode %s: %v", c.Type(), err)
		}
		c = decoded
	}
	before := s.clone()
	index := s.index + 1
	res := s.apply(index, c)
	if res.Index != index {
		t.Fatalf("%s: result index %d, want %d", c.Type(), res.Index, index)
	}
	if s.index != index {
		t.Fatalf("%s: state index %d, want %d", c.Type(), s.index, index)
	}
	if res.Err != nil {
		if res.Object != nil {
			t.Errorf("%s: rejected command returned object %+v", c.Type(), res.Object)
		}
		before.index = index
		// A rejected entry still commits the cluster to its version.
		if rules := Meta(c).rules(); rules >= 2 {
			before.rulesVersion = max(before.rulesVersion, rules)
		}
		if want, got := snapshotBytes(t, before), snapshotBytes(t, s); !bytes.Equal(want, got) {
			t.Fatalf("%s rejected with %v but changed the state:\nbefore:\n%s\nafter:\n%s", c.Type(), res.Err, want, got)
		}
	}
	return res
}

// mustApply applies commands that must be accepted.
func mustApply(t testing.TB, s *State, cmds ...Command) Result {
	t.Helper()
	var res Result
	for _, c := range cmds {
		res = applyNext(t, s, c)
		if res.Err != nil {
			t.Fatalf("%s %+v: %v", c.Type(), c, res.Err)
		}
	}
	return res
}

func wantCode(t testing.TB, res Result, code string) {
	t.Helper()
	got := ""
	if res.Err != nil {
		got = res.Err.Code
	}
	if got != code {
		t.Fatalf("error code %q (%v), want %q", got, res.Err, code)
	}
	if res.Err != nil && res.Err.Status != res.Err.HTTPStatus() {
		t.Errorf("error status %d, want %d", res.Err.Status, res.Err.HTTPStatus())
	}
}

// logEntry wraps an encoded command the way Raft hands it to the FSM.
func logEntry(t testing.TB, index uint64, c Command) *raft.Log {
	t.Helper()
	data, err := Encode(c)
	if err != nil {
		t.Fatalf("encode %s: %v", c.Type(), err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// startInMemory runs a single in-memory server that leads (as masterd -dev
// does), shut down when the test ends.
func startInMemory(t testing.TB, id string) *Node {
	t.Helper()
	n, err := Open(Config{ID: id, InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	if err := n.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, n)
	return n
}
