package raftstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// checkInvariants checks what every sequence of accepted commands must keep
// true, whatever the order: the quota hierarchy rules, a consistent agent
// registry, a framework registry of records that pass their own check,
// reservation statuses that match their agents, and an ordered, bounded
// audit trail.
func checkInvariants(t testing.TB, s *State) {
	t.Helper()
	for role, q := range s.quotas {
		if q.Role != role || q.Version > s.index {
			t.Fatalf("quota %s stored as %+v at index %d", role, q, s.index)
		}
		for name, g := range q.Guarantees {
			if l, ok := q.Limits[name]; ok && g > l {
				t.Fatalf("quota %s: guarantee %v %s above its limit %v", role, g, name, l)
			}
		}
		children := api.Resources{}
		for other, oq := range s.quotas {
			if !api.IsDescendant(other, role) {
				continue
			}
			for name, l := range oq.Limits {
				if pl, ok := q.Limits[name]; ok && l > pl {
					t.Fatalf("quota %s: limit %v %s above the limit %v of its ancestor %s", other, l, name, pl, role)
				}
			}
			if a, _ := nearestQuotaAncestor(quotaView{stored: s.quotas}, other); a == role {
				children.Add(oq.Guarantees)
			}
		}
		for name, sum := range children {
			if sum > q.Guarantees[name] {
				t.Fatalf("quota %s: children guarantee %v %s, more than its %v", role, sum, name, q.Guarantees[name])
			}
		}
	}

	if len(s.agents) != len(s.agentIDs) {
		t.Fatalf("%d agents by id but %d by name: %v", len(s.agents), len(s.agentIDs), s.agentIDs)
	}
	for name, id := range s.agentIDs {
		if a, ok := s.agents[id]; !ok || a.Name != name || a.ID != id {
			t.Fatalf("agent name %s → id %s → %+v (found %v)", name, id, a, ok)
		}
	}

	for id, f := range s.frameworks {
		if f.ID != id || f.Version == 0 || f.Version > s.index {
			t.Fatalf("framework %s stored as %+v at index %d", id, f, s.index)
		}
		again := &FrameworkSet{ID: f.ID, Name: f.Name, Principal: f.Principal, Roles: f.Roles,
			Capabilities: f.Capabilities, FailoverTimeoutSeconds: f.FailoverTimeoutSeconds}
		if _, e := s.checkFrameworkSet(again, s.RulesVersion()); e != nil {
			t.Fatalf("framework %s stored as %+v, which its own check rejects: %v", id, f, e)
		}
	}

	for key, l := range s.rateLimits {
		if l.Principal != key.principal || l.Label != key.label || l.Version == 0 || l.Version > s.index {
			t.Fatalf("rate limit %+v stored as %+v at index %d", key, l, s.index)
		}
	}
	for name, p := range s.aclPolicies {
		if p.Name != name || p.Version == 0 || p.Version > s.index || api.ValidateACLRules(p.Rules) != nil {
			t.Fatalf("policy %s stored as %+v at index %d", name, p, s.index)
		}
	}
	for accessor, tok := range s.aclTokens {
		tk := tok.token
		if tk.Accessor != accessor || tk.Principal == "" || tk.Secret != "" || tok.hash.IsZero() || tk.Version == 0 || tk.Version > s.index ||
			tk.Policies == nil || !slices.IsSorted(tk.Policies) || len(slices.Compact(slices.Clone(tk.Policies))) != len(tk.Policies) {
			t.Fatalf("token %s stored as %+v (hash set: %v) at index %d", accessor, tk, !tok.hash.IsZero(), s.index)
		}
		for _, p := range tk.Policies {
			if _, ok := s.aclPolicies[p]; !ok {
				t.Fatalf("token %s names policy %s, which does not exist", accessor, p)
			}
		}
	}

	free := map[string]api.Resources{}
	for _, a := range s.agents {
		free[a.Name] = a.Resources.Clone()
	}
	all := s.Reservations()
	sort.Slice(all, func(i, j int) bool {
		if all[i].Version != all[j].Version {
			return all[i].Version < all[j].Version
		}
		return all[i].Name < all[j].Name
	})
	for _, r := range all {
		want := api.ReservationPending
		if f, ok := free[r.Agent]; ok && f.Contains(r.Resources) {
			want = api.ReservationActive
			f.Subtract(r.Resources)
		}
		if r.Status != want {
			t.Fatalf("reservation %s on %s is %s, want %s", r.Name, r.Agent, r.Status, want)
		}
	}

	if len(s.audit) > MaxAuditEntries {
		t.Fatalf("%d audit entries, more than %d", len(s.audit), MaxAuditEntries)
	}
	for i := 1; i < len(s.audit); i++ {
		if s.audit[i].Index <= s.audit[i-1].Index {
			t.Fatalf("audit entry %d has index %d after %d", i, s.audit[i].Index, s.audit[i-1].Index)
		}
	}
}

// TestVersionsAreRaftIndexes applies commands at the indexes Raft would give
// them, with gaps as configuration entries and rejected commands leave.
func TestVersionsAreRaftIndexes(t *testing.T) {
	s := NewState()
	at := func(index uint64, c Command) Result {
		t.Helper()
		res := s.apply(index, c)
		if res.Err != nil {
			t.Fatalf("%s at %d: %v", c.Type(), index, res.Err)
		}
		if s.Index() != index {
			t.Fatalf("state index %d after applying index %d", s.Index(), index)
		}
		return res
	}
	at(3, admit("n1", api.Resources{"cpus": 10}))
	at(7, quotaSet("eng", api.Resources{"cpus": 1}, nil))
	at(9, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2})
	at(12, reserve("db", "n1", "db", api.Resources{"cpus": 1}))
	at(15, &RateLimitSet{WriteMeta: meta(), Principal: "spark", QPS: qps(1), Burst: 1})
	at(17, &RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(1), Burst: 1})
	at(20, &ServerSet{WriteMeta: meta(), ID: "m1", RaftAddress: "10.0.0.1:7000", APIAddress: "http://10.0.0.1:5050"})
	at(21, quotaSet("eng", api.Resources{"cpus": 2}, nil))
	at(24, &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Roles: []string{"*"}})
	// A rejected command at 30 advances the index but no version.
	if res := s.apply(30, quotaSet("eng", api.Resources{"cpus": 11}, nil)); res.Err == nil {
		t.Fatal("over-capacity quota accepted")
	}
	if s.Index() != 30 {
		t.Fatalf("index %d after a rejected command at 30", s.Index())
	}

	q, _ := s.Quota("eng")
	p, _ := s.RolePolicy("eng")
	r, _ := s.Reservation("db")
	l, _ := s.RateLimit("spark")
	d, _ := s.RateLimitDefault()
	a, _ := s.AgentByName("n1")
	srv, _ := s.Server("m1")
	f, _ := s.Framework("f1")
	got := []uint64{a.Version, q.Version, p.Version, r.Version, l.Version, d.Version, srv.Version, f.Version}
	if want := []uint64{3, 21, 9, 12, 15, 17, 20, 24}; !reflect.DeepEqual(got, want) {
		t.Fatalf("versions (agent, quota, role, reservation, rate limit, default, server, framework) %v, want %v", got, want)
	}
}

func TestAuditEntries(t *testing.T) {
	at := time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.UTC)
	stamp := func(c Command) Command {
		m := Meta(c)
		m.Time = at
		m.Principal = "alice"
		return c
	}
	tests := map[string]struct {
		setup      []Command
		cmd        Command
		wantAction string
		wantObject string
		wantBefore string
		// wantAfter has %d for the entry's index where the object carries its version.
		wantAfter string
	}{
		"quota created": {
			cmd:        forcedQuotaSet("eng/ml", api.Resources{"cpus": 1}, api.Resources{"mem": 2}),
			wantAction: "quota.set", wantObject: "quota/eng/ml",
			wantBefore: `null`,
			wantAfter:  `{"role":"eng/ml","guarantees":{"cpus":1},"limits":{"mem":2},"version":%d}`,
		},
		"quota updated": {
			setup:      []Command{forcedQuotaSet("eng", api.Resources{"cpus": 1}, nil)},
			cmd:        forcedQuotaSet("eng", api.Resources{"cpus": 2}, nil),
			wantAction: "quota.set", wantObject: "quota/eng",
			wantBefore: `{"role":"eng","guarantees":{"cpus":1},"limits":{},"version":1}`,
			wantAfter:  `{"role":"eng","guarantees":{"cpus":2},"limits":{},"version":%d}`,
		},
		"quota deleted": {
			setup:      []Command{forcedQuotaSet("eng", api.Resources{"cpus": 1}, nil)},
			cmd:        &QuotaDelete{WriteMeta: meta(), Role: "eng"},
			wantAction: "quota.delete", wantObject: "quota/eng",
			wantBefore: `{"role":"eng","guarantees":{"cpus":1},"limits":{},"version":1}`,
			wantAfter:  `null`,
		},
		"role set": {
			cmd:        &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2, LendingLimit: api.Resources{"cpus": 1}},
			wantAction: "role.set", wantObject: "role/eng",
			wantBefore: `null`,
			wantAfter:  `{"role":"eng","weight":2,"lending_limit":{"cpus":1},"version":%d}`,
		},
		"role deleted": {
			setup:      []Command{&RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2}},
			cmd:        &RoleDelete{WriteMeta: meta(), Role: "eng"},
			wantAction: "role.delete", wantObject: "role/eng",
			wantBefore: `{"role":"eng","weight":2,"version":1}`,
			wantAfter:  `null`,
		},
		"reservation set": {
			setup:      []Command{admit("n1", api.Resources{"cpus": 1})},
			cmd:        reserve("db", "n1", "db", api.Resources{"cpus": 1}),
			wantAction: "reservation.set", wantObject: "reservation/db",
			wantBefore: `null`,
			wantAfter:  `{"name":"db","agent":"n1","role":"db","resources":{"cpus":1},"version":%d,"status":"active"}`,
		},
		"reservation deleted": {
			setup:      []Command{admit("n1", api.Resources{"cpus": 1}), reserve("db", "n1", "db", api.Resources{"cpus": 1})},
			cmd:        &ReservationDelete{WriteMeta: meta(), Name: "db"},
			wantAction: "reservation.delete", wantObject: "reservation/db",
			wantBefore: `{"name":"db","agent":"n1","role":"db","resources":{"cpus":1},"version":2,"status":"active"}`,
			wantAfter:  `null`,
		},
		"rate limit set": {
			cmd:        &RateLimitSet{WriteMeta: meta(), Principal: "spark", QPS: qps(55.5), Burst: 56, Capacity: 1000},
			wantAction: "ratelimit.set", wantObject: "ratelimit/spark",
			wantBefore: `null`,
			wantAfter:  `{"principal":"spark","qps":55.5,"burst":56,"capacity":1000,"version":%d}`,
		},
		"rate limit deleted": {
			setup:      []Command{&RateLimitSet{WriteMeta: meta(), Principal: "spark", Capacity: 10}},
			cmd:        &RateLimitDelete{WriteMeta: meta(), Principal: "spark"},
			wantAction: "ratelimit.delete", wantObject: "ratelimit/spark",
			wantBefore: `{"principal":"spark","qps":null,"burst":0,"capacity":10,"version":1}`,
			wantAfter:  `null`,
		},
		"default rate limit set": {
			setup:      []Command{&RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(1), Burst: 1, Capacity: 1}},
			cmd:        &RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(33.3), Burst: 34, Capacity: 1000},
			wantAction: "ratelimit_default.set", wantObject: "ratelimit_default",
			wantBefore: `{"qps":1,"burst":1,"capacity":1,"version":1}`,
			wantAfter:  `{"qps":33.3,"burst":34,"capacity":1000,"version":%d}`,
		},
		"default rate limit deleted": {
			setup:      []Command{&RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(1), Burst: 1, Capacity: 1}},
			cmd:        &RateLimitDefaultDelete{WriteMeta: meta()},
			wantAction: "ratelimit_default.delete", wantObject: "ratelimit_default",
			wantBefore: `{"qps":1,"burst":1,"capacity":1,"version":1}`,
			wantAfter:  `null`,
		},
		"rate limits replaced": {
			setup: []Command{&RateLimitSet{WriteMeta: meta(), Principal: "old", QPS: qps(1), Burst: 1, Capacity: 1}},
			cmd: &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{{Principal: "spark", QPS: qps(2), Burst: 2, Capacity: 3}},
				Default: &RateLimitDefaultSet{QPS: qps(4), Burst: 5, Capacity: 6}},
			wantAction: "ratelimits.replace", wantObject: "ratelimits",
			wantBefore: `{"limits":[{"principal":"old","qps":1,"burst":1,"capacity":1}]}`,
			wantAfter:  `{"limits":[{"principal":"spark","qps":2,"burst":2,"capacity":3}],"aggregate_default_qps":4,"aggregate_default_burst":5,"aggregate_default_capacity":6}`,
		},
		"agent admitted": {
			cmd:        &AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Hostname: "h1", Resources: api.Resources{"cpus": 2}, Capabilities: []string{"TASK_RESOURCE_LIMITS"}},
			wantAction: "agent.admit", wantObject: "agent/n1",
			wantBefore: `null`,
			wantAfter:  `{"id":"a1","name":"n1","hostname":"h1","resources":{"cpus":2},"capabilities":["TASK_RESOURCE_LIMITS"],"admitted_at":"2025-06-07T08:09:10.123456789Z","version":%d}`,
		},
		"agent removed": {
			setup:      []Command{&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Hostname: "h1", Resources: api.Resources{"cpus": 2}}},
			cmd:        &AgentRemove{WriteMeta: meta(), ID: "a1"},
			wantAction: "agent.remove", wantObject: "agent/n1",
			wantBefore: `{"id":"a1","name":"n1","hostname":"h1","resources":{"cpus":2},"admitted_at":"2025-03-01T12:00:00Z","version":1}`,
			wantAfter:  `null`,
		},
		"framework registered": {
			cmd: &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Principal: "spark-sched",
				Roles: []string{"*", "eng"}, Capabilities: []string{"REVOCABLE_RESOURCES"}, FailoverTimeoutSeconds: 60},
			wantAction: "framework.set", wantObject: "framework/f1",
			wantBefore: `null`,
			wantAfter:  `{"id":"f1","name":"spark","principal":"spark-sched","roles":["*","eng"],"capabilities":["REVOCABLE_RESOURCES"],"failover_timeout_seconds":60,"registered_at":"2025-06-07T08:09:10.123456789Z","version":%d}`,
		},
		"framework re-subscribed": {
			setup:      []Command{&FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Roles: []string{"*"}}},
			cmd:        &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark 2", Roles: []string{"eng"}},
			wantAction: "framework.set", wantObject: "framework/f1",
			wantBefore: `{"id":"f1","name":"spark","roles":["*"],"registered_at":"2025-03-01T12:00:00Z","version":1}`,
			wantAfter:  `{"id":"f1","name":"spark 2","roles":["eng"],"registered_at":"2025-03-01T12:00:00Z","version":%d}`,
		},
		"framework removed": {
			setup:      []Command{&FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Roles: []string{"*"}}},
			cmd:        &FrameworkRemove{WriteMeta: meta(), ID: "f1"},
			wantAction: "framework.remove", wantObject: "framework/f1",
			wantBefore: `{"id":"f1","name":"spark","roles":["*"],"registered_at":"2025-03-01T12:00:00Z","version":1}`,
			wantAfter:  `null`,
		},
		"server set": {
			cmd:        &ServerSet{WriteMeta: meta(), ID: "m1", RaftAddress: "r", APIAddress: "a"},
			wantAction: "server.set", wantObject: "server/m1",
			wantBefore: `null`,
			wantAfter:  `{"id":"m1","raft_address":"r","api_address":"a","version":%d}`,
		},
		"server removed": {
			setup:      []Command{&ServerSet{WriteMeta: meta(), ID: "m1", RaftAddress: "r", APIAddress: "a"}},
			cmd:        &ServerRemove{WriteMeta: meta(), ID: "m1"},
			wantAction: "server.remove", wantObject: "server/m1",
			wantBefore: `{"id":"m1","raft_address":"r","api_address":"a","version":1}`,
			wantAfter:  `null`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, tc.setup...)
			res := mustApply(t, s, stamp(tc.cmd))
			entries := s.Audit(res.Index-1, 0)
			if len(entries) != 1 {
				t.Fatalf("%d audit entries for one write: %+v", len(entries), entries)
			}
			e := entries[0]
			wantAfter := tc.wantAfter
			if strings.Contains(wantAfter, "%d") {
				wantAfter = fmt.Sprintf(wantAfter, res.Index)
			}
			want := api.AuditEntry{Index: res.Index, Time: at, Principal: "alice", Action: tc.wantAction, Object: tc.wantObject,
				Before: json.RawMessage(tc.wantBefore), After: json.RawMessage(wantAfter)}
			if !reflect.DeepEqual(e, want) {
				t.Fatalf("audit entry\n%+v\nwant\n%+v\n(before %s, after %s)", e, want, e.Before, e.After)
			}
		})
	}
}

func TestAuditSkipsRejectedAndUnchanged(t *testing.T) {
	s := NewState()
	mustApply(t, s, &ServerSet{WriteMeta: meta(), ID: "m1", RaftAddress: "r", APIAddress: "a"})
	applyNext(t, s, quotaSet("eng", api.Resources{"cpus": 1}, nil)) // no capacity: rejected
	res := mustApply(t, s, &ServerSet{WriteMeta: meta(), ID: "m1", RaftAddress: "r", APIAddress: "a"})
	if srv, _ := s.Server("m1"); srv.Version != 1 || res.Object.(ServerRecord).Version != 1 {
		t.Fatalf("re-setting a server unchanged moved its version to %d", srv.Version)
	}
	if entries := s.Audit(0, 0); len(entries) != 1 || entries[0].Index != 1 {
		t.Fatalf("audit %+v, want only the first server.set", entries)
	}
}

func TestAuditQuery(t *testing.T) {
	s := NewState()
	// Entries at indexes 2, 4, ..., 20: odd indexes are rejected writes.
	for i := uint64(1); i <= 20; i++ {
		c := Command(&RoleSet{WriteMeta: meta(), Role: "eng", Weight: float64(i)})
		if i%2 == 1 {
			c = &RoleSet{WriteMeta: meta(), Role: "eng", Weight: -1}
		}
		s.apply(i, c)
	}
	tests := map[string]struct {
		after uint64
		limit int
		want  []uint64
	}{
		"all":                      {after: 0, limit: 0, want: []uint64{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}},
		"negative limit is all":    {after: 0, limit: -1, want: []uint64{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}},
		"after an entry":           {after: 4, limit: 0, want: []uint64{6, 8, 10, 12, 14, 16, 18, 20}},
		"after a gap":              {after: 5, limit: 0, want: []uint64{6, 8, 10, 12, 14, 16, 18, 20}},
		"limited, oldest first":    {after: 5, limit: 3, want: []uint64{6, 8, 10}},
		"limit above what is left": {after: 15, limit: 10, want: []uint64{16, 18, 20}},
		"after the last":           {after: 20, limit: 0, want: nil},
		"far beyond":               {after: 1 << 60, limit: 5, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []uint64
			for _, e := range s.Audit(tc.after, tc.limit) {
				got = append(got, e.Index)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Audit(%d, %d) indexes %v, want %v", tc.after, tc.limit, got, tc.want)
			}
		})
	}
	// The answer is the caller's: changing it leaves the trail alone.
	s.Audit(0, 1)[0].Principal = "mallory"
	if s.Audit(0, 1)[0].Principal != "operator" {
		t.Fatal("Audit returned the state's own entries")
	}
}

func TestAuditCapped(t *testing.T) {
	s := NewState()
	const extra = 7
	for i := range MaxAuditEntries + extra {
		mustApply(t, s, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: float64(i + 1)})
	}
	all := s.Audit(0, 0)
	if len(all) != MaxAuditEntries {
		t.Fatalf("%d entries kept, want %d", len(all), MaxAuditEntries)
	}
	if all[0].Index != extra+1 || all[len(all)-1].Index != MaxAuditEntries+extra {
		t.Fatalf("kept entries %d..%d, want %d..%d", all[0].Index, all[len(all)-1].Index, extra+1, MaxAuditEntries+extra)
	}
	// The trail survives a snapshot round trip capped the same way.
	restored, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	if got := restored.Audit(0, 0); !reflect.DeepEqual(got, all) {
		t.Fatalf("restored trail differs: %d entries from %d", len(got), got[0].Index)
	}
}

func TestAgentAdmitAndRemove(t *testing.T) {
	later := testTime.Add(time.Hour)
	tests := map[string]struct {
		setup    []Command
		cmd      Command
		wantCode string
		// want lists the agents afterwards by name.
		want []AgentRecord
	}{
		"first admission": {
			cmd: &AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Hostname: "h1", Resources: api.Resources{"cpus": 1.23456}},
			want: []AgentRecord{{ID: "a1", Name: "n1", Hostname: "h1", Resources: api.Resources{"cpus": 1.235},
				AdmittedAt: testTime, Version: 1}},
		},
		"re-admission keeps the first admission time": {
			setup: []Command{&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Hostname: "h1", Resources: api.Resources{"cpus": 1}}},
			cmd: &AgentAdmit{WriteMeta: WriteMeta{Time: later}, ID: "a1", Name: "n1", Hostname: "h2",
				Resources: api.Resources{"cpus": 2}, Capabilities: []string{"X"}},
			want: []AgentRecord{{ID: "a1", Name: "n1", Hostname: "h2", Resources: api.Resources{"cpus": 2},
				Capabilities: []string{"X"}, AdmittedAt: testTime, Version: 2}},
		},
		"same name under a new id replaces the old id": {
			setup: []Command{&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Resources: api.Resources{"cpus": 1}}},
			cmd:   &AgentAdmit{WriteMeta: WriteMeta{Time: later}, ID: "a2", Name: "n1", Resources: api.Resources{"cpus": 2}},
			want:  []AgentRecord{{ID: "a2", Name: "n1", Resources: api.Resources{"cpus": 2}, AdmittedAt: testTime, Version: 2}},
		},
		"same id under a new name gives up the old name": {
			setup: []Command{
				&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Resources: api.Resources{"cpus": 1}},
				&AgentAdmit{WriteMeta: meta(), ID: "a9", Name: "n9", Resources: api.Resources{"cpus": 9}},
			},
			cmd: &AgentAdmit{WriteMeta: WriteMeta{Time: later}, ID: "a1", Name: "n2", Resources: api.Resources{"cpus": 2}},
			want: []AgentRecord{
				{ID: "a1", Name: "n2", Resources: api.Resources{"cpus": 2}, AdmittedAt: later, Version: 3},
				{ID: "a9", Name: "n9", Resources: api.Resources{"cpus": 9}, AdmittedAt: testTime, Version: 2},
			},
		},
		"removed": {
			setup: []Command{
				&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Resources: api.Resources{"cpus": 1}},
				&AgentAdmit{WriteMeta: meta(), ID: "a2", Name: "n2", Resources: api.Resources{"cpus": 1}},
			},
			cmd:  &AgentRemove{WriteMeta: meta(), ID: "a1"},
			want: []AgentRecord{{ID: "a2", Name: "n2", Resources: api.Resources{"cpus": 1}, AdmittedAt: testTime, Version: 2}},
		},
		"remove unknown": {
			cmd:      &AgentRemove{WriteMeta: meta(), ID: "a1"},
			wantCode: api.CodeNotFound,
		},
		"remove by name": {
			setup:    []Command{&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1"}},
			cmd:      &AgentRemove{WriteMeta: meta(), ID: "n1"},
			wantCode: api.CodeNotFound,
		},
		"bad id":        {cmd: &AgentAdmit{WriteMeta: meta(), ID: "", Name: "n1"}, wantCode: api.CodeInvalidArgument},
		"bad name":      {cmd: &AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n 1"}, wantCode: api.CodeInvalidArgument},
		"bad resources": {cmd: &AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Resources: api.Resources{"cpus": -1}}, wantCode: api.CodeInvalidArgument},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, tc.setup...)
			wantCode(t, applyNext(t, s, tc.cmd), tc.wantCode)
			checkInvariants(t, s)
			if tc.wantCode != "" {
				return
			}
			got := s.Agents()
			if len(got) != len(tc.want) || (len(got) > 0 && !reflect.DeepEqual(got, tc.want)) {
				t.Fatalf("agents\n%+v\nwant\n%+v", got, tc.want)
			}
			for _, a := range tc.want {
				if byID, ok := s.Agent(a.ID); !ok || !reflect.DeepEqual(byID, a) {
					t.Fatalf("Agent(%s) = %+v, %v", a.ID, byID, ok)
				}
			}
			capacity := api.Resources{}
			for _, a := range tc.want {
				capacity.Add(a.Resources)
			}
			if got := s.AgentCapacity(); !reflect.DeepEqual(got, capacity) {
				t.Fatalf("capacity %v, want %v", got, capacity)
			}
		})
	}
}

func TestFrameworkSetAndRemove(t *testing.T) {
	later := testTime.Add(time.Hour)
	spark := func(m WriteMeta) *FrameworkSet {
		return &FrameworkSet{WriteMeta: m, ID: "f1", Name: "spark", Principal: "spark-sched", Roles: []string{"*", "eng"},
			Capabilities: []string{"REVOCABLE_RESOURCES"}, FailoverTimeoutSeconds: 60}
	}
	batch := &FrameworkSet{WriteMeta: meta(), ID: "f0", Name: "batch", Roles: []string{"ops"}}
	tests := map[string]struct {
		setup    []Command
		cmd      Command
		wantCode string
		// want lists the frameworks afterwards, by id.
		want []FrameworkRecord
	}{
		"first registration": {
			cmd: spark(meta()),
			want: []FrameworkRecord{{ID: "f1", Name: "spark", Principal: "spark-sched", Roles: []string{"*", "eng"},
				Capabilities: []string{"REVOCABLE_RESOURCES"}, FailoverTimeoutSeconds: 60, RegisteredAt: testTime, Version: 1}},
		},
		"re-subscription replaces everything but the registration time": {
			setup: []Command{spark(meta())},
			cmd:   &FrameworkSet{WriteMeta: WriteMeta{Time: later}, ID: "f1", Name: "spark-v2", Roles: []string{"eng/ml"}},
			want: []FrameworkRecord{{ID: "f1", Name: "spark-v2", Roles: []string{"eng/ml"},
				RegisteredAt: testTime, Version: 2}},
		},
		"listed by id": {
			setup: []Command{spark(meta())},
			cmd:   batch,
			want: []FrameworkRecord{
				{ID: "f0", Name: "batch", Roles: []string{"ops"}, RegisteredAt: testTime, Version: 2},
				{ID: "f1", Name: "spark", Principal: "spark-sched", Roles: []string{"*", "eng"},
					Capabilities: []string{"REVOCABLE_RESOURCES"}, FailoverTimeoutSeconds: 60, RegisteredAt: testTime, Version: 1},
			},
		},
		"removed": {
			setup: []Command{spark(meta()), batch},
			cmd:   &FrameworkRemove{WriteMeta: meta(), ID: "f1"},
			want:  []FrameworkRecord{{ID: "f0", Name: "batch", Roles: []string{"ops"}, RegisteredAt: testTime, Version: 2}},
		},
		"removed and registered again starts afresh": {
			setup: []Command{spark(meta()), &FrameworkRemove{WriteMeta: meta(), ID: "f1"}},
			cmd:   &FrameworkSet{WriteMeta: WriteMeta{Time: later}, ID: "f1", Name: "spark", Roles: []string{"*"}},
			want:  []FrameworkRecord{{ID: "f1", Name: "spark", Roles: []string{"*"}, RegisteredAt: later, Version: 3}},
		},
		"remove unknown": {
			setup:    []Command{batch},
			cmd:      &FrameworkRemove{WriteMeta: meta(), ID: "f1"},
			wantCode: api.CodeNotFound,
		},
		"remove by name": {
			setup:    []Command{spark(meta())},
			cmd:      &FrameworkRemove{WriteMeta: meta(), ID: "spark"},
			wantCode: api.CodeNotFound,
		},
		"invalid re-subscription keeps the record": {
			setup:    []Command{spark(meta())},
			cmd:      &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark"},
			wantCode: api.CodeInvalidArgument,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, tc.setup...)
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, tc.wantCode)
			checkInvariants(t, s)
			if tc.wantCode != "" {
				return
			}
			got := s.Frameworks()
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("frameworks\n%+v\nwant\n%+v", got, tc.want)
			}
			for _, f := range tc.want {
				if byID, ok := s.Framework(f.ID); !ok || !reflect.DeepEqual(byID, f) {
					t.Fatalf("Framework(%s) = %+v, %v", f.ID, byID, ok)
				}
			}
			if remove, ok := tc.cmd.(*FrameworkRemove); ok {
				if _, found := s.Framework(remove.ID); found {
					t.Fatalf("framework %s survived its removal", remove.ID)
				}
				if old, isRecord := res.Object.(FrameworkRecord); !isRecord || old.ID != remove.ID {
					t.Fatalf("remove answered %#v, want the removed record", res.Object)
				}
			} else if !reflect.DeepEqual(res.Object, mustFramework(t, s, tc.cmd.(*FrameworkSet).ID)) {
				t.Fatalf("set answered %#v, want the stored record", res.Object)
			}
		})
	}
}

func mustFramework(t testing.TB, s *State, id string) FrameworkRecord {
	t.Helper()
	f, ok := s.Framework(id)
	if !ok {
		t.Fatalf("framework %s is not registered", id)
	}
	return f
}

// TestFrameworkRecordOwnsItsSlices: stored records are shared with readers,
// so they must not share the command's slices either.
func TestFrameworkRecordOwnsItsSlices(t *testing.T) {
	s := NewState()
	c := &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Roles: []string{"eng"},
		Capabilities: []string{api.CapabilityRevocableResources}}
	if res := s.apply(1, c); res.Err != nil {
		t.Fatal(res.Err)
	}
	c.Roles[0], c.Capabilities[0] = "mallory", "mallory"
	if f := mustFramework(t, s, "f1"); f.Roles[0] != "eng" || f.Capabilities[0] != api.CapabilityRevocableResources {
		t.Fatalf("the stored framework shares its slices with the command: %+v", f)
	}
}

// TestAgentRenameReleasesReservations: reservations name agents, so an agent
// that comes back under another name no longer backs the old name's
// reservations.
func TestAgentRenameReleasesReservations(t *testing.T) {
	s := NewState()
	mustApply(t, s,
		&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n1", Resources: api.Resources{"cpus": 4}},
		reserve("db", "n1", "db", api.Resources{"cpus": 2}),
		&AgentAdmit{WriteMeta: meta(), ID: "a1", Name: "n2", Resources: api.Resources{"cpus": 4}},
	)
	if r, _ := s.Reservation("db"); r.Status != api.ReservationPending {
		t.Fatalf("reservation on the old name is %s, want pending", r.Status)
	}
	if _, ok := s.AgentByName("n1"); ok {
		t.Fatal("the old name still resolves")
	}
	wantCode(t, applyNext(t, s, reserve("web", "n1", "web", api.Resources{"cpus": 1})), api.CodeConflict)
	checkInvariants(t, s)
}

func TestServers(t *testing.T) {
	s := NewState()
	set := func(id, raftAddr, apiAddr string) *ServerSet {
		return &ServerSet{WriteMeta: meta(), ID: id, RaftAddress: raftAddr, APIAddress: apiAddr}
	}
	for _, c := range []*ServerSet{set("", "r", "a"), set("m1", "", "a"), set("m1", "r", "")} {
		wantCode(t, applyNext(t, s, c), api.CodeInvalidArgument)
	}
	m2 := mustApply(t, s, set("m2", "10.0.0.2:7000", "http://10.0.0.2:5050"))
	mustApply(t, s, set("m1", "10.0.0.1:7000", "http://10.0.0.1:5050"))
	res := mustApply(t, s, set("m1", "10.0.0.1:7001", "http://10.0.0.1:5050"))
	want := []ServerRecord{
		{ID: "m1", RaftAddress: "10.0.0.1:7001", APIAddress: "http://10.0.0.1:5050", Version: res.Index},
		{ID: "m2", RaftAddress: "10.0.0.2:7000", APIAddress: "http://10.0.0.2:5050", Version: m2.Index},
	}
	if got := s.Servers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("servers %+v, want %+v", got, want)
	}
	mustApply(t, s, &ServerRemove{WriteMeta: meta(), ID: "m2"})
	wantCode(t, applyNext(t, s, &ServerRemove{WriteMeta: meta(), ID: "m2"}), api.CodeNotFound)
	if _, ok := s.Server("m2"); ok {
		t.Fatal("removed server still known")
	}
}

func TestListsSortedAndReadOnly(t *testing.T) {
	s := NewState()
	mustApply(t, s, admit("zeta", api.Resources{"cpus": 100}), admit("alpha", api.Resources{"cpus": 100}))
	for _, role := range []string{"ops", "eng/ml", "eng", "Eng"} {
		mustApply(t, s, quotaSet(role, nil, nil), &RoleSet{WriteMeta: meta(), Role: role, Weight: 1})
		mustApply(t, s, reserve("r-"+role[:2], "alpha", role, api.Resources{"cpus": 1}))
		mustApply(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "p-" + role[:2], Capacity: 1})
	}
	var quotas, roles, reservations, limits, agents []string
	for _, q := range s.Quotas() {
		quotas = append(quotas, q.Role)
	}
	for _, p := range s.RolePolicies() {
		roles = append(roles, p.Role)
	}
	for _, r := range s.Reservations() {
		reservations = append(reservations, r.Name)
	}
	for _, l := range s.RateLimits() {
		limits = append(limits, l.Principal)
	}
	for _, a := range s.Agents() {
		agents = append(agents, a.Name)
	}
	want := [][]string{
		{"Eng", "eng", "eng/ml", "ops"},
		{"Eng", "eng", "eng/ml", "ops"},
		{"r-En", "r-en", "r-op"},
		{"p-En", "p-en", "p-op"},
		{"alpha", "zeta"},
	}
	if got := [][]string{quotas, roles, reservations, limits, agents}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lists %v, want %v", got, want)
	}
	// Objects handed out are the stored values: a caller writing into
	// their maps would change replicated state behind the FSM's back, so
	// they must at least be distinct from the command's maps.
	c := quotaSet("new", api.Resources{"cpus": 1}, nil)
	if res := s.apply(s.index+1, c); res.Err != nil {
		t.Fatal(res.Err)
	}
	c.Guarantees["cpus"] = 99
	if q, _ := s.Quota("new"); q.Guarantees["cpus"] != 1 {
		t.Fatal("the stored quota shares its map with the command")
	}
}

func TestCheckDoesNotChangeState(t *testing.T) {
	s := NewState()
	mustApply(t, s, admit("n1", api.Resources{"cpus": 10}), quotaSet("eng", api.Resources{"cpus": 1}, nil))
	before := snapshotBytes(t, s)
	obj, e := s.Check(quotaSet("eng", api.Resources{"cpus": 2}, nil))
	if e != nil {
		t.Fatal(e)
	}
	// Check answers with the version the object has now; apply stamps the new one.
	if q := obj.(api.Quota); q.Version != 2 || q.Guarantees["cpus"] != 2 {
		t.Fatalf("checked object %+v", q)
	}
	if _, e := s.Check(quotaSet("eng", api.Resources{"cpus": 20}, nil)); e == nil || e.Code != api.CodeCapacityExceeded {
		t.Fatalf("check of an over-capacity quota: %v", e)
	}
	if after := snapshotBytes(t, s); string(after) != string(before) {
		t.Fatal("Check changed the state")
	}
}

type foreignCommand struct{ WriteMeta }

func (*foreignCommand) Type() MessageType          { return 100 }
func (*foreignCommand) validate(uint32) *api.Error { return nil }

func TestCheckForeignCommand(t *testing.T) {
	s := NewState()
	mustApply(t, s, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2})
	before := snapshotBytes(t, s)
	res := s.apply(2, &foreignCommand{})
	wantCode(t, res, api.CodeInternal)
	s.index = 1
	if after := snapshotBytes(t, s); !bytes.Equal(before, after) {
		t.Fatal("a command Check does not know changed the state")
	}
}
