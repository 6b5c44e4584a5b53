//go:build linux

package cgroups

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// levelRecorder collects the reports of a WatchMemory.
type levelRecorder struct {
	ch chan MemoryLevel
}

func newLevelRecorder() *levelRecorder { return &levelRecorder{ch: make(chan MemoryLevel, 1000)} }

func (r *levelRecorder) notify(l MemoryLevel) { r.ch <- l }

// next waits for the next report; the bound only catches a watch that
// never reports.
func (r *levelRecorder) next(t *testing.T, what string) MemoryLevel {
	t.Helper()
	select {
	case l := <-r.ch:
		return l
	case <-time.After(2 * time.Minute):
		t.Fatalf("no report from the memory watch for 2 minutes, waiting for %s", what)
	}
	return MemoryLevel{}
}

// none fails when a report is waiting.
func (r *levelRecorder) none(t *testing.T, why string) {
	t.Helper()
	select {
	case l := <-r.ch:
		t.Fatalf("%s, got a report %+v", why, l)
	default:
	}
}

func TestV1WatchMemoryReportsCrossingsBothWays(t *testing.T) {
	m := requireV1(t)
	cg := createTestCgroup(t, m, testCgroupPath("watch"), Spec{MemoryLimitBytes: 256 << 20})
	const threshold = 48 << 20
	rec := newLevelRecorder()
	w, err := cg.WatchMemory(threshold, rec.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if l := rec.next(t, "the level at the start"); l.Above || l.UsageBytes >= threshold {
		t.Fatalf("first report %+v, want below %d", l, threshold)
	}

	// Below the threshold: no report (a few MiB of runtime plus 16).
	small := startHelper(t, cg, "hold", "16")
	small.waitReady(t)
	rec.none(t, "16 MiB is below the threshold")

	big := startHelper(t, cg, "hold", "64")
	big.waitReady(t)
	if l := rec.next(t, "usage above 48 MiB"); !l.Above || l.UsageBytes < threshold {
		t.Fatalf("report %+v, want above %d", l, threshold)
	}
	// The big one ends: usage falls back below, and the kernel says so.
	if err := big.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	big.wait()
	if l := rec.next(t, "usage back below 48 MiB"); l.Above || l.UsageBytes >= threshold {
		t.Fatalf("report %+v, want below %d", l, threshold)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Closed: the threshold is gone with the eventfd; crossing again
	// reports nothing.
	again := startHelper(t, cg, "hold", "64")
	again.waitReady(t)
	rec.none(t, "the watch is closed")
}

// The kernel keeps a v1 threshold in whole pages, rounding the bytes
// written down, and fires at usage ≥ that many pages. A threshold off a page
// boundary, as a fraction of a limit gives (0.9 × 1 GiB), thus fires at a
// usage the watch's own rule (usage ≥ threshold bytes) calls below: the
// reading after the event showed no crossing, and the kernel, counting
// itself above, never fired again as the usage went on growing. Here the
// disagreement is made certain: 1 byte in an empty cgroup is page 0, which
// its usage of 0 already reaches.
func TestV1WatchMemoryThresholdOffAPageBoundary(t *testing.T) {
	m := requireV1(t)
	cg := createTestCgroup(t, m, testCgroupPath("watch-unaligned"), Spec{MemoryLimitBytes: 256 << 20})
	if u, err := cg.Memory(); err != nil || u.UsageBytes != 0 {
		t.Fatalf("a new cgroup's usage %+v (%v), want 0", u, err)
	}
	rec := newLevelRecorder()
	w, err := cg.WatchMemory(1, rec.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if l := rec.next(t, "the level at the start"); l.Above {
		t.Fatalf("first report %+v, want below 1 byte", l)
	}
	startHelper(t, cg, "hold", "16").waitReady(t)
	if l := rec.next(t, "usage above 1 byte"); !l.Above {
		t.Fatalf("report %+v, want above 1 byte", l)
	}
}

func TestRoundUpToPage(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{1, 4096}, {4095, 4096}, {4096, 4096}, {4097, 8192},
		{966367641, 966369280}, // 0.9 × 1 GiB
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := roundUpToPage(tc.n, 4096); got != tc.want {
			t.Errorf("roundUpToPage(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestV1WatchMemoryEndsWhenTheCgroupGoes(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("watch-gone")
	cg, err := m.Create(path, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	rec := newLevelRecorder()
	w, err := cg.WatchMemory(1<<20, rec.notify)
	if err != nil {
		t.Fatal(err)
	}
	rec.next(t, "the level at the start")
	if err := cg.Delete(); err != nil {
		t.Fatal(err)
	}
	// The kernel signals the eventfd as it removes the threshold; the
	// watch reads the usage, finds the cgroup gone and ends.
	select {
	case <-w.(*memoryWatch).done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the watch did not end in 2 minutes after its cgroup was removed")
	}
	rec.none(t, "the cgroup is gone")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWatchMemoryBadInput(t *testing.T) {
	m := requireV1(t)
	cg := createTestCgroup(t, m, testCgroupPath("watch-bad"), Spec{})
	for _, threshold := range []int64{0, -1} {
		if w, err := cg.WatchMemory(threshold, func(MemoryLevel) {}); err == nil {
			w.Close()
			t.Errorf("threshold %d: no error", threshold)
		}
	}
	if w, err := cg.WatchMemory(1<<20, nil); err == nil {
		w.Close()
		t.Error("nil notify: no error")
	}
	gone, err := m.Load(testCgroupPath("watch-bad"))
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.(*v1Cgroup).remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.WatchMemory(1<<20, func(MemoryLevel) {}); err == nil || !strings.Contains(err.Error(), testCgroupPath("watch-bad")) {
		t.Errorf("watch of a removed cgroup: %v, want an error naming it", err)
	}
}

func TestV1MemoryCountsUsageAndInactiveCache(t *testing.T) {
	m := requireV1(t)
	cg := createTestCgroup(t, m, testCgroupPath("memory"), Spec{MemoryLimitBytes: 512 << 20})
	file := filepath.Join(t.TempDir(), "data")
	writeFileOfSize(t, file, 64<<20)
	p := startHelper(t, cg, "readfile", file, "32")
	p.waitReady(t)
	u, err := cg.Memory()
	if err != nil {
		t.Fatal(err)
	}
	// 32 MiB held plus 64 MiB of page cache read once, which the kernel
	// keeps on its inactive list.
	if u.UsageBytes < 96<<20 {
		t.Errorf("usage %d, want at least 96 MiB", u.UsageBytes)
	}
	if u.InactiveFileBytes < 32<<20 || u.WorkingSetBytes() > u.UsageBytes-32<<20 {
		t.Errorf("inactive file %d, working set %d of usage %d: want most of the 64 MiB read as inactive cache",
			u.InactiveFileBytes, u.WorkingSetBytes(), u.UsageBytes)
	}
	if ws := u.WorkingSetBytes(); ws < 32<<20 {
		t.Errorf("working set %d, want at least the 32 MiB held", ws)
	}
}

func TestMemoryUsageWorkingSet(t *testing.T) {
	for _, tc := range []struct{ usage, inactive, want uint64 }{
		{100, 30, 70},
		{100, 0, 100},
		{100, 100, 0},
		{100, 150, 0}, // read at different moments: never negative
	} {
		if got := (MemoryUsage{UsageBytes: tc.usage, InactiveFileBytes: tc.inactive}).WorkingSetBytes(); got != tc.want {
			t.Errorf("usage %d inactive %d: working set %d, want %d", tc.usage, tc.inactive, got, tc.want)
		}
	}
}

func readOOMScoreAdj(t *testing.T, pid int) (int, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		return 0, false // exited
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func TestV1SetOOMScoreAdjReachesEveryProcessAndTheirChildren(t *testing.T) {
	m := requireV1(t)
	parent := createTestCgroup(t, m, testCgroupPath("oom-adj"), Spec{})
	child := createTestCgroup(t, m, testCgroupPath("oom-adj")+"/nested", Spec{})
	outside := createTestCgroup(t, m, testCgroupPath("oom-adj-outside"), Spec{})
	// Shells that fork a short-lived child every few milliseconds: the
	// children forked after the write must hold the new value too.
	script := `while :; do sleep 0.01; done`
	for _, cg := range []Cgroup{parent, parent, child, outside} {
		startIn(t, cg, exec.Command("/bin/sh", "-c", script))
	}
	waitFor(t, "the shells and their children", func() (bool, error) {
		pids, err := parent.Pids()
		return len(pids) >= 3, err
	})
	outsidePids, err := outside.Pids()
	if err != nil {
		t.Fatal(err)
	}
	before := map[int]int{}
	for _, pid := range outsidePids {
		before[pid], _ = readOOMScoreAdj(t, pid)
	}

	if err := parent.SetOOMScoreAdj(1000); err != nil {
		t.Fatal(err)
	}
	// Every process of the cgroup and its nested one holds it, those
	// forked since included: check over several generations of children.
	seen := map[int]bool{}
	for len(seen) < 20 {
		pids, err := parent.Pids()
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if adj, ok := readOOMScoreAdj(t, pid); ok {
				if adj != 1000 {
					t.Fatalf("process %d of the cgroup has oom_score_adj %d, want 1000", pid, adj)
				}
				seen[pid] = true
			}
		}
		time.Sleep(time.Millisecond)
	}
	for _, pid := range outsidePids {
		if adj, ok := readOOMScoreAdj(t, pid); ok && adj != before[pid] {
			t.Errorf("process %d outside the cgroup: oom_score_adj %d, was %d", pid, adj, before[pid])
		}
	}
	// Back down: the kernel lets root lower it again.
	if err := parent.SetOOMScoreAdj(250); err != nil {
		t.Fatal(err)
	}
	pids, _ := parent.Pids()
	for _, pid := range pids {
		if adj, ok := readOOMScoreAdj(t, pid); ok && adj != 250 {
			t.Errorf("process %d: oom_score_adj %d after lowering, want 250", pid, adj)
		}
	}

	for _, bad := range []int{1001, -1001} {
		if err := parent.SetOOMScoreAdj(bad); err == nil {
			t.Errorf("SetOOMScoreAdj(%d): no error", bad)
		}
	}
	pids, _ = parent.Pids()
	for _, pid := range pids {
		if adj, ok := readOOMScoreAdj(t, pid); ok && adj != 250 {
			t.Errorf("process %d: oom_score_adj %d after a refused value, want 250 still", pid, adj)
		}
	}
}

// BenchmarkV1WatchMemoryLatency times a kernel threshold's report: a
// helper in the cgroup touches step MiB more (one byte on its stdin), which
// takes the usage across a threshold set at half the step above its idle
// usage; the time runs from the command to notify's call with the new
// side. Down is the same for giving the step back (munmap). Both include
// the helper's wake-up and, up, the page faults until the crossing (half
// the step: touch-p50-us is the helper's time for the whole step).
//
//	go test -run '^$' -bench V1WatchMemoryLatency -benchtime 200x ./agentd/internal/cgroups/
func BenchmarkV1WatchMemoryLatency(b *testing.B) {
	m := requireV1(b)
	for _, step := range []int{2, 8} {
		b.Run(fmt.Sprintf("step=%dMiB", step), func(b *testing.B) {
			benchmarkV1WatchMemoryLatency(b, m, step)
		})
	}
}

func benchmarkV1WatchMemoryLatency(b *testing.B, m *v1Manager, step int) {
	cg := createTestCgroup(b, m, testCgroupPath(fmt.Sprintf("bench-watch-%d", step)), Spec{MemoryLimitBytes: 256 << 20})
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=steps %d", helperEnv, step))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cg.Start(cmd); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out := bufio.NewReader(stdout)
	line := func() string {
		l, err := out.ReadString('\n')
		if err != nil {
			b.Fatalf("helper: %v", err)
		}
		return strings.TrimSpace(l)
	}
	if l := line(); l != "ready" {
		b.Fatalf("helper said %q", l)
	}
	idle, err := cg.Memory()
	if err != nil {
		b.Fatal(err)
	}
	threshold := int64(idle.UsageBytes) + int64(step)<<20/2
	levels := make(chan MemoryLevel, 16)
	w, err := cg.WatchMemory(threshold, func(l MemoryLevel) {
		levels <- l
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if l := <-levels; l.Above {
		b.Fatalf("idle usage reported above the threshold: %+v", l)
	}
	await := func(above bool) {
		select {
		case l := <-levels:
			if l.Above != above {
				b.Fatalf("report %+v, want above=%v", l, above)
			}
		case <-time.After(time.Minute):
			b.Fatalf("no report for a minute (above=%v)", above)
		}
	}
	var up, down, touch []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := stdin.Write([]byte{'+'}); err != nil {
			b.Fatal(err)
		}
		await(true)
		up = append(up, time.Since(start))
		ns, _ := strconv.ParseInt(line(), 10, 64)
		touch = append(touch, time.Duration(ns))

		start = time.Now()
		if _, err := stdin.Write([]byte{'-'}); err != nil {
			b.Fatal(err)
		}
		await(false)
		down = append(down, time.Since(start))
		line()
	}
	b.StopTimer()
	reportMicros(b, "up", up)
	reportMicros(b, "down", down)
	reportMicros(b, "touch", touch)
}

// reportMicros reports the 50th and 99th percentiles of took, in µs.
func reportMicros(b *testing.B, name string, took []time.Duration) {
	slices.Sort(took)
	at := func(q float64) float64 {
		return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), name+"-p50-us")
	b.ReportMetric(at(0.99), name+"-p99-us")
}

// BenchmarkV1WatchMemoryStart times WatchMemory up to its return and Close:
// the kernel waits for an RCU grace period in each threshold registration
// (__mem_cgroup_usage_register_event calls synchronize_rcu), which is why
// the containerizer registers off the launch path.
//
//	go test -run '^$' -bench V1WatchMemoryStart -benchtime 100x ./agentd/internal/cgroups/
func BenchmarkV1WatchMemoryStart(b *testing.B) {
	m := requireV1(b)
	cg := createTestCgroup(b, m, testCgroupPath("bench-watch-start"), Spec{})
	var start, stop []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		began := time.Now()
		w, err := cg.WatchMemory(1<<30, func(MemoryLevel) {})
		if err != nil {
			b.Fatal(err)
		}
		start = append(start, time.Since(began))
		began = time.Now()
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		stop = append(stop, time.Since(began))
	}
	reportMicros(b, "start", start)
	reportMicros(b, "close", stop)
}
