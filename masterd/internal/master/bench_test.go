//go:build linux

// Linux only: the cycles are timed in the CPU time of the calling thread
// (CLOCK_THREAD_CPUTIME_ID), as the allocator's benchmarks are.

package master

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// These benchmarks time an allocation cycle through the Master: the
// allocator's cycle plus recording its offers in the offer book and queueing
// one OFFERS event per framework. The cluster mirrors the allocator's
// BenchmarkAllocate (agents=10000/frameworks=1000/roles=100/quota=true) so
// the figures compare, but it is built as masterd builds it, on the
// in-memory Raft store the tests use: the agent registry and quotas written
// through Raft, a Master started on them as a new leader term is, every
// agent registering with it and every framework subscribing to it.

const (
	benchAgents     = 10000
	benchFrameworks = 1000
	benchRoles      = 100
	// benchWorkers register agents and subscribe frameworks side by side, so
	// Raft batches their writes as it does for a cluster starting up.
	benchWorkers = 16
)

// benchAgentResources is one agent, as in the allocator's benchmark.
var benchAgentResources = api.Resources{"cpus": 16, "mem": 65536, "disk": 1 << 20}

// benchMaster is the cluster the benchmarks share: building it takes
// seconds (minutes with -master.bench-admit-through-master), so it is built
// once per test binary and never shut down (the process exit ends it).
type benchMaster struct {
	node *raftstore.Node
	m    *Master
	// cycles counts the cycles that ran, so that a cycle the loop ran on its
	// own during a measurement is noticed rather than mismeasured.
	cycles atomic.Int64
	// allocatorTime sums how long the allocator's part of the cycles took
	// (wall time, as ObserveCycle reports it), to tell it from the Master's.
	allocatorTime atomic.Int64
	agentLive     []*Stream[api.AgentEvent]
	frameLive     []*Stream[api.Event]
	setupTimes    string
}

// benchAdmitThroughMaster admits every agent through RegisterAgent on a
// running Master (one Raft write each) instead of writing the registry
// first; it makes the setup take minutes.
var benchAdmitThroughMaster = flag.Bool("master.bench-admit-through-master", false,
	"benchmarks: admit the agents through RegisterAgent on a running Master (slow) rather than writing the registry first")

var benchShared struct {
	once   sync.Once
	bm     *benchMaster
	err    error
	logged bool
}

func sharedBenchMaster(b *testing.B) *benchMaster {
	b.Helper()
	benchShared.once.Do(func() { benchShared.bm, benchShared.err = newBenchMaster() })
	if benchShared.err != nil {
		b.Fatalf("building the cluster: %v", benchShared.err)
	}
	if !benchShared.logged {
		benchShared.logged = true
		b.Logf("setup: %s", benchShared.bm.setupTimes)
	}
	return benchShared.bm
}

func newBenchMaster() (*benchMaster, error) {
	start := time.Now()
	node, err := raftstore.Open(raftstore.Config{ID: "bench", InMemory: true, RaftAddr: "bench"})
	if err != nil {
		return nil, err
	}
	if err := node.Bootstrap(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(waitTimeout); !node.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the single server did not lead within %v", waitTimeout)
		}
	}
	bm := &benchMaster{node: node}
	var current atomic.Pointer[Master]
	node.FSM().OnApply(func(cmd raftstore.Command, res raftstore.Result) {
		if m := current.Load(); m != nil {
			m.Applied(cmd, res)
		}
	})
	var took []string
	step := func(what string, t0 time.Time) {
		took = append(took, fmt.Sprintf("%s in %v", what, time.Since(t0).Round(time.Millisecond)))
	}

	// By default the registry is written first, as an earlier term left it,
	// and the agents then register with the new term's Master: admitting
	// them one by one through a running Master costs O(agents) of
	// Master.Applied per admission, minutes for ten thousand agents.
	t0 := time.Now()
	if !*benchAdmitThroughMaster {
		if _, err := benchParallel(benchAgents, func(i int) (struct{}, error) {
			name := benchAgentName(i)
			info := agentInfo(name, benchAgentResources)
			cmd := &raftstore.AgentAdmit{ID: benchAgentID(i), Name: name, Hostname: info.Hostname, Resources: info.Resources}
			cmd.Time = time.Now().UTC()
			return struct{}{}, benchApply(node, cmd)
		}); err != nil {
			return nil, err
		}
		step(fmt.Sprintf("%d agents admitted through Raft", benchAgents), t0)
		t0 = time.Now()
		if err := benchSetQuotas(node); err != nil {
			return nil, err
		}
		step(fmt.Sprintf("%d quotas", 2*benchRoles/5), t0)
	}

	// The loop's ticker must not run cycles during a measurement: the
	// benchmarks run the cycle themselves.
	const never = 24 * time.Hour
	t0 = time.Now()
	bm.m = New(nodeStore{node}, Options{
		AllocationInterval: never, OfferTimeout: never, AgentPingTimeout: never,
		AgentRemovalTimeout: never, RecoveryTimeout: never, HeartbeatInterval: never,
		Seed: 1,
		ObserveCycle: func(d time.Duration) {
			bm.cycles.Add(1)
			bm.allocatorTime.Add(int64(d))
		},
	})
	current.Store(bm.m)
	step("New", t0)

	t0 = time.Now()
	agents, err := benchParallel(benchAgents, func(i int) (*Stream[api.AgentEvent], error) {
		call := api.AgentCall{Type: api.AgentCallRegister,
			Register: &api.AgentRegister{AgentInfo: agentInfo(benchAgentName(i), benchAgentResources)}}
		if !*benchAdmitThroughMaster {
			call.AgentID = benchAgentID(i)
		}
		s, e := bm.m.RegisterAgent(context.Background(), call, "")
		if e != nil {
			return nil, fmt.Errorf("register agent %s: %v", benchAgentName(i), e)
		}
		go benchDrain(s)
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	bm.agentLive = agents
	step(fmt.Sprintf("%d agents registered", benchAgents), t0)

	if *benchAdmitThroughMaster {
		t0 = time.Now()
		if err := benchSetQuotas(node); err != nil {
			return nil, err
		}
		step(fmt.Sprintf("%d quotas", 2*benchRoles/5), t0)
	}

	t0 = time.Now()
	frameworks, err := benchParallel(benchFrameworks, func(i int) (*Stream[api.Event], error) {
		info := fwInfo(fmt.Sprintf("f%04d", i), benchRole(i%benchRoles))
		s, e := bm.m.Subscribe(context.Background(), api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: info}})
		if e != nil {
			return nil, fmt.Errorf("subscribe %s: %v", info.Name, e)
		}
		go benchDrain(s)
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	bm.frameLive = frameworks
	step(fmt.Sprintf("%d frameworks subscribed", benchFrameworks), t0)

	if err := bm.settle(); err != nil {
		return nil, err
	}
	bm.setupTimes = fmt.Sprintf("%v in all: %s", time.Since(start).Round(time.Millisecond), strings.Join(took, ", "))
	return bm, nil
}

// benchSetQuotas writes the quotas of the allocator's benchmark: a
// guarantee of 1% of the cluster on each of the first fifth of the roles, a
// limit of 0.5% on each of the next fifth. The agents must be admitted
// first: the capacity check needs them.
func benchSetQuotas(node *raftstore.Node) error {
	share := func(f float64) api.Resources {
		out := api.Resources{}
		for k, v := range benchAgentResources {
			out[k] = api.RoundScalar(v * benchAgents * f)
		}
		return out
	}
	for r := 0; r < 2*benchRoles/5; r++ {
		cmd := &raftstore.QuotaSet{Role: benchRole(r)}
		if r < benchRoles/5 {
			cmd.Guarantees = share(0.01)
		} else {
			cmd.Limits = share(0.005)
		}
		cmd.Time = time.Now().UTC()
		if err := benchApply(node, cmd); err != nil {
			return err
		}
	}
	return nil
}

func benchApply(node *raftstore.Node, cmd raftstore.Command) error {
	res, err := node.Apply(context.Background(), cmd)
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("apply %T: %w", cmd, err)
	}
	return nil
}

func benchAgentName(i int) string { return fmt.Sprintf("n%05d", i) }

func benchAgentID(i int) string { return "agent-" + benchAgentName(i) }

func benchRole(i int) string { return fmt.Sprintf("r%03d", i) }

// benchParallel runs do for 0..n-1 on benchWorkers goroutines.
func benchParallel[S any](n int, do func(i int) (S, error)) ([]S, error) {
	out := make([]S, n)
	errs := make([]error, benchWorkers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				s, err := do(i)
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = s
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// benchDrain reads a session's events as its HTTP handler would, so that no
// session is closed for a full buffer.
func benchDrain[E any](s *Stream[E]) {
	for {
		select {
		case <-s.Events():
		case <-s.Done():
			return
		}
	}
}

// settle waits until the cycles the setup triggered have run: a kick left
// queued would start a cycle of the loop in the middle of a measurement.
// Every registration and subscription kicked the loop; once a kick given
// after them all has been served and none is queued, the loop is idle.
func (bm *benchMaster) settle() error {
	deadline := time.Now().Add(waitTimeout)
	for {
		before := bm.cycles.Load()
		bm.m.trigger()
		for bm.cycles.Load() == before {
			if time.Now().After(deadline) {
				return fmt.Errorf("the loop ran no cycle within %v", waitTimeout)
			}
			time.Sleep(time.Millisecond)
		}
		if len(bm.m.kick) == 0 {
			// The loop may have taken the last kick already and wait out
			// the gap between kicked cycles (at most 100 ms): settled
			// once a quiet spell longer than that saw no cycle.
			quiet := bm.cycles.Load()
			time.Sleep(250 * time.Millisecond)
			if bm.cycles.Load() != quiet || len(bm.m.kick) != 0 {
				continue
			}
			// The loop holds m.mu through a cycle: taking it waits out one
			// that just started.
			bm.outstanding()
			return nil
		}
	}
}

// rescindAll hands every outstanding offer back to the allocator, so the
// next cycle offers the whole cluster again. Rescinds set no filter.
func (bm *benchMaster) rescindAll() {
	bm.m.mu.Lock()
	defer bm.m.mu.Unlock()
	bm.m.rescindAll(bm.m.offersWhere(func(*offer) bool { return true }))
}

func (bm *benchMaster) outstanding() int {
	bm.m.mu.Lock()
	defer bm.m.mu.Unlock()
	return len(bm.m.offers)
}

// check fails the benchmark if a session was closed (its events would have
// been dropped, not measured) or if the loop ran cycles of its own.
func (bm *benchMaster) check(b *testing.B, cyclesBefore, cyclesRun int64) {
	b.Helper()
	if got := bm.cycles.Load() - cyclesBefore; got != cyclesRun {
		b.Fatalf("%d cycles ran, want %d: the loop ran cycles of its own (or recovery held them back)", got, cyclesRun)
	}
	for _, s := range bm.frameLive {
		if s.closed() {
			b.Fatalf("framework %s's session was closed", s.Owner())
		}
	}
	for _, s := range bm.agentLive {
		if s.closed() {
			b.Fatalf("agent %s's session was closed", s.Owner())
		}
	}
}

// BenchmarkMasterAllocateFull measures one cycle that offers the whole
// cluster: before each, every outstanding offer is rescinded. Besides the
// cycle's wall (ns/op) and thread CPU time (cpu-ns/op) it reports the wall
// time of its two parts: the allocator's (allocator-ns/op) and the Master's
// recording and sending of the offers (offerbook-ns/op).
func BenchmarkMasterAllocateFull(b *testing.B) {
	bm := sharedBenchMaster(b)
	b.ReportAllocs()
	b.ResetTimer()
	offers := 0
	var t benchCycleTimes
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bm.rescindAll()
		if n := bm.outstanding(); n != 0 {
			b.Fatalf("%d offers outstanding after rescinding them all", n)
		}
		// The cycle runs on a settled heap, as in the allocator's benchmark.
		runtime.GC()
		before := bm.cycles.Load()
		b.StartTimer()
		bm.timedCycle(&t)
		b.StopTimer()
		bm.check(b, before, 1)
		offers = bm.outstanding()
		if offers < benchAgents {
			b.Fatalf("%d offers for %d free agents", offers, benchAgents)
		}
	}
	b.ReportMetric(float64(offers), "offers/op")
	t.report(b)
}

// BenchmarkMasterAllocateNoop measures a cycle with nothing to offer: every
// agent is offered already.
func BenchmarkMasterAllocateNoop(b *testing.B) {
	bm := sharedBenchMaster(b)
	before := bm.cycles.Load()
	bm.m.allocate(time.Now()) // offers what is not offered yet
	bm.check(b, before, 1)
	outstanding := bm.outstanding()
	if outstanding < benchAgents {
		b.Fatalf("%d offers outstanding for %d agents", outstanding, benchAgents)
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	before = bm.cycles.Load()
	var t benchCycleTimes
	for i := 0; i < b.N; i++ {
		bm.timedCycle(&t)
	}
	b.StopTimer()
	bm.check(b, before, int64(b.N))
	if n := bm.outstanding(); n != outstanding {
		b.Fatalf("%d offers outstanding after idle cycles, %d before", n, outstanding)
	}
	t.report(b)
}

// BenchmarkMasterExpireOffers measures what a tick spends taking back a
// whole cluster's offers when they time out: the offer book, the
// allocator's accounting and one RESCIND event per offer. Before each, a
// cycle offers every agent again.
func BenchmarkMasterExpireOffers(b *testing.B) {
	bm := sharedBenchMaster(b)
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	offers := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bm.rescindAll()
		before := bm.cycles.Load()
		bm.m.allocate(time.Now())
		bm.check(b, before, 1)
		offers = bm.outstanding()
		if offers < benchAgents {
			b.Fatalf("%d offers for %d free agents", offers, benchAgents)
		}
		runtime.GC()
		later := time.Now().Add(bm.m.opts.OfferTimeout + time.Hour)
		b.StartTimer()
		cpu += benchOnCPU(func() {
			bm.m.mu.Lock()
			bm.m.expireOffers(later)
			bm.m.mu.Unlock()
		})
		b.StopTimer()
		if n := bm.outstanding(); n != 0 {
			b.Fatalf("%d offers outstanding after they all expired", n)
		}
	}
	b.ReportMetric(float64(offers), "offers/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// benchCycleTimes sums the times of the measured cycles.
type benchCycleTimes struct {
	n              int
	wall, cpu, alc time.Duration
}

// timedCycle runs one cycle as the loop does and adds its times to t.
func (bm *benchMaster) timedCycle(t *benchCycleTimes) {
	alc := bm.allocatorTime.Load()
	start := time.Now()
	t.cpu += benchOnCPU(func() { bm.m.allocate(time.Now()) })
	t.wall += time.Since(start)
	t.alc += time.Duration(bm.allocatorTime.Load() - alc)
	t.n++
}

func (t *benchCycleTimes) report(b *testing.B) {
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(t.n) }
	b.ReportMetric(per(t.cpu), "cpu-ns/op")
	b.ReportMetric(per(t.alc), "allocator-ns/op")
	b.ReportMetric(per(t.wall-t.alc), "offerbook-ns/op")
}

// benchOnCPU runs f locked to its thread and returns the CPU time the thread
// spent in it: on a machine shared with other work (here also the goroutines
// draining the sessions), wall time includes the time f waited for a core.
func benchOnCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := benchThreadCPUTime()
	f()
	return benchThreadCPUTime() - start
}

// benchClockThreadCPUTime is CLOCK_THREAD_CPUTIME_ID.
const benchClockThreadCPUTime = 3

func benchThreadCPUTime() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, benchClockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
