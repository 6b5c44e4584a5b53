package raftstore

import (
	"context"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// A version 2 entry is judged only against the state: input rules that a
// later release tightens never change how it replays. A version 1 entry is
// judged by every rule, as version 1 did.
func TestApplyJudgesEntriesByTheirVersion(t *testing.T) {
	// A role name today's rules refuse stands for an input rule tightened
	// after the entry was committed.
	bad := func(rules uint32) *RoleSet {
		c := &RoleSet{WriteMeta: meta(), Role: "Bad Role!", Weight: 1}
		c.Rules = rules
		return c
	}
	f := NewFSM(nil)
	res := f.Apply(logEntry(t, 1, bad(2))).(Result)
	if res.Err != nil {
		t.Fatalf("version 2 entry rejected on replay: %v", res.Err)
	}
	f.Read(func(s *State) {
		if _, ok := s.RolePolicy("Bad Role!"); !ok {
			t.Fatal("version 2 entry not stored")
		}
	})
	res = f.Apply(logEntry(t, 2, bad(0))).(Result)
	if res.Err == nil || res.Err.Code != api.CodeInvalidArgument {
		t.Fatalf("version 1 entry with an invalid role: %v, want invalid_argument as version 1 answered", res.Err)
	}

	// State rules still hold for version 2 entries: they depend on what the
	// write lands on.
	stale := &RoleSet{WriteMeta: ifMatch(99), Role: "eng", Weight: 1}
	stale.Rules = 2
	res = f.Apply(logEntry(t, 3, stale)).(Result)
	if res.Err == nil || res.Err.Code != api.CodePreconditionFailed {
		t.Fatalf("version 2 entry with a stale If-Match: %v, want precondition_failed", res.Err)
	}
}

// Version 1 entries were proposed as clients sent them: Apply normalizes
// them as version 1 did, and stores what a version 2 leader would have.
func TestApplyNormalizesVersion1Entries(t *testing.T) {
	for _, rules := range []uint32{0, 2} {
		c := forcedQuotaSet("eng", api.Resources{"cpus": 1.00049, "mem": 0}, nil)
		if rules == 2 {
			if e := c.validate(2); e != nil {
				t.Fatal(e)
			}
			c.Rules = 2
		}
		f := NewFSM(nil)
		if res := f.Apply(logEntry(t, 1, c)).(Result); res.Err != nil {
			t.Fatal(res.Err)
		}
		f.Read(func(s *State) {
			q, _ := s.Quota("eng")
			if q.Guarantees["cpus"] != 1 || q.Limits == nil {
				t.Fatalf("rules %d: stored %+v, want cpus rounded to 1 and empty limits", rules, q)
			}
		})
	}
}

func TestApplyRefusesEntriesOfANewerVersion(t *testing.T) {
	c := &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1}
	c.Rules = StoreVersion + 1
	defer func() {
		msg, _ := recover().(error)
		if msg == nil || !strings.Contains(msg.Error(), "upgrade it") {
			t.Fatalf("panic %v, want one saying to upgrade this server", msg)
		}
	}()
	NewFSM(nil).Apply(logEntry(t, 1, c))
}

// newerCommand stands for a command type a later store version adds.
type newerCommand struct {
	WriteMeta
	Name string `json:"name"`
}

const newerCommandType MessageType = 100

func (*newerCommand) Type() MessageType          { return newerCommandType }
func (*newerCommand) validate(uint32) *api.Error { return nil }

func registerNewerCommand(t *testing.T, since uint32) {
	register(newerCommandType, "newer.set", since,
		func(*State, *newerCommand) (string, *api.Error) { return "stored", nil },
		func(_ *State, _ uint64, c *newerCommand, obj string) string { return obj + " " + c.Name })
	t.Cleanup(func() { delete(registry, newerCommandType) })
}

// The leader stamps writes with the lowest store version among its servers
// and refuses command types some server could not read; once every server
// runs the newer version, writes carry it and the cluster stays there.
func TestClusterStoreVersionGatesWrites(t *testing.T) {
	c := newInmemCluster(t, 3)
	if err := c.node(0).Bootstrap(); err != nil {
		t.Fatal(err)
	}
	lead := c.node(c.readyLeader())
	for i := 1; i < 3; i++ {
		if err := lead.AddVoter(c.node(i).ID(), c.node(i).RaftAddress()); err != nil {
			t.Fatal(err)
		}
	}
	registerNewerCommand(t, StoreVersion)

	// Not heard from m2 and m3 yet: they count as version 1.
	if v := lead.ClusterStoreVersion(); v != 1 {
		t.Fatalf("cluster store version %d before hearing from the followers, want 1", v)
	}
	cmd := &newerCommand{WriteMeta: meta(), Name: "x"}
	res, err := lead.Apply(context.Background(), cmd)
	if err != nil || res.Err == nil || res.Err.Code != api.CodeConflict || !strings.Contains(res.Err.Message, "every server") {
		t.Fatalf("newer command on a version 1 cluster: %+v, %v; want a conflict naming the upgrade", res, err)
	}
	role := &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1}
	applyOK(t, lead, role)
	if role.Rules != 0 {
		t.Fatalf("a version 1 cluster stamped a write with %d", role.Rules)
	}
	lead.FSM().Read(func(s *State) {
		if s.RulesVersion() != 1 {
			t.Fatalf("rules version %d after a write on a version 1 cluster, want 1", s.RulesVersion())
		}
	})

	lead.SetServerVersion("m2", StoreVersion)
	if v := lead.ClusterStoreVersion(); v != 1 {
		t.Fatalf("cluster store version %d with m3 unheard, want 1", v)
	}
	lead.SetServerVersion("m3", StoreVersion)
	lead.ForgetServerVersions() // a new term asks again
	if v := lead.ClusterStoreVersion(); v != 1 {
		t.Fatalf("cluster store version %d after forgetting what was heard, want 1", v)
	}
	lead.SetServerVersion("m2", StoreVersion)
	lead.SetServerVersion("m3", StoreVersion)
	if v := lead.ClusterStoreVersion(); v != StoreVersion {
		t.Fatalf("cluster store version %d with every server upgraded, want %d", v, StoreVersion)
	}
	// Version 2 replicas do not judge input, so the proposer does, whoever
	// calls Apply.
	bad := &RoleSet{WriteMeta: meta(), Role: "Bad Role!", Weight: -1}
	res, err = lead.Apply(context.Background(), bad)
	if err != nil || res.Err == nil || res.Err.Code != api.CodeInvalidArgument || bad.Rules != 0 {
		t.Fatalf("invalid write on a version 2 cluster: %+v, %v (stamped %d); want invalid_argument before it reaches the log", res, err, bad.Rules)
	}
	res = applyOK(t, lead, &newerCommand{WriteMeta: meta(), Name: "x"})
	if res.Object != "stored x" {
		t.Fatalf("newer command stored %v", res.Object)
	}
	c.waitConverged(res.Index)
	for i := range 3 {
		c.node(i).FSM().Read(func(s *State) {
			if s.RulesVersion() != StoreVersion {
				t.Fatalf("m%d: rules version %d, want %d", i+1, s.RulesVersion(), StoreVersion)
			}
		})
	}
	// Once committed, the version holds even if a server is heard below it
	// (which the join check prevents).
	lead.SetServerVersion("m3", 1)
	if v := lead.ClusterStoreVersion(); v != StoreVersion {
		t.Fatalf("cluster store version fell back to %d", v)
	}
}
