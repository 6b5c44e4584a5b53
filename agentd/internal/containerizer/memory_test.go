package containerizer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/allot/allot/agentd/internal/cgroups"
)

// burstTask is a task asking for 32 MiB and limited to 256: a shell that
// leaves a sleep behind and becomes the "signalled" test task, so that its
// cgroup holds two processes from the start.
func burstTask(t testing.TB, id string, request int64, base, step int) LaunchSpec {
	spec := LaunchSpec{
		ContainerID:        id,
		Resources:          cgroups.Spec{CPUShares: 256, MemorySoftBytes: request, MemoryLimitBytes: 256 * mib},
		MemoryRequestBytes: request,
		Argv: []string{"/bin/sh", "-c", `/bin/sleep 1000 & exec "$0" ` + taskArg + ` signalled "$1" "$2"`,
			testBinary(t), fmt.Sprint(base), fmt.Sprint(step)},
		Env: []string{"GOMAXPROCS=2"},
	}
	return spec
}

func waitReady(t testing.TB, c Container) {
	t.Helper()
	waitFor(t, "the task to be ready", func() bool {
		_, err := os.Stat(filepath.Join(c.Sandbox, "ready"))
		return err == nil
	})
}

// oomScoreAdjOf is the container's oom_score_adj as Containers shows it.
func (h *harness) oomScoreAdjOf(id string) int {
	for _, c := range h.ctz.Containers() {
		if c.ID == id {
			return c.OOMScoreAdj
		}
	}
	h.t.Fatalf("container %s is not listed", id)
	return 0
}

// allHold reports whether every process of the container has adj.
func (h *harness) allHold(id string, adj int) bool {
	pids, err := h.ctz.Pids(id)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
		if err != nil {
			continue // exited
		}
		if got := string(b); got != fmt.Sprintf("%d\n", adj) {
			return false
		}
	}
	return len(pids) > 0
}

// waitOOMScoreAdj waits until the container shows adj and every one of
// its processes holds it.
func (h *harness) waitOOMScoreAdj(id string, adj int, why string) {
	h.t.Helper()
	waitFor(h.t, fmt.Sprintf("oom_score_adj %d (%s)", adj, why), func() bool {
		return h.oomScoreAdjOf(id) == adj && h.allHold(id, adj)
	})
}

func TestOOMScoreAdjFollowsMemoryAboveTheRequest(t *testing.T) {
	h := newHarness(t) // 1 GiB node: the formula gives 1000 − 1000 × 32/1024 = 969
	c := h.launch(burstTask(t, "burst-1", 32*mib, 0, 64))
	waitReady(t, c)
	if c.OOMScoreAdj != 969 {
		t.Fatalf("launched with oom_score_adj %d, want the formula's 969", c.OOMScoreAdj)
	}
	h.waitOOMScoreAdj("burst-1", 969, "below the request at the start")
	if pids, _ := h.ctz.Pids("burst-1"); len(pids) != 2 {
		t.Fatalf("processes %v, want the task and its sleep", pids)
	}

	// 64 MiB more: above the 32 MiB request. Both processes, the sleep
	// that touched nothing included, go to 1000.
	if err := unix.Kill(c.Pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	h.waitOOMScoreAdj("burst-1", 1000, "above the request")
	// A process forked now inherits it from its parent.
	if err := unix.Kill(c.Pid, unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new child", func() bool {
		pids, _ := h.ctz.Pids("burst-1")
		return len(pids) == 3
	})
	if !h.allHold("burst-1", 1000) {
		t.Fatal("a process forked above the request does not hold 1000")
	}

	// Back under the request: the formula again, for all three.
	if err := unix.Kill(c.Pid, unix.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	h.waitOOMScoreAdj("burst-1", 969, "back below the request")

	// And up again: the watch goes on after a round trip.
	if err := unix.Kill(c.Pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	h.waitOOMScoreAdj("burst-1", 1000, "above the request again")

	if err := h.ctz.Kill("burst-1", 0); err != nil {
		t.Fatal(err)
	}
	h.waitExit("burst-1")
}

func TestOOMScoreAdjWatchIsTakenOverAtRecovery(t *testing.T) {
	h := newHarness(t)
	c := h.launch(burstTask(t, "burst-r", 32*mib, 0, 64))
	waitReady(t, c)
	if err := unix.Kill(c.Pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	h.waitOOMScoreAdj("burst-r", 1000, "above the request")

	// A new agentd reads the formula's value in the record; the watch it
	// starts reports the task above its request and shows 1000 again.
	h.restart()
	if err := h.ctz.Recover([]string{"burst-r"}, nil); err != nil {
		t.Fatal(err)
	}
	h.waitOOMScoreAdj("burst-r", 1000, "above the request after recovery")
	if err := unix.Kill(c.Pid, unix.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	h.waitOOMScoreAdj("burst-r", 969, "below the request, seen by the recovered watch")
	if err := h.ctz.Kill("burst-r", 0); err != nil {
		t.Fatal(err)
	}
	h.waitExit("burst-r")
}

func TestNoMemoryWatchWithoutRoomToBurst(t *testing.T) {
	h := newHarness(t)
	if err := h.ctz.CreateGroup("grp", cgroups.Spec{MemoryLimitBytes: 128 * mib}); err != nil {
		t.Fatal(err)
	}
	shared := shell("shared", "sleep 1000")
	shared.Group = "grp"
	for _, spec := range []LaunchSpec{
		// At its limit a task is at its request, never above it.
		task("at-limit", cgroups.Spec{MemorySoftBytes: 32 * mib, MemoryLimitBytes: 32 * mib}, 32*mib, "hold", "1"),
		// No request: the formula gives 1000 already.
		task("no-request", cgroups.Spec{MemoryLimitBytes: 64 * mib}, 0, "hold", "1"),
		// In its group's cgroup, the usage is the group's.
		shared,
	} {
		h.launch(spec)
		h.ctz.mu.Lock()
		watching := h.ctz.containers[spec.ContainerID].memWatching
		h.ctz.mu.Unlock()
		if watching {
			t.Errorf("%s: a memory watch, want none", spec.ContainerID)
		}
	}
	burst := h.launch(burstTask(t, "burst-w", 32*mib, 0, 64))
	waitFor(t, "the burstable task's memory watch", func() bool {
		h.ctz.mu.Lock()
		defer h.ctz.mu.Unlock()
		return h.ctz.containers[burst.ID].memWatch != nil
	})
	for _, id := range []string{"at-limit", "no-request", "shared", "burst-w"} {
		if err := h.ctz.Kill(id, 0); err != nil {
			t.Fatal(err)
		}
		h.waitExit(id)
	}
	if err := h.ctz.DestroyGroup("grp"); err != nil {
		t.Fatal(err)
	}
}

// rootHighRecorder collects OnRootMemoryHigh calls.
type rootHighRecorder struct{ calls chan [2]int64 }

func (r *rootHighRecorder) onHigh(used, limit int64) { r.calls <- [2]int64{used, limit} }

func (r *rootHighRecorder) next(t testing.TB, what string) (used, limit int64) {
	t.Helper()
	select {
	case c := <-r.calls:
		return c[0], c[1]
	case <-time.After(2 * time.Minute):
		t.Fatalf("no OnRootMemoryHigh for 2 minutes, waiting for %s", what)
	}
	return 0, 0
}

func withRootMemoryHigh(r *rootHighRecorder, fraction float64) harnessOption {
	return func(c *Config) {
		c.OnRootMemoryHigh = r.onHigh
		c.RootMemoryHighFraction = fraction
	}
}

// waitRootChecks waits until the root watch has read the working set n
// more times than it had when called.
func (h *harness) waitRootChecks(n int64) {
	h.t.Helper()
	start := h.ctz.rootMemory.checks.Load()
	waitFor(h.t, fmt.Sprintf("%d readings of the root cgroup's working set", n), func() bool {
		return h.ctz.rootMemory.checks.Load() >= start+n
	})
}

func TestRootMemoryHighOnWorkingSetNotPageCache(t *testing.T) {
	// The root holds 256 MiB; at half of it the agent wants to know.
	rec := &rootHighRecorder{calls: make(chan [2]int64, 100)}
	h := newHarness(t, withRoot(cgroups.Spec{CPUShares: 2048, MemoryLimitBytes: 256 * mib}), withNodeMemory(256*mib),
		withRootMemoryHigh(rec, 0.5))
	const threshold = 128 * mib
	burstable := cgroups.Spec{CPUShares: 256, MemorySoftBytes: 16 * mib, MemoryLimitBytes: cgroups.Unlimited}

	// 160 MiB of page cache: usage passes the threshold, the working set
	// does not, and the agent is not told.
	data := filepath.Join(t.TempDir(), "data")
	writeFile(t, data, 160*mib)
	reader := h.launch(task("reader", burstable, 16*mib, "readfile", data, "8"))
	waitReady(t, reader)
	u, err := h.rootCg.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if u.UsageBytes < threshold {
		t.Fatalf("root usage %d after reading 160 MiB, want it above the %d threshold for this test", u.UsageBytes, threshold)
	}
	// The premise: the cache sits on the inactive list, outside the working
	// set. Under memory pressure from other work the kernel may have moved
	// it to the active list (CI saw inactive_file at 2 MiB of 186 MiB):
	// then the working set is truly above the threshold and there is
	// nothing here to tell apart.
	if ws := u.UsageBytes - u.InactiveFileBytes; ws >= threshold {
		// The reader is still running: end it first, or the harness
		// waits for it and the next test finds its monitor.
		if err := h.ctz.Kill("reader", 0); err != nil {
			t.Fatal(err)
		}
		h.waitExit("reader")
		t.Skipf("the kernel keeps the reader's page cache on the active list (usage %d, inactive_file %d): the premise does not hold on this run", u.UsageBytes, u.InactiveFileBytes)
	}
	h.waitRootChecks(2) // the watch saw the usage above and read the working set
	select {
	case c := <-rec.calls:
		t.Fatalf("OnRootMemoryHigh(%d, %d) for page cache (root %+v)", c[0], c[1], u)
	default:
	}
	if used, limit, err := h.ctz.RootMemory(); err != nil || used >= threshold || limit != 256*mib {
		t.Fatalf("RootMemory() = %d, %d, %v: want a working set below %d and the 256 MiB limit", used, limit, err, threshold)
	}

	// Anonymous memory past the threshold: told, with the working set
	// and the limit. The usage was above all along (cache), so only the
	// working set's reading can tell.
	hog := h.launch(burstTask(t, "hog", 16*mib, 0, 140))
	waitReady(t, hog)
	if err := unix.Kill(hog.Pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	used, limit := rec.next(t, "the hog's 140 MiB")
	if used < threshold || used > 256*mib || limit != 256*mib {
		t.Errorf("OnRootMemoryHigh(%d, %d): want a working set ≥ %d within the 256 MiB limit", used, limit, threshold)
	}
	// Not again while it stays high.
	h.waitRootChecks(2)
	select {
	case c := <-rec.calls:
		t.Fatalf("OnRootMemoryHigh(%d, %d) again while the working set stayed high", c[0], c[1])
	default:
	}

	// Down, then up again: a new onset, a new call.
	if err := unix.Kill(hog.Pid, unix.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the root watch to see the working set low", func() bool { return !h.ctz.rootMemory.high.Load() })
	if err := unix.Kill(hog.Pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if used, _ := rec.next(t, "the hog's second 140 MiB"); used < threshold {
		t.Errorf("second OnRootMemoryHigh with %d, want ≥ %d", used, threshold)
	}
	for _, id := range []string{"reader", "hog"} {
		if err := h.ctz.Kill(id, 0); err != nil {
			t.Fatal(err)
		}
		if st := h.waitExit(id); st.OOMKilled {
			t.Errorf("%s: %+v, want no OOM kill", id, st)
		}
	}
}

func TestRootMemoryWithoutALimit(t *testing.T) {
	rec := &rootHighRecorder{calls: make(chan [2]int64, 1)}
	h := newHarness(t, withRoot(cgroups.Spec{CPUShares: 2048}), withRootMemoryHigh(rec, 0))
	if h.ctz.rootMemory != nil {
		t.Error("a root watch without a limit to watch")
	}
	if h.ctz.cfg.RootMemoryHighFraction != DefaultRootMemoryHighFraction {
		t.Errorf("fraction %v, want the default %v", h.ctz.cfg.RootMemoryHighFraction, DefaultRootMemoryHighFraction)
	}
	c := h.launch(task("holder", cgroups.Spec{MemoryLimitBytes: 64 * mib}, 16*mib, "hold", "24"))
	waitReady(t, c)
	used, limit, err := h.ctz.RootMemory()
	if err != nil || used < 24*mib || limit != 0 {
		t.Errorf("RootMemory() = %d, %d, %v: want at least the 24 MiB held, and limit 0 (none)", used, limit, err)
	}
	if err := h.ctz.Kill("holder", 0); err != nil {
		t.Fatal(err)
	}
	h.waitExit("holder")
}

func writeFile(t testing.TB, path string, size int) {
	t.Helper()
	chunk := make([]byte, mib)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for range size / mib {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// The first part of the "memory pressure onset → first eviction"
// path, measured end to end on real cgroups: a task touches step MiB more
// (SIGUSR1), which takes the usage across the threshold, and the clock
// runs until the containerizer has acted on it. Each includes the signal's
// delivery and the page faults until the crossing (half the step).
//
//	go test -run '^$' -bench 'RootMemoryHighLatency|OOMScoreAdjLatency' -benchtime 100x ./agentd/internal/containerizer/

// BenchmarkRootMemoryHighLatency: from the task's signal to the agent's
// OnRootMemoryHigh call, the threshold set at half a step above the root's
// idle working set.
func BenchmarkRootMemoryHighLatency(b *testing.B) {
	const step = 4
	rec := &rootHighRecorder{calls: make(chan [2]int64, 16)}
	h := newHarness(b, withRoot(cgroups.Spec{CPUShares: 2048, MemoryLimitBytes: 256 * mib}), withNodeMemory(256*mib))
	spiker := h.launch(burstTask(b, "spiker", 16*mib, 0, step))
	waitReady(b, spiker)
	idle, _, err := h.ctz.RootMemory()
	if err != nil {
		b.Fatal(err)
	}
	// A new containerizer with the threshold there takes the task over.
	h.cfg.OnRootMemoryHigh = rec.onHigh
	h.cfg.RootMemoryHighFraction = float64(idle+step*mib/2) / float64(256*mib)
	h.restart()
	if err := h.ctz.Recover([]string{"spiker"}, nil); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := unix.Kill(spiker.Pid, unix.SIGUSR1); err != nil {
			b.Fatal(err)
		}
		rec.next(b, "the crossing")
		took = append(took, time.Since(start))
		if err := unix.Kill(spiker.Pid, unix.SIGUSR2); err != nil {
			b.Fatal(err)
		}
		waitFor(b, "the root watch to see the working set low", func() bool { return !h.ctz.rootMemory.high.Load() })
	}
	b.StopTimer()
	reportMicros(b, "notify", took)
	if err := h.ctz.Kill("spiker", 0); err != nil {
		b.Fatal(err)
	}
	h.waitExit("spiker")
}

// BenchmarkOOMScoreAdjLatency: from the task's signal to the moment every
// process of the task holds oom_score_adj 1000 (up), and back to the
// formula's value after it gives the step back (down), the request set at
// half a step above the task's idle usage.
func BenchmarkOOMScoreAdjLatency(b *testing.B) {
	const step = 4
	h := newHarness(b)
	// A first task of the same program tells its idle usage.
	probe := h.launch(burstTask(b, "probe", 512*mib, 0, step))
	waitReady(b, probe)
	stats, err := h.ctz.Stats("probe")
	if err != nil {
		b.Fatal(err)
	}
	if err := h.ctz.Kill("probe", 0); err != nil {
		b.Fatal(err)
	}
	h.waitExit("probe")
	request := int64(stats.MemoryUsageBytes) + step*mib/2

	set := make(chan int, 16)
	h.ctz.mu.Lock()
	h.ctz.oomScoreAdjSet = func(_ string, adj int) { set <- adj }
	h.ctz.mu.Unlock()
	formula := oomScoreAdj(request, h.cfg.NodeMemoryBytes)
	await := func(want int) {
		b.Helper()
		select {
		case got := <-set:
			if got != want {
				b.Fatalf("oom_score_adj %d, want %d", got, want)
			}
		case <-time.After(time.Minute):
			b.Fatalf("no oom_score_adj %d for a minute", want)
		}
	}
	c := h.launch(burstTask(b, "burst", request, 0, step))
	waitReady(b, c)
	await(formula) // the level at the start
	var up, down []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := unix.Kill(c.Pid, unix.SIGUSR1); err != nil {
			b.Fatal(err)
		}
		await(1000)
		up = append(up, time.Since(start))
		start = time.Now()
		if err := unix.Kill(c.Pid, unix.SIGUSR2); err != nil {
			b.Fatal(err)
		}
		await(formula)
		down = append(down, time.Since(start))
	}
	b.StopTimer()
	reportMicros(b, "up", up)
	reportMicros(b, "down", down)
	if err := h.ctz.Kill("burst", 0); err != nil {
		b.Fatal(err)
	}
	h.waitExit("burst")
}

func reportMicros(b *testing.B, name string, took []time.Duration) {
	slices.Sort(took)
	at := func(q float64) float64 {
		return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), name+"-p50-us")
	b.ReportMetric(at(0.99), name+"-p99-us")
}
