package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

// Full disks under real masterd processes: each server's data dir is its
// own small tmpfs, filled while the cluster takes writes.

// tmpfsSize is each server's data dir: room for raft.db and two snapshots
// of these tests' few objects, small enough to fill in a moment.
const tmpfsSize = 8 << 20

// needMount skips a test that mounts file systems, on a machine where this
// process may not (not root).
func needMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs per server (data dirs that fill up)")
	}
}

// diskAnswer is one write's outcome: status 0 when no answer came.
type diskAnswer struct {
	status int
	body   string
	err    error
}

// putRateLimit writes principal's qps through the server at addr, and
// tells what came back, whatever it was.
func putRateLimit(addr, principal string, qps int) diskAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, addr+"/v1/ratelimits/"+principal, strings.NewReader(fmt.Sprintf(`{"qps": %d}`, qps)))
	if err != nil {
		return diskAnswer{err: err}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return diskAnswer{err: err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return diskAnswer{status: resp.StatusCode, body: strings.TrimSpace(string(body))}
}

// TestFullDisk fills a follower's data dir, then the leader's, while the
// cluster takes writes. A full follower costs nothing; a full leader fails
// the write in hand with 503 naming raft.db, steps down and stands for no
// election while full, so the others elect a leader and writes resume.
// Once space returns, the server catches up and all three agree; restarted
// from its data dir, it reads its log back whole.
func TestFullDisk(t *testing.T) {
	needMount(t)
	c := testcluster.Start(t, 3, testcluster.WithTmpfsDataDirs(tmpfsSize))
	leader := waitLeader(t, c)
	qps := 0
	write := func(via int) diskAnswer {
		qps++
		a := putRateLimit(c.Address(via), fmt.Sprintf("p%d", qps%7), qps)
		if a.status != http.StatusOK && a.status != http.StatusServiceUnavailable {
			t.Fatalf("write through %s: want 200 or 503, got %d %s (%v)", c.ID(via), a.status, a.body, a.err)
		}
		return a
	}
	for range 20 {
		if a := write(leader); a.status != http.StatusOK {
			t.Fatalf("write before any fault: %d %s", a.status, a.body)
		}
	}

	follower := c.Followers()[0]
	if _, err := c.FillDataDir(follower); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		if a := write(leader); a.status != http.StatusOK {
			t.Fatalf("write while follower %s's disk is full: %d %s", c.ID(follower), a.status, a.body)
		}
	}
	if !c.Alive(follower) {
		t.Fatalf("%s exited with a full disk:\n%s", c.ID(follower), c.LogTail(follower, 30))
	}
	if err := c.FreeDataDir(follower); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, c)

	leader = waitLeader(t, c)
	if _, err := c.FillDataDir(leader); err != nil {
		t.Fatal(err)
	}
	// raft.db reuses its free pages first: writes land until it must grow.
	var refused diskAnswer
	eventually(t, "a write refused by the full leader", func() error {
		if refused = write(leader); refused.status == http.StatusServiceUnavailable {
			return nil
		}
		return fmt.Errorf("still acknowledged")
	})
	refusedAt := time.Now()
	if !strings.Contains(refused.body, "raft.db") || !strings.Contains(refused.body, "no space left on device") {
		t.Errorf("the refusal does not say that raft.db's disk is full: %s", refused.body)
	}
	var resumedAt time.Time
	eventually(t, "writes through the other servers resume", func() error {
		acked := 0
		for _, i := range []int{(leader + 1) % 3, (leader + 2) % 3} {
			if write(i).status == http.StatusOK {
				acked++
			}
		}
		if acked < 2 {
			return fmt.Errorf("%d of 2 acknowledged", acked)
		}
		resumedAt = time.Now()
		return nil
	})
	t.Logf("no write acknowledged for %v after the leader's disk filled (measured, not asserted)", resumedAt.Sub(refusedAt).Round(time.Millisecond))
	if now := waitLeader(t, c); now == leader {
		t.Fatalf("%s leads with a full disk", c.ID(leader))
	}
	if !c.Alive(leader) {
		t.Fatalf("%s exited with a full disk:\n%s", c.ID(leader), c.LogTail(leader, 30))
	}
	// Before the guard, the full server won the next elections itself
	// (its peers' pre-votes stick to the leader they know) and failed
	// each first append: no write landed while its disk stayed full.
	logText := c.LogTail(leader, 100000)
	full := strings.Index(logText, "the data dir is full")
	if full < 0 {
		t.Fatalf("%s did not log that its data dir is full:\n%s", c.ID(leader), c.LogTail(leader, 30))
	}
	if strings.Contains(logText[full:], "entering leader state") {
		t.Errorf("%s won an election with a full disk:\n%s", c.ID(leader), logText[full:])
	}
	if strings.Contains(logText, "panic") {
		t.Errorf("%s panicked:\n%s", c.ID(leader), logText)
	}

	if err := c.FreeDataDir(leader); err != nil {
		t.Fatal(err)
	}
	write(c.Followers()[0])
	waitConverged(t, c)
	// What it wrote before and after the full disk reads back from its
	// data dir: the log was not corrupted.
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, c)
}

// waitConverged waits until every server's own state (a stale read of
// every list) is the leader's, which a linearizable read gives.
func waitConverged(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	eventually(t, "servers converge", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		leader, err := c.WaitLeader(ctx)
		cancel()
		if err != nil {
			return err
		}
		want, err := readLists(t, c.Address(leader), "", false)
		if err != nil {
			return err
		}
		for i := range c.N() {
			got, err := readLists(t, c.Address(i), "", true)
			if err != nil {
				return err
			}
			if diff := sameLists(got, want); diff != "" {
				return fmt.Errorf("%s differs from the leader: %s", c.ID(i), diff)
			}
		}
		return nil
	})
}

// TestCorruptedDataDirAtRestart damages one file of a follower's data dir
// while it is stopped. Started again, the server exits with an error that
// names the file, never a fault trace alone and never serving; the two
// others keep taking writes; the operator's way out (remove the data dir,
// start the server again with its -join) brings it back in step.
func TestCorruptedDataDirAtRestart(t *testing.T) {
	newestSnapshot := func(t *testing.T, dataDir string) string {
		metas, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "state.bin"))
		if len(metas) == 0 {
			t.Fatalf("no snapshot in %s", dataDir)
		}
		sort.Strings(metas) // names start with the term and index
		return metas[len(metas)-1]
	}
	cases := map[string]struct {
		file    func(t *testing.T, dataDir string) string
		corrupt func(t *testing.T, path string)
	}{
		"truncated raft.db": {
			file: func(_ *testing.T, dataDir string) string { return filepath.Join(dataDir, "raft.db") },
			// A torn file: its meta pages, and nothing of its tree.
			corrupt: func(t *testing.T, path string) { truncateFile(t, path, 3*4096) },
		},
		"altered raft.db": {
			file: func(_ *testing.T, dataDir string) string { return filepath.Join(dataDir, "raft.db") },
			// Garbage over every page but the two meta pages.
			corrupt: func(t *testing.T, path string) { garbleFile(t, path, 2*4096) },
		},
		"truncated snapshot": {
			file:    newestSnapshot,
			corrupt: func(t *testing.T, path string) { truncateFile(t, path, fileSize(t, path)/2) },
		},
		"altered snapshot": {
			file: newestSnapshot,
			corrupt: func(t *testing.T, path string) {
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				b := make([]byte, 1)
				at := fileSize(t, path) / 2
				if _, err := f.ReadAt(b, at); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte{b[0] ^ 0x5a}, at); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Snapshots every few entries, so that every server has some.
			c := testcluster.Start(t, 3, testcluster.WithArgs("-raft-snapshot-threshold", "8", "-raft-snapshot-interval", "100ms"))
			leader := waitLeader(t, c)
			for k := range 30 {
				if a := putRateLimit(c.Address(leader), fmt.Sprintf("p%d", k%7), k+1); a.status != http.StatusOK {
					t.Fatalf("write %d: %d %s %v", k, a.status, a.body, a.err)
				}
			}
			waitConverged(t, c)
			// Server 0 bootstraps; the others start with -join, the
			// command line the way out relies on.
			victim := 1
			if victim == leader {
				victim = 2
			}
			dataDir := c.DataDir(victim)
			eventually(t, "a snapshot on "+c.ID(victim), func() error {
				if metas, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "state.bin")); len(metas) == 0 {
					return fmt.Errorf("none in %s", dataDir)
				}
				return nil
			})
			if err := c.Terminate(victim); err != nil {
				t.Fatal(err)
			}
			path := tc.file(t, dataDir)
			tc.corrupt(t, path)
			if err := c.Restart(victim); err != nil {
				t.Fatal(err)
			}
			eventually(t, c.ID(victim)+" exits", func() error {
				if c.Alive(victim) {
					return fmt.Errorf("still running")
				}
				return nil
			})
			logText := c.LogTail(victim, 40)
			lastStart := strings.LastIndex(logText, "=== testcluster")
			since := logText[max(lastStart, 0):]
			if !strings.Contains(since, path) || !strings.Contains(since, "corrupted") {
				t.Errorf("%s's error does not name %s as corrupted:\n%s", c.ID(victim), path, since)
			}
			for _, trace := range []string{"goroutine ", "panic:", "fatal error:", "SIGBUS"} {
				if strings.Contains(since, trace) {
					t.Errorf("%s left a crash trace (%q):\n%s", c.ID(victim), trace, since)
				}
			}
			t.Logf("%s refused to start: %s", c.ID(victim), strings.TrimSpace(since[strings.LastIndex(strings.TrimSpace(since), "\n")+1:]))
			if strings.Contains(since, "serving:") {
				t.Errorf("%s served from a corrupted data dir:\n%s", c.ID(victim), since)
			}

			for k := range 10 {
				if a := putRateLimit(c.Address(leader), fmt.Sprintf("p%d", k%7), 100+k); a.status != http.StatusOK {
					t.Fatalf("write with %s down: %d %s %v", c.ID(victim), a.status, a.body, a.err)
				}
			}

			// The way out: an empty data dir, the same command line.
			if err := os.RemoveAll(dataDir); err != nil {
				t.Fatal(err)
			}
			if err := c.Restart(victim); err != nil {
				t.Fatal(err)
			}
			waitConverged(t, c)
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if size >= fileSize(t, path) {
		t.Fatalf("%s is only %d bytes: nothing to truncate at %d", path, fileSize(t, path), size)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// garbleFile overwrites path from offset from to its end with bytes that
// are no page bbolt wrote (a fixed pattern: the test repeats).
func garbleFile(t *testing.T, path string, from int64) {
	t.Helper()
	size := fileSize(t, path)
	if from >= size {
		t.Fatalf("%s is only %d bytes", path, size)
	}
	junk := make([]byte, size-from)
	for i := range junk {
		junk[i] = byte(i*131 + 7)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(junk, from); err != nil {
		t.Fatal(err)
	}
}
