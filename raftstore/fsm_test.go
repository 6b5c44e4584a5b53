package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/hashicorp/raft"
)

// randomCommands returns a reproducible mix of valid and invalid commands
// over a few names, so that they collide: updates, deletes of missing
// objects, stale versions, hierarchy and capacity conflicts, agents that come
// back under another id or name.
func randomCommands(seed int64, n int) []Command {
	r := rand.New(rand.NewSource(seed))
	pick := func(options ...string) string { return options[r.Intn(len(options))] }
	roles := []string{"a", "a/b", "a/b/c", "a/d", "b", "b/x", "c", "*", "a//b"}
	amount := func() float64 {
		if r.Intn(25) == 0 {
			return -1
		}
		return float64(r.Intn(40)) / 4
	}
	resources := func() api.Resources {
		res := api.Resources{}
		for _, name := range []string{"cpus", "mem", "gpus"} {
			if r.Intn(3) > 0 {
				res[name] = amount()
			}
		}
		if r.Intn(50) == 0 {
			res["Bad"] = 1
		}
		return res
	}
	var cmds []Command
	for i := range n {
		m := WriteMeta{Time: testTime.Add(time.Duration(i) * time.Second), Principal: pick("alice", "bob", "")}
		m.Force = r.Intn(8) == 0
		switch r.Intn(12) {
		case 0:
			m.IfNoneMatch = true
		case 1:
			m.IfMatch = uint64(1 + r.Intn(i+1))
		}
		var c Command
		switch k := r.Intn(23); {
		case k < 6:
			limits := resources()
			if r.Intn(3) == 0 {
				limits = nil
			}
			c = &QuotaSet{WriteMeta: m, Role: pick(roles...), Guarantees: resources(), Limits: limits}
		case k < 8:
			c = &QuotaDelete{WriteMeta: m, Role: pick(roles...)}
		case k < 9:
			c = &RoleSet{WriteMeta: m, Role: pick(roles...), Weight: amount(), LendingLimit: resources()}
		case k < 10:
			c = &RoleDelete{WriteMeta: m, Role: pick(roles...)}
		case k < 12:
			c = &ReservationSet{WriteMeta: m, Name: pick("r1", "r2", "r3", "r4"), Agent: pick("n1", "n2", "n3", "n4"),
				Role: pick(roles...), Resources: resources()}
		case k < 13:
			c = &ReservationDelete{WriteMeta: m, Name: pick("r1", "r2", "r3", "r4")}
		case k < 15:
			c = &AgentAdmit{WriteMeta: m, ID: pick("i1", "i2", "i3", "i4"), Name: pick("n1", "n2", "n3"),
				Hostname: pick("h1", "h2"), Resources: resources()}
		case k < 16:
			c = &AgentRemove{WriteMeta: m, ID: pick("i1", "i2", "i3", "i4")}
		case k < 17:
			q := 1 + float64(r.Intn(100))/3
			qp := &q
			if r.Intn(4) == 0 {
				qp = nil
			}
			c = &RateLimitSet{WriteMeta: m, Principal: pick("p1", "p2", "p3", ""), Label: pick("", "", "l1", "l2", "bad label"),
				QPS: qp, Burst: r.Intn(5) - 1, Capacity: r.Intn(5)}
		case k < 18:
			switch r.Intn(3) {
			case 0:
				c = &RateLimitDelete{WriteMeta: m, Principal: pick("p1", "p2", "p3"), Label: pick("", "", "l1", "l2")}
			case 1:
				c = &RateLimitDefaultSet{WriteMeta: m, QPS: qps(float64(r.Intn(10))), Burst: r.Intn(3), Capacity: r.Intn(3)}
			default:
				c = &RateLimitDefaultDelete{WriteMeta: m}
			}
		case k < 19:
			rc := &RateLimitConfigReplace{WriteMeta: m}
			for range r.Intn(4) {
				rc.Limits = append(rc.Limits, RateLimitSet{Principal: pick("p1", "p2", "p3", "p4"), Label: pick("", "", "", "l1"),
					QPS: qps(float64(r.Intn(5))), Burst: r.Intn(3), Capacity: r.Intn(3)})
			}
			if r.Intn(2) == 0 {
				rc.Default = &RateLimitDefaultSet{QPS: qps(float64(1 + r.Intn(5))), Burst: 1 + r.Intn(3), Capacity: r.Intn(3)}
			}
			c = rc
		case k < 20:
			c = randomACLCommand(r, m)
		default:
			switch r.Intn(4) {
			case 0:
				c = &ServerSet{WriteMeta: m, ID: pick("m1", "m2"), RaftAddress: pick("r1", "r2"), APIAddress: pick("a1", "")}
			case 1:
				c = &ServerRemove{WriteMeta: m, ID: pick("m1", "m2")}
			case 2:
				// Roles come from the quota roles, "*" and "a//b" among them,
				// and may repeat; capabilities are sometimes unknown.
				fw := &FrameworkSet{WriteMeta: m, ID: pick("f1", "f2", "f3"), Name: pick("spark", "batch", ""),
					Principal: pick("p1", "p2", ""), FailoverTimeoutSeconds: float64(r.Intn(5) - 1)}
				for range 1 + r.Intn(2) {
					fw.Roles = append(fw.Roles, pick(roles...))
				}
				if r.Intn(3) == 0 {
					fw.Capabilities = []string{pick(api.CapabilityRevocableResources, api.CapabilityRevocableResources, "GPU_RESOURCES")}
				}
				c = fw
			default:
				c = &FrameworkRemove{WriteMeta: m, ID: pick("f1", "f2", "f3")}
			}
		}
		// What only version 3 stores is proposed as a version 3 leader
		// does: validated and normalized, stamped. An invalid one goes
		// unstamped, for Apply to judge by version 1's rules.
		if need, _ := neededVersion(c); need >= 3 && c.validate(3) == nil {
			Meta(c).Rules = 3
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// randomACLCommand returns an ACL command over a few names: tokens naming
// missing policies, policies deleted under tokens, bad rules, a second
// bootstrap, new tokens without a hash.
func randomACLCommand(r *rand.Rand, m WriteMeta) Command {
	pick := func(options ...string) string { return options[r.Intn(len(options))] }
	hash := func() SecretHash {
		if r.Intn(6) == 0 {
			return SecretHash{}
		}
		var h SecretHash
		r.Read(h[:])
		return h
	}
	switch r.Intn(6) {
	case 0, 1:
		p := &ACLPolicySet{WriteMeta: m, Name: pick("pol1", "pol2", "pol3", "bad name"), Description: pick("", "ops")}
		for range r.Intn(3) {
			rule := api.ACLRule{Object: pick(append(api.ACLObjects, "bogus")...), Access: pick(api.ACLRead, api.ACLWrite, api.ACLRegister)}
			if r.Intn(2) == 0 {
				rule.Roles = []string{pick("eng/*", "*", "a", "bad glob!")}
			}
			p.Rules = append(p.Rules, rule)
		}
		return p
	case 2:
		return &ACLPolicyDelete{WriteMeta: m, Name: pick("pol1", "pol2", "pol3")}
	case 3:
		if r.Intn(4) == 0 {
			return &ACLBootstrap{WriteMeta: m, Accessor: pick("boot", "tok1"), SecretHash: hash()}
		}
		return &ACLTokenDelete{WriteMeta: m, Accessor: pick("tok1", "tok2", "tok3", "boot")}
	default:
		t := &ACLTokenSet{WriteMeta: m, Accessor: pick("tok1", "tok2", "tok3", "boot"), Description: pick("", "ci"),
			Principal: pick("", "", "p1", "bad principal"), Management: r.Intn(5) == 0, SecretHash: hash()}
		for range r.Intn(3) {
			t.Policies = append(t.Policies, pick("pol1", "pol2", "pol3", "pol1"))
		}
		return t
	}
}

func fsmSnapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	var err error
	f.Read(func(s *State) { err = WriteSnapshot(&buf, s) })
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withoutAudit renders the objects of a state, for a cheap comparison.
func withoutAudit(t testing.TB, s *State) []byte {
	t.Helper()
	c := s.clone()
	c.audit = nil
	return snapshotBytes(t, c)
}

// TestFSMDeterminism applies the same random commands to fresh FSMs, and to
// one restored from a snapshot taken half way: all end byte for byte equal.
func TestFSMDeterminism(t *testing.T) {
	for _, seed := range []int64{1, 2} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			const n = 3000
			cmds := randomCommands(seed, n)
			a, b := NewFSM(nil), NewFSM(nil)
			store := raft.NewInmemSnapshotStore()
			accepted := map[string]int{}
			codes := map[string]int{}
			for i, c := range cmds {
				index := uint64(i + 1)
				var before []byte
				var auditLen int
				var rulesVersion uint32
				a.Read(func(s *State) { before, auditLen, rulesVersion = withoutAudit(t, s), len(s.audit), s.rulesVersion })
				res := a.Apply(logEntry(t, index, c)).(Result)
				b.Apply(logEntry(t, index, c))
				a.Read(func(s *State) {
					if res.Err != nil {
						codes[res.Err.Code]++
						unchanged := s.clone()
						unchanged.index = index - 1
						// A rejected entry still commits the cluster to
						// its version (apply): that is no change here.
						unchanged.rulesVersion = rulesVersion
						if after := withoutAudit(t, unchanged); !bytes.Equal(before, after) || len(s.audit) != auditLen {
							t.Fatalf("command %d (%s) rejected with %v but changed the state", i, cmds[i].Type(), res.Err)
						}
						return
					}
					accepted[cmds[i].Type().String()]++
					checkInvariants(t, s)
				})
				if index == n/2 {
					persist(t, a, store)
				}
			}
			for _, typ := range allTypes() {
				if accepted[typ.String()] == 0 {
					t.Errorf("no %s was accepted: the generator does not exercise it", typ)
				}
			}
			for _, code := range []string{api.CodeInvalidArgument, api.CodeNotFound, api.CodeCapacityExceeded, api.CodePreconditionFailed} {
				if codes[code] == 0 {
					t.Errorf("no command was rejected with %s", code)
				}
			}
			t.Logf("accepted %v, rejected %v", accepted, codes)

			want := fsmSnapshotBytes(t, a)
			if got := fsmSnapshotBytes(t, b); !bytes.Equal(got, want) {
				t.Fatal("two FSMs applying the same log differ")
			}

			c := NewFSM(nil)
			restore(t, c, store)
			for i := n / 2; i < n; i++ {
				c.Apply(logEntry(t, uint64(i+1), cmds[i]))
			}
			if got := fsmSnapshotBytes(t, c); !bytes.Equal(got, want) {
				t.Fatal("an FSM restored half way and fed the rest of the log differs from one fed the whole log")
			}
			a.Read(func(sa *State) {
				c.Read(func(sc *State) {
					if !reflect.DeepEqual(sa, sc) {
						t.Fatal("restored state equals in bytes but not in memory")
					}
				})
			})
		})
	}
}

func persist(t testing.TB, f *FSM, store raft.SnapshotStore) {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var index uint64
	f.Read(func(s *State) { index = s.Index() })
	sink, err := store.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
}

func restore(t testing.TB, f *FSM, store raft.SnapshotStore) {
	t.Helper()
	metas, err := store.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("list snapshots: %v, %d", err, len(metas))
	}
	_, rc, err := store.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(rc); err != nil {
		t.Fatal(err)
	}
}

func TestFSMSnapshotRestore(t *testing.T) {
	src := NewFSM(nil)
	for i, c := range richCommands() {
		src.Apply(logEntry(t, uint64(i+1), c))
	}
	atSnapshot := fsmSnapshotBytes(t, src)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Writes after Snapshot must not leak into what Persist writes later.
	next := uint64(len(richCommands()) + 1)
	src.Apply(logEntry(t, next, &QuotaDelete{WriteMeta: meta(), Role: "eng/ml"}))
	src.Apply(logEntry(t, next+1, &AgentAdmit{WriteMeta: meta(), ID: "a9", Name: "node-9", Resources: api.Resources{"cpus": 1}}))
	src.Apply(logEntry(t, next+2, &RoleSet{WriteMeta: meta(), Role: "late", Weight: 9}))
	if bytes.Equal(fsmSnapshotBytes(t, src), atSnapshot) {
		t.Fatal("later writes changed nothing: the test proves nothing")
	}
	store := raft.NewInmemSnapshotStore()
	sink, err := store.Create(raft.SnapshotVersionMax, next-1, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	// The target holds objects the snapshot lacks; Restore must drop them.
	dst := NewFSM(nil)
	for i, c := range randomCommands(7, 300) {
		dst.Apply(logEntry(t, uint64(i+1), c))
	}
	dst.Apply(logEntry(t, 301, &RoleSet{WriteMeta: meta(), Role: "only-in-dst", Weight: 3}))
	var calls []Result
	dst.OnApply(func(c Command, res Result) {
		if c != nil {
			t.Errorf("restore reported command %v", c)
		}
		calls = append(calls, res)
	})
	restore(t, dst, store)
	if got := fsmSnapshotBytes(t, dst); !bytes.Equal(got, atSnapshot) {
		t.Fatalf("restored state differs from the snapshot:\n%s\nwant\n%s", got, atSnapshot)
	}
	dst.Read(func(s *State) {
		if _, ok := s.RolePolicy("only-in-dst"); ok {
			t.Fatal("restore kept an object the snapshot does not have")
		}
		checkInvariants(t, s)
	})
	if len(calls) != 1 || calls[0].Index != next-1 {
		t.Fatalf("OnApply after restore: %+v, want one call at index %d", calls, next-1)
	}
}

func TestFSMRestoreRejectsBadSnapshots(t *testing.T) {
	tests := map[string]string{
		"empty":         ``,
		"garbage":       `not json`,
		"wrong format":  `{"format": 4, "index": 5}`,
		"no format":     `{"index": 5}`,
		"unknown field": `{"format": 1, "index": 5, "tokens": []}`,
		"truncated":     `{"format": 1, "index": 5, "quotas": [`,
		"bad audit":     `{"format": 1, "audit": [{"index": 1, "before": {"a": }}]}`,
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			f := NewFSM(nil)
			f.Apply(logEntry(t, 1, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2}))
			before := fsmSnapshotBytes(t, f)
			rc := &closeRecorder{Reader: bytes.NewReader([]byte(data))}
			if err := f.Restore(rc); err == nil {
				t.Fatal("restored a bad snapshot")
			}
			if !rc.closed {
				t.Error("Restore did not close its reader")
			}
			if got := fsmSnapshotBytes(t, f); !bytes.Equal(got, before) {
				t.Fatal("a failed restore changed the state")
			}
		})
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// failingSink stands in for a snapshot store whose disk fails mid-write.
type failingSink struct {
	written   int
	cancelled bool
	closed    bool
}

func (s *failingSink) Write(p []byte) (int, error) {
	if s.written+len(p) > 64 {
		return 0, errors.New("disk full")
	}
	s.written += len(p)
	return len(p), nil
}
func (s *failingSink) Close() error  { s.closed = true; return nil }
func (s *failingSink) ID() string    { return "failing" }
func (s *failingSink) Cancel() error { s.cancelled = true; return nil }

func TestFSMPersistCancelsOnError(t *testing.T) {
	f := NewFSM(nil)
	for i, c := range richCommands() {
		f.Apply(logEntry(t, uint64(i+1), c))
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &failingSink{}
	if err := snap.Persist(sink); err == nil {
		t.Fatal("Persist succeeded on a failing sink")
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("sink cancelled %v, closed %v: want cancelled and not closed", sink.cancelled, sink.closed)
	}
}

func TestFSMOnApply(t *testing.T) {
	f := NewFSM(nil)
	var got []string
	f.OnApply(func(c Command, res Result) {
		// The callback runs outside the lock: reading the state must not deadlock.
		f.Read(func(s *State) {})
		code := ""
		if res.Err != nil {
			code = res.Err.Code
		}
		got = append(got, fmt.Sprintf("%d %s %s", res.Index, c.Type(), code))
	})
	f.Apply(logEntry(t, 1, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2}))
	f.Apply(logEntry(t, 2, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 0}))
	f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: []byte{200, '{', '}'}})
	want := []string{"1 role.set ", "2 role.set invalid_argument"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OnApply calls %q, want %q", got, want)
	}
}

// TestFSMConcurrentUse reads, snapshots and persists while commands apply;
// run with -race it checks that stored objects are never written in place.
func TestFSMConcurrentUse(t *testing.T) {
	f := NewFSM(nil)
	cmds := randomCommands(11, 1500)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			var quotas []api.Quota
			var agents []AgentRecord
			f.Read(func(s *State) {
				quotas, agents = s.Quotas(), s.Agents()
				_ = s.AgentCapacity()
				_ = s.Audit(0, 10)
			})
			// Objects read may be kept and read after the lock is released.
			for _, q := range quotas {
				_ = q.Guarantees.String() + q.Limits.String()
			}
			for _, a := range agents {
				_ = a.Resources.String()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			snap, err := f.Snapshot()
			if err != nil {
				t.Error(err)
				return
			}
			sink := &bufferSink{}
			if err := snap.Persist(sink); err != nil {
				t.Error(err)
				return
			}
			if _, err := ReadSnapshot(&sink.buf); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i, c := range cmds {
		f.Apply(logEntry(t, uint64(i+1), c))
	}
	close(done)
	wg.Wait()
}

type bufferSink struct{ buf bytes.Buffer }

func (s *bufferSink) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *bufferSink) Close() error                { return nil }
func (s *bufferSink) ID() string                  { return "buffer" }
func (s *bufferSink) Cancel() error               { return nil }
