// Command chaos runs allot's fault-injection suite: a real masterd cluster,
// concurrent clients reading, writing and compare-and-swapping rate limits
// through random servers, faults injected and healed (kill -9, SIGSTOP, and
// the partition and disk nemeses), then a check that the history is
// linearizable per key, that no acknowledged write was lost and that every
// server converged to the same state.
//
//	go run ./tools/chaos -servers 3 -clients 5 -nemesis combined -duration 5m
//
// -nemesis combined draws faults of every kind and sometimes overlaps two
// of different kinds (a pause during a partition), healed in either order;
// a list of names injects them one at a time. Every run prints its seed;
// -seed replays the same schedule of faults and the same operations (the cluster's timing is not replayed). A failing run keeps its
// history (history.json), porcupine's drawing of each non-linearizable key
// and the servers' logs in the directory it names. -check FILE checks a kept
// history again.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/tools/chaos/checker"
	"github.com/allot/allot/tools/chaos/history"
	"github.com/allot/allot/tools/chaos/nemesis"
	"github.com/allot/allot/tools/chaos/runner"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		servers  = fs.Int("servers", 3, "masterd servers (3 or 5)")
		clients  = fs.Int("clients", 5, "concurrent clients")
		keys     = fs.Int("keys", 3, "keys (rate limit principals) the clients share")
		duration = fs.Duration("duration", time.Minute, "how long each run's clients run")
		interval = fs.Duration("interval", 3*time.Second, "how long a fault lasts, and the quiet time between faults")
		nemeses  = fs.String("nemesis", "combined", "faults, comma-separated ("+strings.Join(nemesis.Names(), ", ")+"), one at a time; or combined: all of them, sometimes two at once")
		seed     = fs.Int64("seed", 0, "seed of the first run (0: from the clock); run i uses seed+i")
		runs     = fs.Int("runs", 1, "runs, one after the other")
		out      = fs.String("out", filepath.Join(os.TempDir(), "allot-chaos"), "directory that keeps failed runs (history, logs)")
		keep     = fs.Bool("keep", false, "keep passing runs too")
		binary   = fs.String("masterd", "", "masterd binary (default: build ./masterd of this module)")
		check    = fs.String("check", "", "check a kept history.json again and exit")
		verbose  = fs.Bool("v", false, "log every fault and the cluster's own messages")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *check != "" {
		return recheck(*check, stdout, stderr)
	}
	if *servers != 3 && *servers != 5 {
		fmt.Fprintf(stderr, "chaos: -servers must be 3 or 5, not %d\n", *servers)
		return 2
	}
	if *clients < 1 || *keys < 1 || *runs < 1 || *duration <= 0 || *interval <= 0 {
		fmt.Fprintln(stderr, "chaos: -clients, -keys, -runs, -duration and -interval must be positive")
		return 2
	}
	chosen, err := nemesis.Lookup(*nemeses)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: -nemesis: %v\n", err)
		return 2
	}
	if err := runner.Preflight(chosen); err != nil {
		fmt.Fprintf(stderr, "chaos: -nemesis %s: %v\n", *nemeses, err)
		return 1
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000_000
	}
	level := hclog.Info
	if *verbose {
		level = hclog.Debug
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "chaos", Level: level, Output: stderr})
	if *binary == "" {
		if *binary, err = testcluster.Build(""); err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return 1
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	failed := 0
	var summary runner.Summary
	for i := range *runs {
		s := *seed + int64(i)
		fmt.Fprintf(stdout, "run %d/%d: seed %d, %d servers, %d clients, %d keys, %s, nemesis %s, interval %s\n",
			i+1, *runs, s, *servers, *clients, *keys, *duration, *nemeses, *interval)
		rep, err := runner.Run(ctx, runner.Config{
			Binary: *binary, Servers: *servers, Clients: *clients, Keys: *keys,
			Duration: *duration, Interval: *interval, Nemeses: chosen, Combined: combined(*nemeses), Seed: s,
			Dir:  filepath.Join(*out, fmt.Sprintf("seed-%d-%s", s, time.Now().Format("20060102-150405"))),
			Keep: *keep, Log: log,
		})
		if rep != nil {
			printReport(stdout, rep)
			summary.Add(rep)
		}
		if err != nil || !rep.OK() {
			failed++
			if err != nil {
				fmt.Fprintf(stdout, "run error: %v\n", err)
			}
			if rep != nil {
				fmt.Fprintf(stdout, "FAIL seed %d: history and logs kept in %s (replay: -seed %d)\n", s, rep.Dir, s)
			} else {
				fmt.Fprintf(stdout, "FAIL seed %d (replay: -seed %d)\n", s, s)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	printSummary(stdout, summary.Rows())
	if failed > 0 {
		fmt.Fprintf(stdout, "%d of %d runs FAILED\n", failed, *runs)
		return 1
	}
	fmt.Fprintf(stdout, "all %d runs passed\n", *runs)
	return 0
}

// combined reports whether the -nemesis list asks for the combined
// schedule (faults of every kind, sometimes two at once).
func combined(list string) bool {
	for _, name := range strings.Split(list, ",") {
		if strings.TrimSpace(name) == "combined" {
			return true
		}
	}
	return false
}

func printReport(w io.Writer, rep *runner.Report) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tat\tfirst write after\tlongest no-write window\trecovery after heal\tcut-off reads")
	for _, f := range rep.Faults {
		name := f.Fault
		if f.Pair != 0 {
			name = fmt.Sprintf("[pair %d] %s", f.Pair, name)
		}
		cut := "-"
		if len(f.CutOff) > 0 {
			cut = fmt.Sprintf("%d (cut off: %s)", len(f.CutOffReads), strings.Join(f.CutOff, " "))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, round(f.Injected), round(f.FirstWrite), round(f.LongestGap), round(f.Recovery()), cut)
	}
	tw.Flush()
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	fmt.Fprintf(w, "ops %d; linearizable %s; lost writes %d; linearizable reads served cut off %d; converged %v\n",
		rep.Ops, rep.Check.Linearizable(), rep.Check.LostWrites(), rep.CutOffReads(), rep.Converged)
	if rep.DataDirMax > 0 {
		fmt.Fprintf(w, "largest data dir at the end: %.1f MiB\n", float64(rep.DataDirMax)/(1<<20))
	}
	if !rep.Check.OK() && len(rep.Check.Keys) > 0 {
		fmt.Fprintln(w, rep.Check.Summary())
	}
	for _, f := range rep.Faults {
		for _, op := range f.CutOffReads {
			fmt.Fprintf(w, "read served while cut off (%s): %s\n", f.Fault, op)
		}
	}
	if rep.Diverged != "" {
		fmt.Fprintln(w, rep.Diverged)
	}
}

// printSummary is the fault matrix of every run: per kind of fault, the
// checks and the figures (p50 / p99 / max; faults that came in a pair are
// in the pair row's figures, not their own).
func printSummary(w io.Writer, rows []runner.Row) {
	if len(rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tfaults (in pairs)\truns linearizable\tlost writes\tcut-off reads\tfirst write after\tlongest no-write window\trecovery after heal")
	for _, r := range rows {
		faults := fmt.Sprintf("%d (%d)", r.Faults, r.Overlapped)
		if r.Name == runner.PairRow {
			faults = fmt.Sprintf("%d pairs", r.Faults)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\n", r.Name, faults,
			r.Linearizable, r.Runs, r.LostWrites, r.CutOffReads, spread(r.FirstWrite), spread(r.LongestGap), spread(r.Recovery))
	}
	tw.Flush()
}

// spread is "p50 / p99 / max (n)" of sorted d.
func spread(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s / %s (n=%d)", round(runner.Percentile(d, 0.50)), round(runner.Percentile(d, 0.99)), round(d[len(d)-1]), len(d))
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func recheck(path string, stdout, stderr io.Writer) int {
	ops, err := history.Load(path)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 1
	}
	res := checker.Check(ops, 5*time.Minute)
	fmt.Fprintf(stdout, "%d ops; linearizable %s; lost writes %d\n%s\n", len(ops), res.Linearizable(), res.LostWrites(), res.Summary())
	if !res.OK() {
		return 1
	}
	return 0
}
