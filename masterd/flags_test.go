package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// These tests run the built masterd binary: they are about what an operator
// sees when typing its command line.

func TestHelpListsTheFlagsOnStdoutAndExitsZero(t *testing.T) {
	bin := masterdBinary(t)
	for _, arg := range []string{"-h", "-help", "--help"} {
		stdout, stderr, code := runMasterd(t, bin, arg)
		if code != 0 {
			t.Errorf("masterd %s exited %d, want 0; stderr:\n%s", arg, code, stderr)
		}
		for _, flag := range []string{"-join", "-replace", "-version", "-log-level", "-log-repeat-window"} {
			if !strings.Contains(stdout, "  "+flag) {
				t.Errorf("masterd %s: stdout does not list %s:\n%s", arg, flag, stdout)
			}
		}
	}
}

func TestVersionPrintsTheBuildVersionAndExitsZero(t *testing.T) {
	stdout, stderr, code := runMasterd(t, masterdBinary(t), "-version")
	if code != 0 || !regexp.MustCompile(`^masterd \S.*\n$`).MatchString(stdout) {
		t.Fatalf("masterd -version: exit %d, stdout %q, stderr %q; want exit 0 and one line \"masterd VERSION\"", code, stdout, stderr)
	}

	// A release build sets the version with -ldflags.
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "masterd")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test", "-o", bin, "./masterd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if stdout, _, code := runMasterd(t, bin, "-version"); code != 0 || stdout != "masterd v9.8.7-test\n" {
		t.Fatalf("masterd -version built with -X main.version=v9.8.7-test: exit %d, stdout %q", code, stdout)
	}
}

func TestFlagErrorsAreAllReportedInFlagOrder(t *testing.T) {
	bin := masterdBinary(t)
	args := []string{"-dev", "-recovery-timeout", "0s", "-offer-timeout", "-1s", "-allocation-interval", "0s",
		"-heartbeat-interval", "0s", "-agent-ping-timeout", "0s", "-log-level", "loud", "-recovery-agent-ratio", "1.5"}
	want := []string{"-agent-ping-timeout", "-allocation-interval", "-heartbeat-interval", "-log-level",
		"-offer-timeout", "-recovery-agent-ratio", "-recovery-timeout"}
	var first string
	// The old code walked a map: ten runs would show another order.
	for run := range 10 {
		_, stderr, code := runMasterd(t, bin, args...)
		if code == 0 {
			t.Fatalf("bad flags accepted")
		}
		if run == 0 {
			first = stderr
			last := -1
			for _, flag := range want {
				at := strings.Index(stderr, flag+":")
				if at < 0 {
					t.Fatalf("the error for %s is not reported:\n%s", flag, stderr)
				}
				if at < last {
					t.Fatalf("%s is not reported in flag order:\n%s", flag, stderr)
				}
				last = at
			}
		} else if stderr != first {
			t.Fatalf("flag errors differ between runs:\n%s\n---\n%s", first, stderr)
		}
	}
}

func TestUnknownLogLevelIsAnError(t *testing.T) {
	_, stderr, code := runMasterd(t, masterdBinary(t), "-dev", "-http", "127.0.0.1:0", "-log-level", "verbose")
	if code == 0 || !strings.Contains(stderr, `-log-level: unknown level "verbose"`) {
		t.Fatalf("-log-level verbose: exit %d, stderr:\n%s\nwant a non-zero exit naming the level", code, stderr)
	}
	// Every documented level starts the server (and -h ends it at once).
	for _, level := range []string{"trace", "debug", "info", "warn", "error", "WARN"} {
		if _, stderr, code := runMasterd(t, masterdBinary(t), "-log-level", level, "-version"); code != 0 {
			t.Errorf("-log-level %s refused: %s", level, stderr)
		}
	}
}

func TestJoinToADeadAddressSaysSoAtOnceAndSIGTERMEndsItPromptly(t *testing.T) {
	dead := freeAddr(t) // nothing listens there
	d := startDaemon(t, masterdBinary(t), "-id", "m2", "-data-dir", t.TempDir(), "-http", freeAddr(t),
		"-raft", freeAddr(t), "-join", "http://"+dead)
	// Each failed attempt is logged with the address and the error (the old
	// code said nothing for 30 s, then retried silently inside the client).
	d.waitLog(t, "join attempt failed", "via=http://"+dead, "attempt=1", "connection refused", "attempt=2")

	d.signal(t, syscall.SIGTERM)
	start := time.Now()
	code := d.waitExit(t)
	took := time.Since(start)
	// The issue asks for under 2 s (the old code took more than 20 s, the
	// length of an attempt in flight). The bound allows 5 s for a loaded
	// machine; the measured time is logged.
	t.Logf("SIGTERM during -join: exited %d after %v", code, took)
	if code != 0 || took > 5*time.Second {
		t.Fatalf("SIGTERM during -join: exit %d after %v; want 0 within 2 s (5 s tolerated)", code, took)
	}
}

func TestSIGTERMEndsAJoinAttemptInFlight(t *testing.T) {
	// A server that accepts the connection and never answers: the attempt
	// hangs until its timeout, which SIGTERM must not wait for.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			accepted <- conn
		}
	}()
	d := startDaemon(t, masterdBinary(t), "-id", "m2", "-data-dir", t.TempDir(), "-http", freeAddr(t),
		"-raft", freeAddr(t), "-join", "http://"+silent.Addr().String())
	select {
	case conn := <-accepted:
		defer conn.Close()
	case <-time.After(60 * time.Second):
		t.Fatalf("masterd never dialled the join address:\n%s", d.logText())
	}
	d.signal(t, syscall.SIGTERM)
	start := time.Now()
	code := d.waitExit(t)
	took := time.Since(start)
	// Same bound and tolerance as above.
	t.Logf("SIGTERM during a join attempt in flight: exited %d after %v", code, took)
	if code != 0 || took > 5*time.Second {
		t.Fatalf("SIGTERM during a join attempt: exit %d after %v; want 0 within 2 s (5 s tolerated)", code, took)
	}
}

func TestLeaderLogsARepeatedRaftErrorOncePerWindow(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithArgs("-log-repeat-window", "1s"))
	leader := waitLeader(t, c)
	dead := c.Followers()[0]
	if err := c.Kill(dead); err != nil {
		t.Fatal(err)
	}
	// Raft retries the dead peer about 4 times a second: with a 1 s window
	// the leader prints one line a second, counting the others.
	marker := "failed to heartbeat to (" // only a line that counts suppressed repeats reads so
	eventually(t, "a line counting the suppressed repeats", func() error {
		if !strings.Contains(c.LogTail(leader, 2000), marker) {
			return fmt.Errorf("no %q in the leader's log yet", marker)
		}
		return nil
	})
	// Only identical errors are repeats: the first failure may read
	// "connection reset by peer" and the next ones "connection refused".
	last := map[string]time.Time{}
	lines := 0
	for _, line := range strings.Split(c.LogTail(leader, 5000), "\n") {
		if !strings.Contains(line, "failed to heartbeat to") || !strings.Contains(line, c.RaftAddress(dead)) {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", strings.Fields(line)[0])
		if err != nil {
			t.Fatalf("log line without a time: %q", line)
		}
		_, errText, _ := strings.Cut(line, "error=")
		// The window is timed before hclog stamps the line: allow a little.
		if prev, seen := last[errText]; seen && at.Sub(prev) < 900*time.Millisecond {
			t.Fatalf("two identical heartbeat errors for the dead peer %v apart, within the 1 s window:\n%s", at.Sub(prev), c.LogTail(leader, 40))
		}
		last[errText] = at
		lines++
	}
	if lines < 2 {
		t.Fatalf("want at least the first error and a counted repeat, got %d lines", lines)
	}
}

func TestLogsAndAPIPrintTimesWithoutTheMonotonicReading(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithArgs("-test-hooks"))
	waitLeader(t, c)
	// A new leader with quotas and admitted agents logs its recovery
	// deadline, a time.Time computed from time.Now().
	for _, call := range []struct{ path, body string }{
		{"/v1/quotas/eng", `{"limits": {"cpus": 1}}`},
		{"/v1/test/agents/node-1", `{"hostname": "node-1", "resources": {"cpus": 2}}`},
	} {
		req, _ := http.NewRequest(http.MethodPut, c.Address(0)+call.path, strings.NewReader(call.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT %s: %s", call.path, resp.Status)
		}
	}
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, c)
	eventually(t, "the recovery log line", func() error {
		if !strings.Contains(c.LogTail(0, 200), "recovery: offers wait") {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	info, err := c.ClusterInfo(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Recovery.Active {
		t.Fatalf("recovery not active: %+v", info.Recovery)
	}
	log := c.LogTail(0, 2000)
	if m := regexp.MustCompile(`m=[+-][0-9.]+`).FindString(log); m != "" {
		t.Fatalf("a time printed with its monotonic reading (%s):\n%s", m, log)
	}
	if !regexp.MustCompile(`deadline=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`).MatchString(log) {
		t.Fatalf("the recovery deadline is not printed as RFC 3339 in UTC:\n%s", log)
	}
}

// TestRateLimitsFileIsDecodedStrictly: the -rate-limits file goes through
// the HTTP API's strict decoder. encoding/json alone let the last of two
// keys win, matched "QPS" to qps and read a null principal as "": each of
// those started a server with a configuration nobody wrote.
func TestRateLimitsFileIsDecodedStrictly(t *testing.T) {
	bin := masterdBinary(t)
	tests := map[string]struct {
		content string
		want    string // after "-rate-limits PATH: "
	}{
		"duplicate key": {`{"limits": [{"principal": "spark", "qps": 10, "qps": 20}]}`,
			"limits[0].qps: appears more than once"},
		"name in another case": {`{"limits": [{"principal": "spark", "QPS": 10}]}`,
			`limits[0].QPS: unknown field (field names are case-sensitive: did you mean "qps"?)`},
		"unknown field":         {`{"limits": [], "aggregate_default_rate": 5}`, "aggregate_default_rate: unknown field"},
		"null for a string":     {`{"limits": [{"principal": null, "qps": 1}]}`, "limits[0].principal: null is not allowed here"},
		"string for a number":   {`{"aggregate_default_qps": "33.3"}`, `aggregate_default_qps: want a number, not the string "33.3"`},
		"integer out of range":  {`{"aggregate_default_capacity": 1e30}`, "aggregate_default_capacity: "},
		"data after the object": {`{"limits": []} {"limits": []}`, "the file has data after the JSON object"},
		"empty":                 {``, "the file is empty: a JSON object is required"},
		"not an object":         {`[]`, "the file is an array: a JSON object is required"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rates.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := runMasterd(t, bin, "-dev", "-http", "127.0.0.1:0", "-rate-limits", path)
			if want := "masterd: -rate-limits " + path + ": " + tc.want; code == 0 || !strings.Contains(stderr, want) {
				t.Fatalf("-rate-limits with %s: exit %d, stderr:\n%s\nwant a non-zero exit and %q", tc.content, code, stderr, want)
			}
		})
	}
}

// TestRateLimitsFileSeedsTheConfiguration: a valid file is what a new
// cluster starts with.
func TestRateLimitsFileSeedsTheConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates.json")
	rates := `{
  "limits": [
    {"principal": "spark", "qps": 55.5, "burst": 10, "capacity": 100},
    {"principal": "audit"}
  ],
  "aggregate_default_qps": 33.3,
  "aggregate_default_capacity": 1000
}
`
	if err := os.WriteFile(path, []byte(rates), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	d := startDaemon(t, masterdBinary(t), "-dev", "-http", addr, "-rate-limits", path)
	d.waitLog(t, "seeded rate limits from -rate-limits")
	client, err := api.NewClient([]string{"http://" + addr}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := client.RateLimitConfig(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range cfg.Limits {
		qps := "none"
		if l.QPS != nil {
			qps = fmt.Sprint(*l.QPS)
		}
		got[l.Principal] = fmt.Sprintf("qps %s burst %d capacity %d", qps, deref(l.Burst), deref(l.Capacity))
	}
	// A principal without qps is counted, not throttled: no burst.
	want := map[string]string{"spark": "qps 55.5 burst 10 capacity 100", "audit": "qps none burst 0 capacity 1000"}
	if fmt.Sprint(got) != fmt.Sprint(want) || cfg.AggregateDefaultQPS == nil || *cfg.AggregateDefaultQPS != 33.3 {
		t.Fatalf("seeded configuration %v (default %+v), want %v and default qps 33.3", got, cfg, want)
	}
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
