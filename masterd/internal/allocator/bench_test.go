package allocator

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// Profiling a cycle: -cpuprofile profiles the whole benchmark, building
// the clusters included, but the cycles (what onCPU times) carry the label
// allocator=cycle, so pprof can show them alone:
//
//	go test -run '^$' -bench 'BenchmarkAllocate$/agents=10000/frameworks=1000/roles=100/quota=true' \
//	    -benchtime 100x -cpuprofile cpu.out ./masterd/internal/allocator/
//	go tool pprof -tagfocus allocator=cycle -top allocator.test cpu.out
//
// The label is set only while profiling: setting it allocates, which
// would show in the idle cycles' allocs/op.
var profiling = sync.OnceValue(func() bool {
	f := flag.Lookup("test.cpuprofile")
	return f != nil && f.Value.String() != ""
})

func asCycle(f func()) {
	if !profiling() {
		f()
		return
	}
	pprof.Do(context.Background(), pprof.Labels("allocator", "cycle"), func(context.Context) { f() })
}

// The goals of issue 14 for the largest shape (agents=10000/
// frameworks=1000/roles=100/quota=true), measured on a quiet machine: a
// full cycle in at most 8 ms, an idle one in at most 5 µs. The benchmarks
// report their CPU time over the goal as goal-ratio (at most 1 meets it);
// on a busy machine CPU time is inflated too (other work evicts the
// cycle's data from the caches), so compare against a run of the code
// before, back to back, rather than against the goal alone.
const (
	goalFullCycle = 8 * time.Millisecond
	goalIdleCycle = 5 * time.Microsecond
)

// reportGoal reports cpu, summed over b.N cycles, against goal when the
// shape is the one the goals are set for.
func reportGoal(b *testing.B, s benchShape, cpu, goal time.Duration) {
	if s == benchShapes[0] {
		b.ReportMetric(float64(cpu)/float64(b.N)/float64(goal), "goal-ratio")
	}
}

type benchShape struct {
	agents, frameworks, roles int
	quota                     bool
}

func (s benchShape) String() string {
	return fmt.Sprintf("agents=%d/frameworks=%d/roles=%d/quota=%t", s.agents, s.frameworks, s.roles, s.quota)
}

var benchShapes = []benchShape{
	{agents: 10000, frameworks: 1000, roles: 100, quota: true},
	{agents: 10000, frameworks: 1000, roles: 100, quota: false},
	{agents: 1000, frameworks: 100, roles: 10, quota: true},
}

// benchCluster builds a cluster of identical agents, frameworks spread evenly
// over flat roles and, with quota, a guarantee of 1% of the cluster on each
// of the first fifth of the roles and a limit of 0.5% on each of the next
// fifth.
func benchCluster(b *testing.B, s benchShape) *Allocator {
	b.Helper()
	a := New(Options{Seed: 1})
	total := api.Resources{"cpus": 16, "mem": 65536, "disk": 1 << 20}
	for i := 0; i < s.agents; i++ {
		id := fmt.Sprintf("n%05d", i)
		must(b, a.AddAgent(id, id, total, nil))
	}
	for i := 0; i < s.frameworks; i++ {
		id := fmt.Sprintf("f%04d", i)
		must(b, a.AddFramework(Framework{ID: id, Principal: id, Roles: []string{benchRole(i % s.roles)}}))
	}
	if s.quota {
		share := func(f float64) api.Resources {
			out := api.Resources{}
			for k, v := range total {
				out[k] = api.RoundScalar(v * float64(s.agents) * f)
			}
			return out
		}
		for r := 0; r < s.roles/5; r++ {
			must(b, a.SetQuota(benchRole(r), share(0.01), nil))
		}
		for r := s.roles / 5; r < 2*s.roles/5; r++ {
			must(b, a.SetQuota(benchRole(r), nil, share(0.005)))
		}
	}
	return a
}

func benchRole(i int) string { return fmt.Sprintf("r%03d", i) }

// BenchmarkAllocate measures one full cycle from a fresh state: every agent
// is free and is offered.
func BenchmarkAllocate(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.String(), func(b *testing.B) {
			b.ReportAllocs()
			offers := 0
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				a := benchCluster(b, s)
				// The cycle runs on a settled heap, not while collecting
				// the garbage of building ten thousand agents.
				runtime.GC()
				b.StartTimer()
				cpu += onCPU(func() { offers = len(a.Allocate(t0)) })
			}
			if offers < s.agents {
				b.Fatalf("%d offers for %d free agents", offers, s.agents)
			}
			b.ReportMetric(float64(offers), "offers/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			reportGoal(b, s, cpu, goalFullCycle)
		})
	}
}

// BenchmarkAllocateNoop measures a cycle with nothing to offer:
// idle=allocated after every agent went to tasks; idle=laid-away after
// everything but the headroom of guarantees whose frameworks are suppressed
// went to tasks, so a fifth of the agents stays free and must be passed over.
func BenchmarkAllocateNoop(b *testing.B) {
	for _, s := range benchShapes {
		for _, idle := range []string{"allocated", "laid-away"} {
			if idle == "laid-away" && !s.quota {
				continue
			}
			b.Run(fmt.Sprintf("%s/idle=%s", s, idle), func(b *testing.B) {
				a := benchCluster(b, s)
				if idle == "laid-away" {
					for i := 0; i < s.frameworks; i++ {
						if i%s.roles < s.roles/5 {
							must(b, a.Suppress(fmt.Sprintf("f%04d", i), nil))
						}
					}
				}
				for _, o := range a.Allocate(t0) {
					must(b, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
				}
				if idle == "laid-away" && len(a.freeAgents) < s.agents*(s.roles/5)/100 {
					b.Fatalf("only %d agents laid away", len(a.freeAgents))
				}
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					var offers []Offer
					cpu += onCPU(func() { offers = a.Allocate(t0) })
					if len(offers) > 0 {
						b.Fatalf("%d offers in an idle cycle", len(offers))
					}
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				if idle == "allocated" {
					reportGoal(b, s, cpu, goalIdleCycle)
				}
			})
		}
	}
}

// revocableShape sets up the revocable stage on a bench cluster: every tenth
// agent reserves a quarter of itself for one of ten lender roles no framework
// subscribes to (so the reservations stay idle after the regular stages; half
// the lenders have a lending limit of 0.1% of the cluster's total, of which a
// tenth of the reserved agents' reservations is), every tenth agent (others)
// reports usage slack of an eighth of itself, and, with capable, every fourth
// framework takes revocable resources.
type revocableShape struct {
	benchShape
	capable bool
}

func (s revocableShape) String() string {
	return fmt.Sprintf("%s/revocable=%t", s.benchShape, s.capable)
}

func revocableCluster(b *testing.B, s revocableShape) *Allocator {
	b.Helper()
	a := benchCluster(b, s.benchShape)
	total := api.Resources{"cpus": 16, "mem": 65536, "disk": 1 << 20}
	part := func(f float64) api.Resources {
		out := api.Resources{}
		for k, v := range total {
			out[k] = api.RoundScalar(v * f)
		}
		return out
	}
	for i := 0; i < 10; i++ {
		if i%2 == 0 {
			cluster := part(float64(s.agents) * 0.001)
			must(b, a.SetLendingLimit(fmt.Sprintf("lender%d", i), cluster))
		}
	}
	for i := 0; i < s.agents; i++ {
		id := fmt.Sprintf("n%05d", i)
		switch i % 10 {
		case 0:
			lender := fmt.Sprintf("lender%d", (i/10)%10)
			must(b, a.UpdateAgentReservations(id, map[string]api.Resources{lender: part(0.25)}))
		case 5:
			must(b, a.UpdateSlack(id, part(0.125)))
		}
	}
	if s.capable {
		for i := 0; i < s.frameworks; i += 4 {
			id := fmt.Sprintf("f%04d", i)
			f := Framework{ID: id, Principal: id, Roles: []string{benchRole(i % s.roles)}, Capabilities: []string{CapabilityRevocableResources}}
			must(b, a.UpdateFramework(f))
		}
	}
	return a
}

// BenchmarkAllocateRevocable measures one full cycle from a fresh state with
// the revocable stage at work (revocable=true) against the same cluster with
// no framework taking revocable resources, where the stage is skipped at
// once (revocable=false).
func BenchmarkAllocateRevocable(b *testing.B) {
	for _, capable := range []bool{false, true} {
		s := revocableShape{benchShape: benchShapes[0], capable: capable}
		b.Run(s.String(), func(b *testing.B) {
			b.ReportAllocs()
			offers, revocable := 0, 0
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				a := revocableCluster(b, s)
				runtime.GC()
				b.StartTimer()
				var out []Offer
				cpu += onCPU(func() { out = a.Allocate(t0) })
				offers, revocable = len(out), 0
				for _, o := range out {
					if o.Pieces[0].Revocable {
						revocable++
					}
				}
			}
			if offers < s.agents {
				b.Fatalf("%d offers for %d free agents", offers, s.agents)
			}
			if capable != (revocable > 0) {
				b.Fatalf("%d revocable offers with capable frameworks %t", revocable, capable)
			}
			b.ReportMetric(float64(offers), "offers/op")
			b.ReportMetric(float64(revocable), "revocable-offers/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkAllocateRevocablePaired runs the two cycles of
// BenchmarkAllocateRevocable back to back in every iteration, so both see the
// same machine (on a shared one, runs minutes apart do not), and reports
// their CPU times and ratio (goal: at most 1.2).
func BenchmarkAllocateRevocablePaired(b *testing.B) {
	s := benchShapes[0]
	b.Run(s.String(), func(b *testing.B) {
		var with, without time.Duration
		for i := 0; i < b.N; i++ {
			for _, capable := range []bool{false, true} {
				b.StopTimer()
				a := revocableCluster(b, revocableShape{benchShape: s, capable: capable})
				runtime.GC()
				b.StartTimer()
				cpu := onCPU(func() { a.Allocate(t0) })
				if capable {
					with += cpu
				} else {
					without += cpu
				}
			}
		}
		b.ReportMetric(float64(with.Nanoseconds())/float64(b.N), "with-cpu-ns/op")
		b.ReportMetric(float64(without.Nanoseconds())/float64(b.N), "without-cpu-ns/op")
		b.ReportMetric(float64(with)/float64(without), "ratio")
	})
}

// BenchmarkAllocateRevocableNoop measures a cycle with nothing to offer on
// the revocable cluster: every agent, slack and lendable reservation went to
// tasks; what the lenders past their lending limit keep is looked at and
// passed over, as are their idle reservations in the regular stages.
func BenchmarkAllocateRevocableNoop(b *testing.B) {
	for _, capable := range []bool{false, true} {
		benchRevocableNoop(b, revocableShape{benchShape: benchShapes[0], capable: capable})
	}
}

func benchRevocableNoop(b *testing.B, s revocableShape) {
	b.Run(s.String(), func(b *testing.B) {
		a := revocableCluster(b, s)
		for _, o := range a.Allocate(t0) {
			must(b, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
		}
		b.ReportAllocs()
		b.ResetTimer()
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			var offers []Offer
			cpu += onCPU(func() { offers = a.Allocate(t0) })
			if len(offers) > 0 {
				b.Fatalf("%d offers in an idle cycle", len(offers))
			}
		}
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkOverlent measures Overlent, which the leader calls after every
// cycle, on the revocable cluster once its offers went to tasks:
// over=none as it is; over=lenders after every lender's reservation was
// taken back by its role and the lending limits lowered to nothing.
func BenchmarkOverlent(b *testing.B) {
	s := revocableShape{benchShape: benchShapes[0], capable: true}
	for _, over := range []string{"none", "lenders"} {
		b.Run(fmt.Sprintf("%s/over=%s", s, over), func(b *testing.B) {
			a := revocableCluster(b, s)
			for _, o := range a.Allocate(t0) {
				must(b, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
			}
			if over == "lenders" {
				for i := 0; i < 10; i++ {
					lender := fmt.Sprintf("lender%d", i)
					must(b, a.AddFramework(Framework{ID: lender, Principal: lender, Roles: []string{lender}}))
					must(b, a.SetLendingLimit(lender, api.Resources{}))
				}
				for _, o := range a.Allocate(t0) {
					must(b, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
				}
			}
			want := len(a.Overlent())
			if (want > 0) != (over == "lenders") {
				b.Fatalf("%d agents over-lent", want)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if got := len(a.Overlent()); got != want {
					b.Fatalf("%d over-lent, then %d", want, got)
				}
			}
			b.ReportMetric(float64(want), "entries/op")
		})
	}
}
