package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/tools/freeaddr"
	"github.com/hashicorp/raft"
)

// waitTimeout bounds every wait on a cluster condition. It is generous: the
// machine is shared and the race detector slows Raft down; a test only
// spends it when something is broken.
const waitTimeout = 60 * time.Second

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leadershipEvent is one OnLeadership call and what the server's state held
// when it was made.
type leadershipEvent struct {
	node    int
	leading bool
	ready   bool
	roles   map[string]bool
}

type testCluster struct {
	t     *testing.T
	addrs []raft.ServerAddress
	trans []*raft.InmemTransport

	mu     sync.Mutex
	nodes  []*Node
	down   []bool
	events []leadershipEvent
}

func newInmemCluster(t *testing.T, size int) *testCluster {
	c := &testCluster{t: t, nodes: make([]*Node, size), down: make([]bool, size)}
	for i := range size {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("m%d", i+1)))
		c.addrs = append(c.addrs, addr)
		c.trans = append(c.trans, trans)
	}
	for i := range size {
		for j := range size {
			if i != j {
				c.trans[i].Connect(c.addrs[j], c.trans[j])
			}
		}
	}
	for i := range size {
		n, err := Open(Config{
			ID:           fmt.Sprintf("m%d", i+1),
			InMemory:     true,
			Transport:    c.trans[i],
			OnLeadership: func(leading bool) { c.recordLeadership(i, leading) },
		})
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.nodes[i] = n
		c.mu.Unlock()
	}
	t.Cleanup(func() {
		for i := range size {
			c.shutdown(i)
		}
	})
	return c
}

func (c *testCluster) node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

func (c *testCluster) recordLeadership(i int, leading bool) {
	n := c.node(i)
	e := leadershipEvent{node: i, leading: leading, ready: n.Ready(), roles: map[string]bool{}}
	n.FSM().Read(func(s *State) {
		for _, q := range s.Quotas() {
			e.roles[q.Role] = true
		}
	})
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

func (c *testCluster) leadershipEvents(node int) []leadershipEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []leadershipEvent
	for _, e := range c.events {
		if e.node == node {
			out = append(out, e)
		}
	}
	return out
}

// shutdown stops a server and cuts the others' routes to it, as a crashed
// machine would.
func (c *testCluster) shutdown(i int) {
	c.mu.Lock()
	if c.down[i] {
		c.mu.Unlock()
		return
	}
	c.down[i] = true
	c.mu.Unlock()
	for j := range c.trans {
		if j != i {
			c.trans[j].Disconnect(c.addrs[i])
		}
	}
	if err := c.node(i).Shutdown(); err != nil {
		c.t.Errorf("shut down m%d: %v", i+1, err)
	}
}

func (c *testCluster) live() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, down := range c.down {
		if !down {
			out = append(out, i)
		}
	}
	return out
}

// readyLeader waits for one live server to lead and be ready.
// newLedCluster is a 3-server in-memory cluster formed as an operator forms
// one: m1 bootstraps, leads, and adds the other two as voters.
func newLedCluster(t *testing.T) (*testCluster, *Node) {
	t.Helper()
	c := newInmemCluster(t, 3)
	if err := c.node(0).Bootstrap(); err != nil {
		t.Fatal(err)
	}
	lead := c.node(c.readyLeader())
	for i := 1; i < 3; i++ {
		if err := lead.AddVoter(c.node(i).ID(), c.node(i).RaftAddress(), StoreVersion); err != nil {
			t.Fatal(err)
		}
	}
	return c, lead
}

func (c *testCluster) readyLeader() int {
	c.t.Helper()
	leader := -1
	waitFor(c.t, "a ready leader", func() bool {
		for _, i := range c.live() {
			if c.node(i).Ready() {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

func (c *testCluster) waitConverged(index uint64) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("every live FSM to apply index %d", index), func() bool {
		for _, i := range c.live() {
			var applied uint64
			c.node(i).FSM().Read(func(s *State) { applied = s.Index() })
			if applied < index {
				return false
			}
		}
		return true
	})
	var want []byte
	for _, i := range c.live() {
		got := fsmSnapshotBytes(c.t, c.node(i).FSM())
		if want == nil {
			want = got
		} else if !bytes.Equal(got, want) {
			c.t.Fatalf("m%d's state differs from the others':\n%s\nwant\n%s", i+1, got, want)
		}
	}
}

func applyOK(t testing.TB, n *Node, c Command) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := n.Apply(ctx, c)
	if err != nil {
		t.Fatalf("apply %s on %s: %v", c.Type(), n.ID(), err)
	}
	if res.Err != nil {
		t.Fatalf("apply %s on %s: rejected: %v", c.Type(), n.ID(), res.Err)
	}
	return res
}

func serverIDs(t testing.TB, n *Node) []string {
	t.Helper()
	servers, err := n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			t.Errorf("server %s is a %v, want a voter", s.ID, s.Suffrage)
		}
		ids = append(ids, string(s.ID))
	}
	sort.Strings(ids)
	return ids
}

func TestClusterInmem(t *testing.T) {
	c := newInmemCluster(t, 3)
	ctx := context.Background()

	// Only the first server bootstraps; it leads a cluster of one.
	if c.node(0).HasExistingState() {
		t.Fatal("a fresh in-memory server reports existing state")
	}
	if err := c.node(0).Bootstrap(); err != nil {
		t.Fatal(err)
	}
	if leader := c.readyLeader(); leader != 0 {
		t.Fatalf("m%d leads, want m1", leader+1)
	}
	lead := c.node(0)
	// Bootstrapping a server that already runs a cluster changes nothing.
	if err := lead.Bootstrap(); err != nil {
		t.Fatalf("second bootstrap: %v", err)
	}

	// The others join through the leader; joining twice is a no-op.
	for i := 1; i < 3; i++ {
		if err := lead.AddVoter(c.node(i).ID(), c.node(i).RaftAddress(), StoreVersion); err != nil {
			t.Fatalf("add m%d: %v", i+1, err)
		}
	}
	configIndex := lead.Raft().GetConfiguration()
	if err := configIndex.Error(); err != nil {
		t.Fatal(err)
	}
	if err := lead.AddVoter("m2", string(c.addrs[1]), StoreVersion); err != nil {
		t.Fatalf("adding m2 again: %v", err)
	}
	again := lead.Raft().GetConfiguration()
	if again.Index() != configIndex.Index() {
		t.Fatalf("adding m2 again changed the configuration (index %d → %d)", configIndex.Index(), again.Index())
	}
	if got := serverIDs(t, lead); fmt.Sprint(got) != "[m1 m2 m3]" {
		t.Fatalf("servers %v", got)
	}

	// Writes on the leader reach every FSM (waitConverged compares them byte
	// for byte).
	res := applyOK(t, lead, admit("node-1", api.Resources{"cpus": 100, "mem": 1e6}))
	res = applyOK(t, lead, &ServerSet{WriteMeta: meta(), ID: "m1", RaftAddress: lead.RaftAddress(), APIAddress: "http://m1"})
	res = applyOK(t, lead, &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Roles: []string{"*", "team0"},
		Capabilities: []string{api.CapabilityRevocableResources}, FailoverTimeoutSeconds: 60})
	for i := range 20 {
		res = applyOK(t, lead, quotaSet(fmt.Sprintf("team%d", i), api.Resources{"cpus": 1}, nil))
	}
	c.waitConverged(res.Index)

	// A business rejection comes back in the result, not as an error.
	rejected, err := lead.Apply(ctx, quotaSet("team0", api.Resources{"cpus": 1000}, nil))
	if err != nil || rejected.Err == nil || rejected.Err.Code != api.CodeCapacityExceeded {
		t.Fatalf("over-capacity write: %+v, %v", rejected, err)
	}

	for i := 1; i < 3; i++ {
		follower := c.node(i)
		waitFor(t, "followers to learn the leader", func() bool { id, _ := follower.Leader(); return id == "m1" })
		if _, err := follower.Apply(ctx, quotaSet("nope", nil, nil)); !errors.Is(err, ErrNotLeader) {
			t.Errorf("apply on m%d: %v, want ErrNotLeader", i+1, err)
		}
		if err := follower.VerifyRead(ctx); !errors.Is(err, ErrNotLeader) {
			t.Errorf("verify read on m%d: %v, want ErrNotLeader", i+1, err)
		}
		if err := follower.WaitReady(ctx); !errors.Is(err, ErrNotLeader) {
			t.Errorf("wait ready on m%d: %v, want ErrNotLeader", i+1, err)
		}
		if follower.Ready() || follower.IsLeader() {
			t.Errorf("m%d thinks it leads", i+1)
		}
		if err := follower.AddVoter("m9", "m9", StoreVersion); !errors.Is(err, ErrNotLeader) {
			t.Errorf("add voter on m%d: %v, want ErrNotLeader", i+1, err)
		}
		if err := follower.RemoveServer("m1"); !errors.Is(err, ErrNotLeader) {
			t.Errorf("remove server on m%d: %v, want ErrNotLeader", i+1, err)
		}
	}
	if err := lead.VerifyRead(ctx); err != nil {
		t.Fatalf("verify read on the leader: %v", err)
	}
	if _, err := lead.Apply(ctx, quotaSet("nope", nil, nil)); err != nil {
		t.Fatal(err)
	}

	// OnLeadership(true) runs after the barrier but before the server counts
	// as ready, so that what it sets up is in place for the first request.
	if events := c.leadershipEvents(0); len(events) != 1 || !events[0].leading || events[0].ready {
		t.Fatalf("m1 leadership events %+v, want one OnLeadership(true) before ready", events)
	}

	// Writes keep coming while the leader goes down. Every write that was
	// acknowledged must survive on the new leader.
	var (
		ackMu   sync.Mutex
		acked   []string
		lastErr error
	)
	t.Cleanup(func() {
		if t.Failed() {
			ackMu.Lock()
			t.Logf("acked %d, last writer error %v", len(acked), lastErr)
			ackMu.Unlock()
			for _, i := range c.live() {
				t.Logf("m%d: %v", i+1, c.node(i).Raft().Stats())
			}
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			for _, g := range strings.Split(string(buf), "\n\n") {
				if strings.Contains(g, "allot/allot/raftstore.") {
					t.Logf("%s", g)
				}
			}
		}
	})
	ackedCount := func() int { ackMu.Lock(); defer ackMu.Unlock(); return len(acked) }
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			role := fmt.Sprintf("w%d", i)
			for _, j := range c.live() {
				n := c.node(j)
				if !n.IsLeader() {
					continue
				}
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := n.Apply(wctx, quotaSet(role, nil, nil))
				cancel()
				ackMu.Lock()
				if err == nil && res.Err == nil {
					acked = append(acked, role)
				} else {
					lastErr = fmt.Errorf("m%d: %v %v", j+1, err, res.Err)
				}
				ackMu.Unlock()
				break
			}
			time.Sleep(time.Millisecond)
		}
	}()
	waitFor(t, "writes before the failover", func() bool { return ackedCount() >= 20 })
	c.shutdown(0)
	ackedBeforeFailover := ackedCount()
	if events := c.leadershipEvents(0); len(events) != 2 || events[1].leading {
		t.Fatalf("m1 leadership events after shutdown %+v, want OnLeadership(false) last", events)
	}

	newLeader := c.readyLeader()
	if newLeader == 0 {
		t.Fatal("the shut down server still leads")
	}
	waitFor(t, "writes after the failover", func() bool { return ackedCount() >= ackedBeforeFailover+20 })
	close(stop)
	<-writerDone

	events := c.leadershipEvents(newLeader)
	if len(events) != 1 || !events[0].leading || events[0].ready {
		t.Fatalf("m%d leadership events %+v, want one OnLeadership(true) before ready", newLeader+1, events)
	}
	// When the new leader announced itself, its barrier had passed: it held
	// every write the old leader acknowledged.
	ackMu.Lock()
	all := append([]string(nil), acked...)
	ackMu.Unlock()
	for _, role := range all[:ackedBeforeFailover] {
		if !events[0].roles[role] {
			t.Fatalf("m%d announced leadership without %s, acknowledged before it won", newLeader+1, role)
		}
	}
	n := c.node(newLeader)
	if err := n.VerifyRead(ctx); err != nil {
		t.Fatal(err)
	}
	n.FSM().Read(func(s *State) {
		for _, role := range all {
			if _, ok := s.Quota(role); !ok {
				t.Fatalf("acknowledged write of quota %s lost after the failover", role)
			}
		}
	})

	// The dead server is removed; the remaining two carry on.
	if err := n.RemoveServer("m1"); err != nil {
		t.Fatal(err)
	}
	for _, i := range c.live() {
		waitFor(t, "the removal to reach every server", func() bool {
			ids, err := c.node(i).Servers()
			return err == nil && len(ids) == 2
		})
		if got := serverIDs(t, c.node(i)); fmt.Sprint(got) != "[m2 m3]" {
			t.Fatalf("servers on m%d after removal: %v", i+1, got)
		}
	}
	res = applyOK(t, n, quotaSet("after-removal", nil, nil))
	c.waitConverged(res.Index)
}

func freePort(t testing.TB) int {
	t.Helper()
	addr, err := freeaddr.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

// openWithin opens a node, failing the test rather than hanging when a
// previous node left the data dir locked.
func openWithin(t testing.TB, cfg Config) (*Node, error) {
	t.Helper()
	type opened struct {
		n   *Node
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		n, err := Open(cfg)
		ch <- opened{n, err}
	}()
	select {
	case o := <-ch:
		return o.n, o.err
	case <-time.After(waitTimeout):
		t.Fatalf("Open of %s did not return: is raft.db still locked?", cfg.DataDir)
		return nil, nil
	}
}

func waitNodeReady(t testing.TB, n *Node) {
	t.Helper()
	waitFor(t, n.ID()+" to lead and be ready", n.Ready)
}

// TestNodeOnDisk restarts a server from its data dir: the state comes back
// from the snapshot plus the log after it.
func TestNodeOnDisk(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ID: "m1", DataDir: dir, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	n, err := openWithin(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.HasExistingState() {
		t.Fatal("a new data dir has state")
	}
	if got := n.RaftAddress(); got != cfg.RaftAddr {
		t.Fatalf("raft address %s, want %s", got, cfg.RaftAddr)
	}
	if err := n.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, n)

	applyOK(t, n, admit("node-1", api.Resources{"cpus": 64, "mem": 1e6}))
	applyOK(t, n, &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Principal: "spark-sched", Roles: []string{"*"}})
	applyOK(t, n, &FrameworkSet{WriteMeta: meta(), ID: "f2", Name: "batch", Roles: []string{"team1"}})
	var beforeSnapshot Result
	for i := range 10 {
		beforeSnapshot = applyOK(t, n, quotaSet(fmt.Sprintf("team%d", i), api.Resources{"cpus": 1}, api.Resources{"cpus": 4}))
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// After the snapshot: updates and deletes of what it holds, so that
	// replaying the log over it matters.
	for i := range 5 {
		applyOK(t, n, quotaSet(fmt.Sprintf("team%d", i), api.Resources{"cpus": 2}, nil))
	}
	applyOK(t, n, &QuotaDelete{WriteMeta: meta(), Role: "team9"})
	applyOK(t, n, &FrameworkSet{WriteMeta: meta(), ID: "f1", Name: "spark", Principal: "spark-sched", Roles: []string{"team2"},
		Capabilities: []string{api.CapabilityRevocableResources}})
	applyOK(t, n, &FrameworkRemove{WriteMeta: meta(), ID: "f2"})
	applyOK(t, n, &RateLimitSet{WriteMeta: meta(), Principal: "spark", QPS: qps(10), Burst: 10, Capacity: 5})
	last := applyOK(t, n, &RoleSet{WriteMeta: meta(), Role: "team1", Weight: 3})
	want := fsmSnapshotBytes(t, n.FSM())
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil || len(metas) != 1 || metas[0].Index < beforeSnapshot.Index || metas[0].Index >= last.Index {
		t.Fatalf("snapshots %+v, %v: want one between indexes %d and %d", metas, err, beforeSnapshot.Index, last.Index)
	}

	n, err = openWithin(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if !n.HasExistingState() {
		t.Fatal("a restarted server reports no state")
	}
	// Open restores the snapshot before anything else happens.
	var restored uint64
	n.FSM().Read(func(s *State) { restored = s.Index() })
	if restored < beforeSnapshot.Index {
		t.Fatalf("state at index %d after Open, want at least %d from the snapshot", restored, beforeSnapshot.Index)
	}
	if err := n.Bootstrap(); err != nil {
		t.Fatalf("bootstrap of a server with state: %v", err)
	}
	waitNodeReady(t, n)
	if got := fsmSnapshotBytes(t, n.FSM()); !bytes.Equal(got, want) {
		t.Fatalf("state after restart:\n%s\nwant\n%s", got, want)
	}
	n.FSM().Read(func(s *State) {
		if fw := s.Frameworks(); len(fw) != 1 || fw[0].ID != "f1" || fw[0].Roles[0] != "team2" {
			t.Fatalf("frameworks after restart %+v, want f1 as updated after the snapshot", fw)
		}
	})
	if servers := serverIDs(t, n); fmt.Sprint(servers) != "[m1]" {
		t.Fatalf("servers after restart %v", servers)
	}
	applyOK(t, n, quotaSet("after-restart", nil, nil))
}

func TestOpenErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := map[string]Config{
		"no id":              {DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0"},
		"data dir is a file": {ID: "m1", DataDir: file, RaftAddr: "127.0.0.1:0"},
		"bad raft address":   {ID: "m1", DataDir: dir, RaftAddr: "not an address"},
		"raft port in use":   {ID: "m1", DataDir: dir, RaftAddr: busy.Addr().String()},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			if n, err := openWithin(t, cfg); err == nil {
				n.Shutdown()
				t.Fatal("Open succeeded")
			}
		})
	}
	// The failed opens released the data dir they shared.
	n, err := openWithin(t, Config{ID: "m1", DataDir: dir, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// TestDevNode runs a server as masterd -dev does: in memory, no address.
func TestDevNode(t *testing.T) {
	n := startInMemory(t, "dev")
	res := applyOK(t, n, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 2})
	if id, addr := n.Leader(); id != "dev" || addr != n.RaftAddress() {
		t.Fatalf("leader %s at %s, want dev at %s", id, addr, n.RaftAddress())
	}
	n.FSM().Read(func(s *State) {
		if p, _ := s.RolePolicy("eng"); p.Version != res.Index {
			t.Fatalf("role version %d, want %d", p.Version, res.Index)
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.Apply(ctx, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 3}); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply with a cancelled context: %v", err)
	}
	if err := n.VerifyRead(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("verify read with a cancelled context: %v", err)
	}
}

// TestApplyReturnsOnShutdown shuts a server down under a stream of writes:
// every Apply returns (Raft alone can leave one waiting forever), and the
// ones refused for the shutdown say ErrNotLeader.
func TestApplyReturnsOnShutdown(t *testing.T) {
	for round := range 3 {
		n, err := Open(Config{ID: "m1", InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Bootstrap(); err != nil {
			t.Fatal(err)
		}
		waitNodeReady(t, n)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					_, err := n.Apply(context.Background(), quotaSet(fmt.Sprintf("w%d-%d", w, i), nil, nil))
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		waitFor(t, "some writes", func() bool {
			var index uint64
			n.FSM().Read(func(s *State) { index = s.Index() })
			return index > 50
		})
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("round %d: every writer to return after shutdown", round), func() bool {
			return len(errs) == cap(errs)
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrNotLeader) {
				t.Fatalf("apply during shutdown: %v, want ErrNotLeader", err)
			}
		}
	}
}

func TestShutdownTwice(t *testing.T) {
	n, err := Open(Config{ID: "once", RaftAddr: "once", InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}

// TestApplyValidatesWhatCheckDidNot: Apply skips the input rules only for a
// command Check validated by the same store version; any other is judged
// (and normalized) as it is proposed.
func TestApplyValidatesWhatCheckDidNot(t *testing.T) {
	n := startInMemory(t, "dev")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := n.Apply(ctx, quotaSet("bad role!", nil, api.Resources{"cpus": 1}))
	if err != nil || res.Err == nil || res.Err.Code != api.CodeInvalidArgument {
		t.Fatalf("unchecked invalid command: %v, %v; want invalid_argument", err, res.Err)
	}
	res, err = n.Apply(ctx, quotaSet("eng", nil, api.Resources{"cpus": 1.00049}))
	if err != nil || res.Err != nil {
		t.Fatalf("unchecked valid command: %v, %v", err, res.Err)
	}
	if got := res.Object.(api.Quota).Limits["cpus"]; got != 1 {
		t.Fatalf("unchecked command stored cpus %v, want 1 (normalized when proposed)", got)
	}

	checked := quotaSet("ml", nil, api.Resources{"cpus": 2.00049})
	n.FSM().Read(func(s *State) {
		if _, e := s.Check(checked); e != nil {
			t.Fatal(e)
		}
	})
	res = applyOK(t, n, checked)
	if got := res.Object.(api.Quota).Limits["cpus"]; got != 2 {
		t.Fatalf("checked command stored cpus %v, want 2", got)
	}
}
