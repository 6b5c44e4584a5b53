package raftstore

import (
	"context"
	"errors"
	"fmt"
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
// them as version 1 did. A version 2 entry was normalized by the leader
// before it was proposed, and Apply leaves it as it is in the log: the same
// unnormalized entry is stored otherwise under each version.
func TestApplyNormalizesVersion1Entries(t *testing.T) {
	for _, tc := range []struct {
		rules uint32
		// what each version stores for a guarantee of 1.00049 cpus, no
		// limits, and a lending limit of {}
		cpus   float64
		limits api.Resources
		lend   api.Resources
	}{
		{rules: 0, cpus: 1, limits: api.Resources{}, lend: nil},
		{rules: 2, cpus: 1.00049, limits: nil, lend: api.Resources{}},
	} {
		quota := forcedQuotaSet("eng", api.Resources{"cpus": 1.00049, "mem": 0}, nil)
		role := &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1, LendingLimit: api.Resources{}}
		quota.Rules, role.Rules = tc.rules, tc.rules
		f := NewFSM(nil)
		for i, c := range []Command{quota, role} {
			if res := f.Apply(logEntry(t, uint64(i+1), c)).(Result); res.Err != nil {
				t.Fatalf("rules %d: %s: %v", tc.rules, c.Type(), res.Err)
			}
		}
		f.Read(func(s *State) {
			q, _ := s.Quota("eng")
			if q.Guarantees["cpus"] != tc.cpus || (q.Limits == nil) != (tc.limits == nil) {
				t.Errorf("rules %d: stored %#v, want %v cpus and limits %#v", tc.rules, q, tc.cpus, tc.limits)
			}
			p, _ := s.RolePolicy("eng")
			if (p.LendingLimit == nil) != (tc.lend == nil) || len(p.LendingLimit) != 0 {
				t.Errorf("rules %d: lending limit %#v, want %#v", tc.rules, p.LendingLimit, tc.lend)
			}
		})
	}
}

// Check and apply get the version an entry was stamped with (version 1 for
// an unstamped one), so that a later version can change how a state rule
// judges its entries and no other; Check judges by this binary's version.
func TestCheckAndApplyGetTheEntrysRules(t *testing.T) {
	var checked, applied []uint32
	register(newerCommandType, "newer.set", 1,
		func(_ *State, _ *newerCommand, rules uint32) (string, *api.Error) {
			checked = append(checked, rules)
			return "stored", nil
		},
		func(_ *State, _ uint64, _ *newerCommand, obj string, rules uint32) string {
			applied = append(applied, rules)
			return obj
		})
	t.Cleanup(func() { delete(registry, newerCommandType) })

	f := NewFSM(nil)
	for i, rules := range []uint32{0, 1, 2} {
		c := &newerCommand{WriteMeta: meta(), Name: "x"}
		c.Rules = rules
		if res := f.Apply(logEntry(t, uint64(i+1), c)).(Result); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	f.Read(func(s *State) {
		if _, e := s.Check(&newerCommand{WriteMeta: meta(), Name: "y"}); e != nil {
			t.Fatal(e)
		}
	})
	if fmt.Sprint(checked) != fmt.Sprint([]uint32{1, 1, 2, StoreVersion}) || fmt.Sprint(applied) != "[1 1 2]" {
		t.Fatalf("check got rules %v, apply %v; want [1 1 2 %d] and [1 1 2]", checked, applied, StoreVersion)
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
		func(*State, *newerCommand, uint32) (string, *api.Error) { return "stored", nil },
		func(_ *State, _ uint64, c *newerCommand, obj string, _ uint32) string { return obj + " " + c.Name })
	t.Cleanup(func() { delete(registry, newerCommandType) })
}

// The leader stamps writes with the lowest store version among its servers
// and refuses command types some server could not read; once every server
// runs the newer version, writes carry it and the cluster stays there.
func TestClusterStoreVersionGatesWrites(t *testing.T) {
	c, lead := newLedCluster(t)
	registerNewerCommand(t, StoreVersion)

	// As in a new term, m2 and m3 are not heard from yet (their joins
	// recorded versions): they count as version 1.
	lead.ForgetServerVersions()
	if v := lead.ClusterStoreVersion(); v != 1 {
		t.Fatalf("cluster store version %d before hearing from the followers, want 1", v)
	}
	cmd := &newerCommand{WriteMeta: meta(), Name: "x"}
	res, err := lead.Apply(context.Background(), cmd)
	if err != nil || res.Err == nil || res.Err.Code != api.CodeConflict || !strings.Contains(res.Err.Message, "every server") {
		t.Fatalf("newer command on a version 1 cluster: %+v, %v; want a conflict naming the upgrade", res, err)
	}
	// An empty lending limit means lend nothing from version 2 on, but
	// none (no cap) to a version 1 server: refused until every server
	// runs version 2, rather than stored as its opposite.
	lendNothing := &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1, LendingLimit: api.Resources{}}
	res, err = lead.Apply(context.Background(), lendNothing)
	if err != nil || res.Err == nil || res.Err.Code != api.CodeConflict ||
		!strings.Contains(res.Err.Message, "empty lending_limit (lend nothing) needs store version 2 on every server") {
		t.Fatalf("an empty lending limit on a version 1 cluster: %+v, %v; want a conflict naming it", res, err)
	}
	// A dry run asks CheckVersion, and must hear what the write heard.
	for _, c := range []Command{cmd, lendNothing} {
		if e := lead.CheckVersion(c); e == nil || e.Code != api.CodeConflict || !strings.Contains(e.Message, "every server") {
			t.Fatalf("CheckVersion(%s) on a version 1 cluster: %v; want the conflict Apply answers", c.Type(), e)
		}
	}
	if e := lead.CheckVersion(&RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1, LendingLimit: api.Resources{"cpus": 1}}); e != nil {
		t.Fatalf("CheckVersion of a version 1 write: %v", e)
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
	lendNothing = &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1, LendingLimit: api.Resources{}}
	if e := lead.CheckVersion(lendNothing); e != nil {
		t.Fatalf("CheckVersion of an empty lending limit on a version %d cluster: %v", StoreVersion, e)
	}
	res = applyOK(t, lead, lendNothing)
	c.waitConverged(res.Index)
	for i := range 3 {
		c.node(i).FSM().Read(func(s *State) {
			if s.RulesVersion() != StoreVersion {
				t.Fatalf("m%d: rules version %d, want %d", i+1, s.RulesVersion(), StoreVersion)
			}
			if p, _ := s.RolePolicy("eng"); p.LendingLimit == nil || len(p.LendingLimit) != 0 {
				t.Fatalf("m%d: lending limit %#v, want {} (lend nothing)", i+1, p.LendingLimit)
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

// A server that joined counts at the version it joined with, before the
// leader's poll hears from it: a new cluster takes writes of its version
// as soon as its servers joined. A refused join records nothing.
func TestJoinedServerCountsAtItsVersion(t *testing.T) {
	_, lead := newLedCluster(t) // m2 and m3 join at StoreVersion
	if v := lead.ClusterStoreVersion(); v != StoreVersion {
		t.Fatalf("cluster store version %d right after every server joined at %d", v, StoreVersion)
	}
	role := &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1}
	applyOK(t, lead, role)
	if role.Rules != StoreVersion {
		t.Fatalf("stamped %d, want %d", role.Rules, StoreVersion)
	}
	// Refused for a version above 1, so that a recorded version would show.
	var tooOld *JoinVersionError
	if err := lead.AddVoter("m9", "m9", StoreVersion-1); !errors.As(err, &tooOld) {
		t.Fatalf("join of a version %d server: %v, want a JoinVersionError", StoreVersion-1, err)
	}
	if v := lead.ServerVersion("m9"); v != 1 {
		t.Fatalf("the refused join recorded version %d", v)
	}
}

// A write waits while a join is decided: it is stamped with the version of
// the configuration the joiner is in, never with one computed before an
// older server joined (which would send that server an entry it cannot
// read), and a server older than a stamped write may not join.
func TestStampingWaitsForAJoin(t *testing.T) {
	c := newInmemCluster(t, 4)
	if err := c.node(0).Bootstrap(); err != nil {
		t.Fatal(err)
	}
	lead := c.node(c.readyLeader())
	if err := lead.AddVoter("m2", c.node(1).RaftAddress(), StoreVersion); err != nil {
		t.Fatal(err)
	}
	// The leader's poll then hears m2 run version 1 (restarted on an older
	// release before any write was stamped): the cluster is at version 1,
	// and m3, a version 1 server too, may join.
	lead.SetServerVersion("m2", 1)
	role := &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1}
	type outcome struct {
		res Result
		err error
	}
	written := make(chan outcome, 1)
	waited := false
	lead.hooks.afterJoinCheck = func() {
		// While m3 joins, the leader hears that m2 runs version 2, and a
		// write comes in.
		lead.SetServerVersion("m2", StoreVersion)
		waits := make(chan struct{})
		lead.hooks.writeWaits = func() { close(waits) }
		go func() {
			res, err := lead.Apply(context.Background(), role)
			written <- outcome{res, err}
		}()
		select {
		case <-waits:
			waited = true
		case o := <-written: // it did not wait: proposed before m3 joined
			written <- o
		}
	}
	if err := lead.AddVoter("m3", c.node(2).RaftAddress(), 1); err != nil {
		t.Fatal(err)
	}
	lead.hooks.afterJoinCheck = nil
	o := <-written
	if o.err != nil || o.res.Err != nil {
		t.Fatalf("write: %+v, %v", o.res, o.err)
	}
	if !waited || role.Rules != 0 {
		t.Fatalf("the write waited for the join: %v; stamped %d, want unstamped (version 1): m3 runs version 1", waited, role.Rules)
	}
	lead.FSM().Read(func(s *State) {
		if s.RulesVersion() != 1 {
			t.Fatalf("rules version %d with a version 1 server in the cluster", s.RulesVersion())
		}
	})

	// Once writes are stamped with version 2, a version 1 server may not
	// join; a version 2 server may.
	lead.SetServerVersion("m3", StoreVersion)
	role = &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2}
	applyOK(t, lead, role)
	if role.Rules != StoreVersion {
		t.Fatalf("stamped %d with every server at %d", role.Rules, StoreVersion)
	}
	var tooOld *JoinVersionError
	if err := lead.AddVoter("m4", c.node(3).RaftAddress(), 1); !errors.As(err, &tooOld) || tooOld.Cluster != StoreVersion {
		t.Fatalf("join of a version 1 server into a version %d cluster: %v, want a JoinVersionError", StoreVersion, err)
	}
	if got := serverIDs(t, lead); fmt.Sprint(got) != "[m1 m2 m3]" {
		t.Fatalf("the refused join changed the configuration: %v", got)
	}
	if err := lead.AddVoter("m4", c.node(3).RaftAddress(), StoreVersion); err != nil {
		t.Fatal(err)
	}
	c.waitConverged(applyOK(t, lead, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 3}).Index)
}
