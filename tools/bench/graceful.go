package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// gracefulGoal is issue 14's bound on the write gap when the leader is
// stopped with SIGTERM (it hands its leadership over first).
const gracefulGoal = 100 * time.Millisecond

// gracefulScenario stops the leader with SIGTERM, as a service manager does,
// while a client writes: masterd hands its leadership to a follower before
// it shuts down. Measured: the longest stretch without an acknowledged
// write, from the signal until a write sent after the old leader exited is
// acknowledged.
func gracefulScenario(ctx context.Context, b *bench) (string, error) {
	c, w, stop, err := b.writingCluster(ctx, "graceful")
	if err != nil {
		return "", err
	}
	defer stop()

	var gaps, toExit []time.Duration
	moved := 0
	for round := range b.opts.rounds {
		leader := c.Leader()
		if leader < 0 {
			return "", fmt.Errorf("graceful round %d: no known leader", round+1)
		}
		w.mu.Lock()
		w.recording, w.acks = true, nil
		w.mu.Unlock()
		signalled := time.Now()
		if err := c.Terminate(leader); err != nil {
			return "", fmt.Errorf("graceful round %d: %w%s", round+1, err, logTails(c))
		}
		exited := time.Now()
		toExit = append(toExit, exited.Sub(signalled))
		if _, err := w.ackAfter(ctx, exited); err != nil {
			return "", fmt.Errorf("graceful round %d: after SIGTERM of %s: %w%s", round+1, c.ID(leader), err, logTails(c))
		}
		w.mu.Lock()
		w.recording = false
		acks := w.acks
		w.mu.Unlock()
		gap := longestGap(signalled, acks)
		gaps = append(gaps, gap)
		if strings.Contains(c.LogTail(leader, 40), "leadership transferred") {
			moved++
		}

		next, err := restartCaughtUp(ctx, c, leader)
		if err != nil {
			return "", fmt.Errorf("graceful round %d: %w", round+1, err)
		}
		progress("graceful round %d/%d: SIGTERM to leader %s, exited after %s, longest write gap %s, leader now %s",
			round+1, b.opts.rounds, c.ID(leader), formatDuration(toExit[round]), formatDuration(gap), c.ID(next))
	}
	return gracefulTable(b, gaps, toExit, moved, w), nil
}

// waitCaughtUp waits until every running server has applied what the leader
// had applied when the wait began (GET /v1/cluster answers from the asked
// server's own state, with its applied index in a header).
func waitCaughtUp(ctx context.Context, c *testcluster.Cluster, leader int) error {
	client := &http.Client{Timeout: 2 * time.Second}
	applied := func(i int) (uint64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Address(i)+"/v1/cluster", nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return strconv.ParseUint(resp.Header.Get(api.HeaderAppliedIndex), 10, 64)
	}
	target, err := applied(leader)
	if err != nil {
		return fmt.Errorf("applied index of the leader %s: %w", c.ID(leader), err)
	}
	for _, i := range c.Live() {
		for {
			index, err := applied(i)
			if err == nil && index >= target {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s to apply index %d: %w (last: %d, %v)", c.ID(i), target, ctx.Err(), index, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// longestGap is the longest time without an acknowledgement from start
// through the acknowledgements (in order) that follow it.
func longestGap(start time.Time, acks []time.Time) time.Duration {
	var gap time.Duration
	last := start
	for _, at := range acks {
		if at.Before(start) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return gap
}

func gracefulTable(b *bench, gaps, toExit []time.Duration, moved int, w *failoverWriter) string {
	gaps, toExit = slices.Clone(gaps), slices.Clone(toExit)
	slices.Sort(gaps)
	slices.Sort(toExit)
	p99 := percentile(gaps, 0.99)
	var s strings.Builder
	fmt.Fprintf(&s, "### graceful: SIGTERM the leader of 3 masterd servers, %d rounds%s\n\n", len(gaps), argsNote(b))
	fmt.Fprintf(&s, "One writer PUTs quotas round-robin over the running servers (%s timeout, immediate retry). ", failoverRequestTimeout)
	s.WriteString("The leader hands its leadership over, then shuts down. Measured: the longest time without an acknowledged write, ")
	s.WriteString("from the signal until a write sent after the old leader exited is acknowledged (so it includes one write's latency). ")
	s.WriteString("The stopped server is then restarted and the round ends when all 3 agree on a leader and have applied what the leader had, as a rolling restart waits for a server to catch up before it stops the next.\n\n")
	s.WriteString("| measure | p50 | p99 | max | goal | met |\n|---|---:|---:|---:|---|---|\n")
	fmt.Fprintf(&s, "| SIGTERM → longest write gap | %s | %s | %s | ≤ %s | %s |\n",
		formatDuration(percentile(gaps, 0.5)), formatDuration(p99), formatDuration(gaps[len(gaps)-1]), formatDuration(gracefulGoal), met(p99 <= gracefulGoal))
	fmt.Fprintf(&s, "| SIGTERM → the old leader has exited | %s | %s | %s | | |\n",
		formatDuration(percentile(toExit, 0.5)), formatDuration(percentile(toExit, 0.99)), formatDuration(toExit[len(toExit)-1]))
	w.mu.Lock()
	failures := formatErrors(w.failures)
	w.mu.Unlock()
	fmt.Fprintf(&s, "\nThe old leader logged a completed handover in %d of %d rounds. Writer: %d acknowledged writes; failed attempts, each retried at once: %s.\n",
		moved, len(gaps), w.ok.Load(), failures)
	return s.String()
}
