package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/tools/chaos/nemesis"
	"github.com/allot/allot/tools/chaos/runner"
)

// TestChaosShort is the slice of the suite that `make test` runs: a fixed
// seed, three servers, leader kills, leader pauses and (where servers can
// run in network namespaces) an isolated leader, for 24 s. It fails on a
// non-linearizable history, a lost acknowledged write, a linearizable read
// served by a cut-off server or servers that do not converge. Nothing in
// it is timed: the figures are logged, not asserted (see
// docs/guides/reliability.md for them).
func TestChaosShort(t *testing.T) {
	bin, err := testcluster.Build("")
	if err != nil {
		t.Fatal(err)
	}
	chosen, err := nemesis.Lookup(shortNemeses(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rep, err := runner.Run(context.Background(), runner.Config{
		Binary: bin, Servers: 3, Clients: 4, Keys: 2,
		Duration: 24 * time.Second, Interval: 2 * time.Second,
		Nemeses: chosen, Seed: 13, Dir: filepath.Join(dir, "run"),
		Log: hclog.New(&hclog.LoggerOptions{Name: "chaos", Output: testWriter{t}}),
	})
	if rep != nil {
		var out bytes.Buffer
		printReport(&out, rep)
		t.Logf("seed %d:\n%s", rep.Seed, out.String())
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(rep.Faults) == 0 {
		t.Fatal("no fault was injected")
	}
	if rep.Ops == 0 {
		t.Fatal("the clients recorded no operation")
	}
	if !rep.OK() {
		t.Fatalf("violation (seed %d; history kept in %s):\n%s\n%s", rep.Seed, rep.Dir, rep.Check.Summary(), rep.Diverged)
	}
}

// shortNemeses are the faults of TestChaosShort: partition-leader joins
// kill-leader and pause where this machine can run servers in network
// namespaces; elsewhere the slice runs without it and says why.
func shortNemeses(t *testing.T) string {
	if err := testcluster.NetnsSupported(); err != nil {
		t.Logf("no partition-leader in this slice: %v", err)
		return "kill-leader,pause"
	}
	return "kill-leader,pause,partition-leader"
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestFlagsRejectBadInput(t *testing.T) {
	tests := map[string][]string{
		"four servers":    {"-servers", "4"},
		"no clients":      {"-clients", "0"},
		"unknown nemesis": {"-nemesis", "kill-leader,flood"},
		"empty nemesis":   {"-nemesis", ","},
		"negative runs":   {"-runs", "-1"},
		"unknown flag":    {"-fast"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if stderr.Len() == 0 {
				t.Fatal("no message on stderr")
			}
			if stdout.Len() != 0 {
				t.Fatalf("a rejected command line started a run: %s", stdout.String())
			}
		})
	}
}

func TestCombinedIsAskedByName(t *testing.T) {
	for list, want := range map[string]bool{
		"combined":                true,
		"kill-leader, combined":   true,
		"kill-leader,pause":       false,
		"partition-leader":        false,
		"combined-but-misspelled": false,
	} {
		if got := combined(list); got != want {
			t.Errorf("combined(%q) = %v, want %v", list, got, want)
		}
	}
}
