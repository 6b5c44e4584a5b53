package logs

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func newLogger(window time.Duration) (hclog.Logger, *bytes.Buffer, *fakeClock) {
	var buf bytes.Buffer
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	base := hclog.New(&hclog.LoggerOptions{Name: "masterd", Output: &buf, Level: hclog.Info})
	return Wrap(base, Options{RepeatWindow: window, Now: clock.Now}), &buf, clock
}

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestRepeatedErrorsArePrintedOncePerWindowWithACount(t *testing.T) {
	log, buf, clock := newLogger(10 * time.Second)
	raft := log.Named("raft")
	refused := errors.New("dial tcp 127.0.0.1:5060: connect: connection refused")
	// What hashicorp/raft logs about a dead peer, with a backoff that grows
	// between repeats: 4 a second for 10 s.
	for i := range 40 {
		raft.Error("failed to heartbeat to", "peer", "127.0.0.1:5060", "backoff time", time.Duration(10<<min(i, 4))*time.Millisecond, "error", refused)
		clock.now = clock.now.Add(250 * time.Millisecond)
	}
	got := lines(buf)
	if len(got) != 1 {
		t.Fatalf("40 identical errors in one window printed %d lines, want 1:\n%s", len(got), buf)
	}
	raft.Error("failed to heartbeat to", "peer", "127.0.0.1:5060", "backoff time", 250*time.Millisecond, "error", refused)
	got = lines(buf)
	if len(got) != 2 || !strings.Contains(got[1], "failed to heartbeat to (39 similar suppressed)") {
		t.Fatalf("first error after the window: want it printed with the count of the 39 left out, got:\n%s", buf)
	}
}

func TestDifferentErrorsAndInfoAreNotSuppressed(t *testing.T) {
	log, buf, _ := newLogger(10 * time.Second)
	log.Named("raft").Error("failed to heartbeat to", "peer", "127.0.0.1:5060")
	log.Named("raft").Error("failed to heartbeat to", "peer", "127.0.0.1:5061") // another peer
	log.Named("transport").Error("failed to heartbeat to", "peer", "127.0.0.1:5060")
	log.With("id", "m2").Error("failed to heartbeat to", "peer", "127.0.0.1:5060")
	log.Warn("failed to heartbeat to", "peer", "127.0.0.1:5060") // another level
	for range 3 {
		log.Info("entering follower state")
	}
	if got := lines(buf); len(got) != 8 {
		t.Fatalf("want every distinct warning and every info line printed (8), got %d:\n%s", len(got), buf)
	}
}

func TestZeroWindowPrintsEveryRepeat(t *testing.T) {
	log, buf, _ := newLogger(0)
	for range 5 {
		log.Error("failed to heartbeat to", "peer", "127.0.0.1:5060")
	}
	if got := lines(buf); len(got) != 5 {
		t.Fatalf("window 0: want 5 lines, got %d:\n%s", len(got), buf)
	}
}

func TestTimesArePrintedWithoutTheMonotonicReading(t *testing.T) {
	log, buf, _ := newLogger(time.Second)
	now := time.Now() // carries a monotonic reading: %v prints "m=+0.0…"
	log.Info("recovery: offers wait for agents to re-register", "deadline", now)
	log.With("since", now).Warn("agent missed its heartbeats", "last_seen", now)
	out := buf.String()
	if strings.Contains(out, "m=+") || strings.Contains(out, "m=-") {
		t.Fatalf("monotonic clock reading printed:\n%s", out)
	}
	want := now.UTC().Format(time.RFC3339Nano)
	if strings.Count(out, want) != 3 {
		t.Fatalf("want each time printed as %s (RFC 3339, UTC), got:\n%s", want, out)
	}
}

func TestMessagesBelowTheLevelAreNeitherPrintedNorCounted(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{now: time.Unix(0, 0)}
	log := Wrap(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Error}), Options{RepeatWindow: time.Second, Now: clock.Now})
	log.Warn("failed to contact", "server-id", "m3")
	log.Error("failed", "n", 1)
	if got := lines(&buf); len(got) != 1 || strings.Contains(got[0], "failed to contact") {
		t.Fatalf("want only the error printed, got:\n%s", buf.String())
	}
}
