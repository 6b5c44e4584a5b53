package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

const requestTimeout = 5 * time.Second

// maxRequestsPerStep bounds a step by count as well as by time.
const maxRequestsPerStep = 5_000_000

// Issue 14's goals, as ratios of allot to etcd measured in the same run:
// writes/s at the most clients, p50 latency at the fewest.
const (
	throughputGoal = 1.5
	latencyGoal    = 1.0
)

type writesRow struct {
	system string
	result LoadResult
	// cpu is the CPU time (user + system) the system's servers used during
	// the measured load, 0 when unknown.
	cpu time.Duration
}

// cpuPerWrite is the servers' CPU time per acknowledged write. On a shared
// machine it varies far less than writes/s: the other work on the cores
// takes time from a server, not CPU per write. When the servers and the
// load generator saturate the cores, writes/s follows from it.
func (r writesRow) cpuPerWrite() time.Duration {
	if r.cpu <= 0 || r.result.OK == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.result.OK)
}

func writesScenario(ctx context.Context, b *bench) (string, error) {
	var rows []writesRow
	if b.opts.systems["allot"] {
		r, err := allotWrites(ctx, b)
		if err != nil {
			return "", err
		}
		rows = append(rows, r...)
	}
	if b.opts.systems["etcd"] {
		r, err := etcdWrites(ctx, b)
		if err != nil {
			return "", err
		}
		rows = append(rows, r...)
	}
	return writesTable(b, rows), nil
}

func allotWrites(ctx context.Context, b *bench) ([]writesRow, error) {
	progress("writes: starting 3 masterd servers")
	c, leader, err := b.masterdCluster(ctx, "writes-masterd", 3)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	target := c.Address(leader)
	var rows []writesRow
	for _, clients := range b.opts.clients {
		progress("writes: masterd leader %s, %d clients", c.ID(leader), clients)
		servers := filepath.Dir(c.Dir(0)) + "/" // every server's data dir is below it
		result, cpu, err := b.step(ctx, clients, servers, func(i int) (*http.Request, error) { return quotaPut(target, b.opts.keys, i) })
		if err != nil {
			return nil, fmt.Errorf("masterd: %w%s", err, logTails(c))
		}
		rows = append(rows, writesRow{system: "allot (3 × masterd)", result: result, cpu: cpu})
	}
	return rows, nil
}

func etcdWrites(ctx context.Context, b *bench) ([]writesRow, error) {
	progress("writes: starting 3 etcd members")
	dir := b.workDir + "/writes-etcd"
	c, err := startEtcd(b.etcdPath, dir, 3)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	leader, err := c.waitReady(waitCtx)
	cancel()
	if err != nil {
		return nil, err
	}
	target := c.members[leader].clientURL
	var rows []writesRow
	for _, clients := range b.opts.clients {
		progress("writes: etcd leader %s, %d clients", c.members[leader].name, clients)
		result, cpu, err := b.step(ctx, clients, dir+"/", func(i int) (*http.Request, error) {
			// Same key space and value bytes as the quota PUT.
			return etcdPut(target, benchKey(b.opts.keys, i), quotaBody(i))
		})
		if err != nil {
			return nil, fmt.Errorf("etcd: %w (logs under %s)", err, dir)
		}
		rows = append(rows, writesRow{system: "etcd " + b.etcdVersion + " (3 members)", result: result, cpu: cpu})
	}
	return rows, nil
}

// step runs an unmeasured warm-up and then the measured load, with one client
// (and connection pool) for both. It also returns the CPU time the servers
// (the processes with an argument under serverDir) used during the measured
// load.
func (b *bench) step(ctx context.Context, clients int, serverDir string, newRequest func(int) (*http.Request, error)) (LoadResult, time.Duration, error) {
	client := NewHTTPClient(clients, requestTimeout)
	defer client.CloseIdleConnections()
	load := Load{Clients: clients, Timeout: requestTimeout, NewRequest: newRequest, Requests: maxRequestsPerStep}
	if b.opts.warmup > 0 {
		warm := load
		warm.Duration = b.opts.warmup
		warm.Run(ctx, client)
	}
	load.Duration = b.opts.duration
	before, okBefore := processCPU(serverDir)
	result := load.Run(ctx, client)
	after, okAfter := processCPU(serverDir)
	var cpu time.Duration
	if okBefore && okAfter {
		cpu = after - before
	}
	if err := ctx.Err(); err != nil {
		return result, cpu, err
	}
	if result.OK == 0 {
		return result, cpu, fmt.Errorf("no request succeeded (%s)", formatErrors(result.ErrorKind))
	}
	return result, cpu, nil
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux this runs on).
const clockTicks = 100

// processCPU sums the CPU time (user + system) of the processes that have
// an argument starting with dir, from /proc; false where there is no /proc.
func processCPU(dir string) (time.Duration, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks uint64
	found := false
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
		if err != nil || !slices.ContainsFunc(strings.Split(string(cmdline), "\x00"), func(arg string) bool { return strings.HasPrefix(arg, dir) }) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses and
		// may hold spaces: state is field 3, utime 14, stime 15.
		_, rest, ok := strings.Cut(string(stat), ") ")
		fields := strings.Fields(rest)
		if !ok || len(fields) < 13 {
			continue
		}
		utime, err1 := strconv.ParseUint(fields[11], 10, 64)
		stime, err2 := strconv.ParseUint(fields[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		ticks += utime + stime
		found = true
	}
	return time.Duration(ticks) * time.Second / clockTicks, found
}

func formatErrors(kinds map[string]int) string {
	if len(kinds) == 0 {
		return "0"
	}
	var parts []string
	for kind, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", n, kind))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func writesTable(b *bench, rows []writesRow) string {
	var s strings.Builder
	fmt.Fprintf(&s, "### writes: closed-loop PUTs to the leader, %s per step after %s warm-up, %d keys%s\n\n", b.opts.duration, b.opts.warmup, b.opts.keys, argsNote(b))
	fmt.Fprintf(&s, "allot: `PUT /v1/quotas/bench-<k>` (k < %d) `{\"limits\": {\"cpus\": n, \"mem\": 1024}}`; ", b.opts.keys)
	s.WriteString("etcd: `POST /v3/kv/put` (JSON gateway) with the same key and value bytes. Both fsync their logs.\n\n")
	s.WriteString("| system | clients | writes/s | p50 | p99 | ok | errors | servers' CPU per write |\n|---|---:|---:|---:|---:|---:|---|---:|\n")
	for _, row := range rows {
		r := row.result
		cpu := "—"
		if d := row.cpuPerWrite(); d > 0 {
			cpu = formatDuration(d)
		}
		fmt.Fprintf(&s, "| %s | %d | %.0f | %s | %s | %d | %s | %s |\n", row.system, r.Clients, r.PerSecond(),
			formatDuration(r.Percentile(0.50)), formatDuration(r.Percentile(0.99)), r.OK, formatErrors(r.ErrorKind), cpu)
	}
	lo, hi := b.opts.clients[0], b.opts.clients[len(b.opts.clients)-1]
	allotLo, allotHi, okA := resultsAt(rows, "allot", lo, hi)
	etcdLo, etcdHi, okE := resultsAt(rows, "etcd", lo, hi)
	if okA && okE {
		throughput := allotHi.PerSecond() / etcdHi.PerSecond()
		latency := float64(allotLo.Percentile(0.5)) / float64(etcdLo.Percentile(0.5))
		s.WriteString("\n| ratio (allot ÷ etcd) | measured | goal | met |\n|---|---:|---:|---|\n")
		fmt.Fprintf(&s, "| writes/s at %d clients | %.2f× | ≥ %.2f× | %s |\n", hi, throughput, throughputGoal, met(throughput >= throughputGoal))
		fmt.Fprintf(&s, "| p50 at %d client(s) | %.2f× | ≤ %.2f× | %s |\n", lo, latency, latencyGoal, met(latency <= latencyGoal))
		if a, e := cpuAt(rows, "allot", hi), cpuAt(rows, "etcd", hi); a > 0 && e > 0 {
			fmt.Fprintf(&s, "| servers' CPU per write at %d clients | %.2f× | — | — |\n",
				hi, float64(a)/float64(e))
		}
	}
	return s.String()
}

func resultsAt(rows []writesRow, system string, lo, hi int) (LoadResult, LoadResult, bool) {
	var low, high LoadResult
	var haveLow, haveHigh bool
	for _, row := range rows {
		if !strings.HasPrefix(row.system, system) {
			continue
		}
		if row.result.Clients == lo {
			low, haveLow = row.result, true
		}
		if row.result.Clients == hi {
			high, haveHigh = row.result, true
		}
	}
	return low, high, haveLow && haveHigh
}

// cpuAt is the servers' CPU per write of system at clients, 0 when unknown.
func cpuAt(rows []writesRow, system string, clients int) time.Duration {
	for _, row := range rows {
		if strings.HasPrefix(row.system, system) && row.result.Clients == clients {
			return row.cpuPerWrite()
		}
	}
	return 0
}
