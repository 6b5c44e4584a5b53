package allocator

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

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
			})
		}
	}
}
