package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/master"
	"github.com/allot/allot/raftstore"
)

// BenchmarkWriteWhileAllocating measures what an allocation cycle costs the
// writes that arrive while it runs, from one client over loopback HTTP
// through the whole write path (the handler, its checks against the live
// state, Raft and the FSM, and the master following the applied command):
// quota PUTs, and rate limit PUTs, which read nothing live. The leader is a
// dev server with 10 000 agents × 1 000 frameworks × 100 roles, as the
// allocator's and the master's cycle benchmarks build them.
//
// The writes alternate between two phases of the same cluster, in chunks,
// so that a change in the machine's load falls on both:
//
//   - idle: every framework has suppressed its offers; the loop still ticks
//     (every 10 ms), but its cycles find nothing to do;
//   - busy: the frameworks revived; offers time out at once
//     (-offer-timeout 1ns), so every tick takes back the 10 000 offers of
//     the cycle before and the next cycle offers the whole cluster again;
//     a tick takes longer than the interval, so they run back to back, as
//     on a leader under a steady stream of declines.
//
// It reports the writes' p50 and p99 in each phase, the ratio of the p99s
// (the goal is ≤ 1.2), the cycles run and their mean time while busy, to
// show the leader really was allocating, and the garbage collections per
// second while busy. b.N is the number of writes per phase: at about 0.1 ms
// a write, -benchtime 3000x times a third of a second of each phase, and a
// p99 of so few writes moves with a single collection; -benchtime 30000x
// (about half a minute in all) gives steadier ratios.
//
// chunk is how many writes of a phase run before the other phase's.
const chunk = 100

func BenchmarkWriteWhileAllocating(b *testing.B) {
	const (
		agents     = 10000
		frameworks = 1000
		roles      = 100
	)
	var cycles, cycleTime atomic.Int64
	s := startDev(b, func(c *Config) {
		c.AllocationInterval = 10 * time.Millisecond
		c.OfferTimeout = time.Nanosecond
		c.AgentPingTimeout = 24 * time.Hour
		c.HeartbeatInterval = 24 * time.Hour
	})
	cl := newLockBenchCluster(b, s, agents, frameworks, roles, func(d time.Duration) {
		cycles.Add(1)
		cycleTime.Add(int64(d))
	})

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Cleanup(client.CloseIdleConnections)
	// A quota PUT checks the role's consumption against the live state
	// once the master follows the writes before it, which may wait for the
	// running cycle; a rate limit PUT touches nothing live.
	writes := []struct {
		kind string
		req  func(seq int) (path, body string)
	}{
		{"quota", func(seq int) (string, string) {
			// Roles no framework uses: the limit never falls below what
			// they consume, so no write is refused, and each write
			// changes a quota. A hundred roles in turn, as an apply of
			// many quotas writes them: the first check of a role's
			// consumption in a minute waits for the running cycle once,
			// and a thousand roles written once each would measure that.
			// A quota write is acknowledged once the master follows it,
			// so one that arrives during a tick waits for its end.
			return fmt.Sprintf("/v1/quotas/lockbench-%d", seq%100), fmt.Sprintf(`{"limits":{"cpus":%d,"mem":%d}}`, 100+seq%1000, 1<<20)
		}},
		{"ratelimit", func(seq int) (string, string) {
			return fmt.Sprintf("/v1/ratelimits/lockbench-%d", seq%10), fmt.Sprintf(`{"qps":%d,"burst":10}`, 100+seq%1000)
		}},
	}
	for _, w := range writes {
		b.Run("write="+w.kind, func(b *testing.B) {
			benchWritesWhileAllocating(b, cl, client, s.APIAddress(), w.req, &cycles, &cycleTime)
		})
	}
}

func benchWritesWhileAllocating(b *testing.B, cl *lockBenchCluster, client *http.Client, addr string,
	req func(seq int) (path, body string), cycles, cycleTime *atomic.Int64) {
	var seq int
	put := func() time.Duration {
		seq++
		path, body := req(seq)
		r, err := http.NewRequest(http.MethodPut, addr+path, bytes.NewBufferString(body))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		resp, err := client.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("PUT %s: %d %s", path, resp.StatusCode, out)
		}
		return took
	}
	// busyAgain starts the busy phase and returns once a cycle has run in
	// it, so that the phase's writes meet a leader that is allocating.
	busyAgain := func() {
		c0 := cycles.Load()
		cl.setBusy(true)
		for cycles.Load() < c0+2 {
			time.Sleep(time.Millisecond)
		}
	}

	var idle, busy []time.Duration
	var busyCycles, busyCycleTime, busyGCs int64
	var busyWall time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	// A switch of phase is itself a burst of writes (1 000 frameworks
	// suppress or revive); an untimed write first lets the master follow
	// them, so the phase's writes measure the phase, not the switch.
	for len(idle) < b.N || len(busy) < b.N {
		n := min(chunk, b.N-len(idle))
		b.StopTimer()
		cl.setBusy(false)
		put()
		b.StartTimer()
		for range n {
			idle = append(idle, put())
		}
		n = min(chunk, b.N-len(busy))
		b.StopTimer()
		c0, t0, w0, gc0 := cycles.Load(), cycleTime.Load(), time.Now(), gcCycles()
		busyAgain()
		put()
		b.StartTimer()
		for range n {
			busy = append(busy, put())
		}
		busyCycles += cycles.Load() - c0
		busyCycleTime += cycleTime.Load() - t0
		busyWall += time.Since(w0)
		busyGCs += gcCycles() - gc0
	}
	b.StopTimer()
	cl.setBusy(false)

	p := func(d []time.Duration, q float64) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(idle, 0.5), "idle-p50-ms")
	b.ReportMetric(p(idle, 0.99), "idle-p99-ms")
	b.ReportMetric(p(busy, 0.5), "busy-p50-ms")
	b.ReportMetric(p(busy, 0.99), "busy-p99-ms")
	b.ReportMetric(p(busy, 0.99)/p(idle, 0.99), "p99-busy/idle")
	if busyCycles == 0 {
		b.Fatal("no allocation cycle ran while busy")
	}
	b.ReportMetric(float64(busyCycles)/busyWall.Seconds(), "busy-cycles/s")
	b.ReportMetric(float64(busyCycleTime)/float64(busyCycles)/1e6, "busy-cycle-ms")
	b.ReportMetric(float64(busyGCs)/busyWall.Seconds(), "busy-gc/s")
}

// gcCycles is how many garbage collections the process has finished. The
// garbage a busy leader makes sets how often the collector runs, and the
// writes that meet it are the busy phase's tail.
func gcCycles() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// lockBenchCluster is the dev server's current master with its agents and
// frameworks connected through the master's Go API (as the master's own
// benchmark connects them): ten thousand HTTP streams would measure the
// streams, not the lock.
type lockBenchCluster struct {
	b          testing.TB
	m          *master.Master
	frameworks []*master.Stream[api.Event]
	busy       bool
}

func newLockBenchCluster(b testing.TB, s *Server, agents, frameworks, roles int, observe func(time.Duration)) *lockBenchCluster {
	b.Helper()
	ctx := context.Background()
	// The registry and quotas are written with no term running, as an
	// earlier term left them: admitting ten thousand agents through a
	// running master costs minutes of syncs. The new term then starts on
	// them, with the cycle observer added.
	s.engine.stop()
	resources := api.Resources{"cpus": 16, "mem": 65536, "disk": 1 << 20}
	name := func(i int) string { return fmt.Sprintf("n%05d", i) }
	role := func(i int) string { return fmt.Sprintf("r%03d", i) }
	lockBenchParallel(b, agents, func(i int) error {
		cmd := &raftstore.AgentAdmit{ID: "agent-" + name(i), Name: name(i), Hostname: name(i) + ".example", Resources: resources}
		cmd.Time = time.Now().UTC()
		return lockBenchApply(s, cmd)
	})
	share := func(f float64) api.Resources {
		out := api.Resources{}
		for k, v := range resources {
			out[k] = api.RoundScalar(v * float64(agents) * f)
		}
		return out
	}
	// The quotas of the cycle benchmarks: a guarantee of 1% of the cluster
	// on a fifth of the roles, a limit of 0.5% on the next fifth.
	for r := range 2 * roles / 5 {
		cmd := &raftstore.QuotaSet{Role: role(r)}
		if r < roles/5 {
			cmd.Guarantees = share(0.01)
		} else {
			cmd.Limits = share(0.005)
		}
		cmd.Time = time.Now().UTC()
		if err := lockBenchApply(s, cmd); err != nil {
			b.Fatal(err)
		}
	}
	inner := s.engine.opts.ObserveCycle
	s.engine.opts.ObserveCycle = func(d time.Duration) {
		observe(d)
		if inner != nil {
			inner(d)
		}
	}
	s.engine.lead()
	m := s.engine.current()
	if m == nil {
		b.Fatal("no master after lead")
	}
	cl := &lockBenchCluster{b: b, m: m, busy: true}
	lockBenchParallel(b, agents, func(i int) error {
		call := api.AgentCall{Type: api.AgentCallRegister, AgentID: "agent-" + name(i),
			Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: name(i), Hostname: name(i) + ".example", Resources: resources}}}
		st, e := m.RegisterAgent(ctx, call, "")
		if e != nil {
			return fmt.Errorf("register %s: %v", name(i), e)
		}
		go lockBenchDrain(st)
		return nil
	})
	cl.frameworks = make([]*master.Stream[api.Event], frameworks)
	lockBenchParallel(b, frameworks, func(i int) error {
		info := api.FrameworkInfo{Name: fmt.Sprintf("f%04d", i), Principal: "bench", Roles: []string{role(i % roles)}}
		st, e := m.Subscribe(ctx, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: info}})
		if e != nil {
			return fmt.Errorf("subscribe %s: %v", info.Name, e)
		}
		cl.frameworks[i] = st
		go lockBenchDrain(st)
		return nil
	})
	return cl
}

// setBusy revives (busy) or suppresses (idle) every framework's offers.
func (cl *lockBenchCluster) setBusy(busy bool) {
	if cl.busy == busy {
		return
	}
	cl.busy = busy
	t := api.CallSuppress
	if busy {
		t = api.CallRevive
	}
	// Side by side: each call waits for the master's lock, and waiting
	// callers take it in turn before the loop's next cycle does.
	lockBenchParallel(cl.b, len(cl.frameworks), func(i int) error {
		st := cl.frameworks[i]
		if e := cl.m.Call(context.Background(), api.Call{FrameworkID: st.Owner(), Type: t}, st.ID()); e != nil {
			return fmt.Errorf("%s %s: %v", t, st.Owner(), e)
		}
		return nil
	})
}

func lockBenchApply(s *Server, cmd raftstore.Command) error {
	res, err := s.node.Apply(context.Background(), cmd)
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("apply %T: %w", cmd, err)
	}
	return nil
}

// lockBenchParallel runs do for 0..n-1 on 16 goroutines, so that Raft
// batches the writes as for a cluster starting up.
func lockBenchParallel(b testing.TB, n int, do func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// lockBenchDrain reads a session's events as its HTTP handler would, so
// that no session is closed for a full buffer.
func lockBenchDrain[E any](st *master.Stream[E]) {
	for {
		select {
		case <-st.Ready():
			st.Take()
		case <-st.Done():
			return
		}
	}
}
