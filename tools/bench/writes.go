package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
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
		result, err := b.step(ctx, clients, func(i int) (*http.Request, error) { return quotaPut(target, b.opts.keys, i) })
		if err != nil {
			return nil, fmt.Errorf("masterd: %w%s", err, logTails(c))
		}
		rows = append(rows, writesRow{system: "allot (3 × masterd)", result: result})
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
		result, err := b.step(ctx, clients, func(i int) (*http.Request, error) {
			// Same key space and value bytes as the quota PUT.
			return etcdPut(target, benchKey(b.opts.keys, i), quotaBody(i))
		})
		if err != nil {
			return nil, fmt.Errorf("etcd: %w (logs under %s)", err, dir)
		}
		rows = append(rows, writesRow{system: "etcd " + b.etcdVersion + " (3 members)", result: result})
	}
	return rows, nil
}

// step runs an unmeasured warm-up and then the measured load, with one client
// (and connection pool) for both.
func (b *bench) step(ctx context.Context, clients int, newRequest func(int) (*http.Request, error)) (LoadResult, error) {
	client := NewHTTPClient(clients, requestTimeout)
	defer client.CloseIdleConnections()
	load := Load{Clients: clients, Timeout: requestTimeout, NewRequest: newRequest, Requests: maxRequestsPerStep}
	if b.opts.warmup > 0 {
		warm := load
		warm.Duration = b.opts.warmup
		warm.Run(ctx, client)
	}
	load.Duration = b.opts.duration
	result := load.Run(ctx, client)
	if err := ctx.Err(); err != nil {
		return result, err
	}
	if result.OK == 0 {
		return result, fmt.Errorf("no request succeeded (%s)", formatErrors(result.ErrorKind))
	}
	return result, nil
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
	s.WriteString("| system | clients | writes/s | p50 | p99 | ok | errors |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, row := range rows {
		r := row.result
		fmt.Fprintf(&s, "| %s | %d | %.0f | %s | %s | %d | %s |\n", row.system, r.Clients, r.PerSecond(),
			formatDuration(r.Percentile(0.50)), formatDuration(r.Percentile(0.99)), r.OK, formatErrors(r.ErrorKind))
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
