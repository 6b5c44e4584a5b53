package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// BenchmarkLaunchThroughMaster times ACCEPT → TASK_RUNNING at a framework:
// masterd (one server) validates the launch and sends it to a real agentd,
// which starts the task in its cgroup and reports it back. Offers are not
// timed: each launch waits for its offer first. The tasks stay running, so
// at the end it also reports agentd's memory and its monitors' with b.N
// tasks (-benchtime 200x for 200).
func BenchmarkLaunchThroughMaster(b *testing.B) {
	c := testcluster.Start(b, 1, fastMaster)
	if _, err := c.WaitLeader(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent := startAgent(b, c.Addresses(), "bench-node", "cpus:4;mem:4096;disk:1024")
	cl, err := api.NewSchedulerClient(c.Addresses(), "")
	if err != nil {
		b.Fatal(err)
	}
	s, err := cl.Subscribe(ctx, api.FrameworkInfo{Name: "bench", Roles: []string{"*"}})
	if err != nil {
		b.Fatal(err)
	}
	res := api.Resources{"cpus": 0.01, "mem": 4}
	zero := 0.0
	latencies := make([]time.Duration, 0, b.N)
	var ids []string
	b.ResetTimer()
	for i := 0; i < b.N; {
		e := <-s.Events()
		switch e.Type {
		case api.EventOffers:
			o := e.Offers.Offers[0]
			for _, extra := range e.Offers.Offers[1:] {
				_ = s.Decline(ctx, []string{extra.ID}, &api.Filters{RefuseSeconds: &zero})
			}
			id := fmt.Sprintf("bench-%d", i)
			ti := sleepTask(id, "sleep 3600", res, nil)
			ti.AgentID = o.AgentID
			begin := time.Now()
			op := api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{ti}}}
			if err := s.Accept(ctx, []string{o.ID}, []api.Operation{op}, &api.Filters{RefuseSeconds: &zero}); err != nil {
				b.Fatal(err)
			}
			for {
				e := <-s.Events()
				if e.Type == api.EventOffers {
					for _, o := range e.Offers.Offers {
						_ = s.Decline(ctx, []string{o.ID}, &api.Filters{RefuseSeconds: &zero})
					}
				}
				if e.Type != api.EventUpdate {
					continue
				}
				_ = s.AcknowledgeStatus(ctx, e.Update.Status)
				if e.Update.Status.TaskID == id && e.Update.Status.State == api.TaskRunning {
					break
				}
				if api.IsTerminal(e.Update.Status.State) {
					b.Fatalf("task %s: %+v", e.Update.Status.TaskID, e.Update.Status)
				}
			}
			latencies = append(latencies, time.Since(begin))
			ids = append(ids, id)
			i++
		case api.EventUpdate:
			_ = s.AcknowledgeStatus(ctx, e.Update.Status)
		}
	}
	b.StopTimer()
	reportPercentiles(b, latencies)
	b.ReportMetric(float64(memoryKiB(agent.cmd.Process.Pid, "Rss"))/1024, "agentd-rss-MiB")
	var monitorRSS, monitorPSS int
	monitors := monitorProcesses(agent.workDir)
	for _, pid := range monitors {
		monitorRSS += memoryKiB(pid, "Rss")
		monitorPSS += memoryKiB(pid, "Pss")
	}
	b.ReportMetric(float64(len(monitors)), "monitors")
	b.ReportMetric(float64(monitorRSS)/1024, "monitors-rss-MiB")
	b.ReportMetric(float64(monitorPSS)/1024, "monitors-pss-MiB")
	for _, id := range ids {
		_ = s.Kill(ctx, id, "")
	}
}

// memoryKiB reads one field of /proc/<pid>/smaps_rollup, in KiB.
func memoryKiB(pid int, field string) int {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, rest, ok := strings.Cut(line, ":"); ok && name == field {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kib
		}
	}
	return 0
}

// BenchmarkLenderLaunchThroughMaster times a lender's ACCEPT on its
// reservation → its TASK_RUNNING at the lender framework, with one masterd
// and one agentd: role db's reservation (2 cpus) is lent to 4 borrowers of
// 0.5 cpus beside regular tasks filling the rest of the node; db's task of
// 0.5 cpus makes the agent evict one borrower first. Each iteration fills
// the reservation again and waits for db's offer, untimed.
func BenchmarkLenderLaunchThroughMaster(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, agent, tenants := startLendNode(b, ctx, "bench-lend-node", api.Resources{"cpus": 2, "mem": 1024})
	cl, err := api.NewSchedulerClient(c.Addresses(), "")
	if err != nil {
		b.Fatal(err)
	}
	long := 3600.0
	latencies := make([]time.Duration, 0, b.N)
	evictions := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		var borrowers []string
		for j := range 4 {
			ti := sleepTask(fmt.Sprintf("b%d-borrower-%d", i, j), "sleep 3600", api.Resources{"cpus": 0.5, "mem": 256}, nil)
			ti.Revocable = true
			borrowers = append(borrowers, ti.TaskID)
			tenants.add(ctx, ti)
		}
		for _, id := range borrowers {
			tenants.waitState(ctx, id, api.TaskRunning, 60*time.Second)
		}
		s, err := cl.Subscribe(ctx, api.FrameworkInfo{Name: "db", Roles: []string{"db"}})
		if err != nil {
			b.Fatal(err)
		}
		ti := sleepTask(fmt.Sprintf("b%d-db", i), "sleep 3600", api.Resources{"cpus": 0.5, "mem": 256}, nil)
		var begin time.Time
		for begin.IsZero() {
			e := <-s.Events()
			if e.Type != api.EventOffers {
				continue
			}
			for _, o := range e.Offers.Offers {
				own := api.Resources{}
				for _, r := range o.Resources {
					if r.Role == "db" && !r.Revocable {
						own.Add(r.Scalars)
					}
				}
				if !begin.IsZero() || !own.Contains(ti.Resources) {
					_ = s.Decline(ctx, []string{o.ID}, &api.Filters{RefuseSeconds: &long})
					continue
				}
				ti.AgentID = o.AgentID
				op := api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{ti}}}
				b.StartTimer()
				begin = time.Now()
				if err := s.Accept(ctx, []string{o.ID}, []api.Operation{op}, &api.Filters{RefuseSeconds: &long}); err != nil {
					b.Fatal(err)
				}
			}
		}
		for {
			e := <-s.Events()
			if e.Type != api.EventUpdate {
				continue
			}
			_ = s.AcknowledgeStatus(ctx, e.Update.Status)
			if st := e.Update.Status; st.TaskID == ti.TaskID && st.State != api.TaskStaging {
				if st.State != api.TaskRunning {
					b.Fatalf("db's task: %+v", st)
				}
				break
			}
		}
		latencies = append(latencies, time.Since(begin))
		b.StopTimer()
		live := containersByTask(b, agent)
		for _, id := range borrowers {
			if _, ok := live[id]; !ok {
				evictions++
			} else {
				tenants.kill(ctx, id)
			}
		}
		if err := s.Teardown(ctx); err != nil {
			b.Fatal(err)
		}
		for _, id := range borrowers {
			tenants.waitEnded(ctx, id, 60*time.Second)
		}
		s.Close()
	}
	if evictions != b.N {
		b.Fatalf("%d borrowers evicted in %d launches, want one each", evictions, b.N)
	}
	reportPercentiles(b, latencies)
}

// reportPercentiles reports the p50 and p99 of durations in milliseconds.
func reportPercentiles(b *testing.B, durations []time.Duration) {
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
}
