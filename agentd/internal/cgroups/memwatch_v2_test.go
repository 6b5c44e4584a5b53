//go:build linux

package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// setKernelValue changes a file of the fake hierarchy as the kernel does,
// in place and in one write (a watch holds memory.current open, and a
// truncate-then-write would show it an empty file in between). The value
// is padded to a fixed width, which the parsers read like the kernel's.
func setKernelValue(t *testing.T, k *fakeV2Kernel, path, file string, value string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(k.root, path, file), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(value), 0); err != nil {
		t.Fatal(err)
	}
}

func fakeUsage(t *testing.T, k *fakeV2Kernel, path string, bytes uint64) {
	t.Helper()
	setKernelValue(t, k, path, "memory.current", fmt.Sprintf("%020d\n", bytes))
}

func TestV2WatchMemoryWakesOnMemoryEvents(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory")
	// No poll within the test's life: only the kernel's memory.events
	// notification can wake the watch.
	m.memoryPoll = time.Hour
	cg, err := m.Create("/t", Spec{MemoryLimitBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	fakeUsage(t, k, "t", 1<<20)
	rec := newLevelRecorder()
	w, err := cg.WatchMemory(64<<20, rec.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if l := rec.next(t, "the level at the start"); l != (MemoryLevel{UsageBytes: 1 << 20}) {
		t.Fatalf("first report %+v, want below at 1 MiB", l)
	}
	// The usage grows past memory.high, which the kernel counts in
	// memory.events (a "file modified" event): the watch reads the usage.
	fakeUsage(t, k, "t", 100<<20)
	setKernelValue(t, k, "t", "memory.events", "low 0\nhigh 1\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	if l := rec.next(t, "the memory.events notification"); l != (MemoryLevel{Above: true, UsageBytes: 100 << 20}) {
		t.Fatalf("report %+v, want above at 100 MiB", l)
	}
	// An event that leaves the usage on the same side reports nothing;
	// the next change of side does.
	fakeUsage(t, k, "t", 101<<20)
	setKernelValue(t, k, "t", "memory.events", "low 0\nhigh 2\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	fakeUsage(t, k, "t", 2<<20)
	setKernelValue(t, k, "t", "memory.events", "low 0\nhigh 3\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	if l := rec.next(t, "the usage back below"); l != (MemoryLevel{UsageBytes: 2 << 20}) {
		t.Fatalf("report %+v, want below at 2 MiB (no report for 101 MiB, still above)", l)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fakeUsage(t, k, "t", 200<<20)
	setKernelValue(t, k, "t", "memory.events", "low 0\nhigh 4\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	rec.none(t, "the watch is closed")
}

func TestV2WatchMemoryPollsBetweenEvents(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory")
	m.memoryPoll = time.Millisecond
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	fakeUsage(t, k, "t", 0)
	rec := newLevelRecorder()
	w, err := cg.WatchMemory(64<<20, rec.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec.next(t, "the level at the start")
	// No memory event: a crossing below memory.high and memory.max is
	// only seen by the poll.
	fakeUsage(t, k, "t", 64<<20)
	if l := rec.next(t, "the poll to see 64 MiB"); !l.Above || l.UsageBytes != 64<<20 {
		t.Fatalf("report %+v, want above (at the threshold counts as above)", l)
	}
	fakeUsage(t, k, "t", 64<<20-4096)
	if l := rec.next(t, "the poll to see the usage below"); l.Above {
		t.Fatalf("report %+v, want below", l)
	}
	// A reading that makes no sense is skipped, not reported, and does
	// not end the watch.
	setKernelValue(t, k, "t", "memory.current", "garbage-not-a-number\n")
	setKernelValue(t, k, "t", "memory.current", fmt.Sprintf("%020d\n", 80<<20))
	if l := rec.next(t, "the usage above again"); !l.Above {
		t.Fatalf("report %+v, want above", l)
	}
}

func TestV2WatchMemoryNeedsTheMemoryController(t *testing.T) {
	_, m := newFakeV2(t, "cpu memory")
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(m.mountpoint, "t", "memory.events")); err != nil {
		t.Fatal(err)
	}
	if w, err := cg.WatchMemory(1<<20, func(MemoryLevel) {}); err == nil {
		w.Close()
		t.Fatal("a cgroup without memory.events: no error")
	}
}

func TestV2Memory(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory")
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	k.put(filepath.Join(k.root, "t"), "memory.current", "104857600\n")
	k.put(filepath.Join(k.root, "t"), "memory.stat", "anon 62914560\nfile 41943040\nactive_file 10485760\ninactive_file 31457280\n")
	u, err := cg.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if u != (MemoryUsage{UsageBytes: 100 << 20, InactiveFileBytes: 30 << 20}) || u.WorkingSetBytes() != 70<<20 {
		t.Errorf("Memory() = %+v (working set %d), want 100 MiB with 30 MiB inactive cache", u, u.WorkingSetBytes())
	}
}

// BenchmarkV2WatchMemoryEventLatency times the v2 watch's event path on
// the fake hierarchy: from a write to memory.events (the kernel's "file
// modified" notification; here inotify on a plain file) to notify's call.
// The poll is set to an hour, so only the event can wake the watch. What
// a real kernel adds is its own cgroup_file_notify, in the charging task.
//
//	go test -run '^$' -bench V2WatchMemoryEventLatency -benchtime 1000x ./agentd/internal/cgroups/
func BenchmarkV2WatchMemoryEventLatency(b *testing.B) {
	k, m := newFakeV2(b, "cpu memory")
	m.memoryPoll = time.Hour
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		b.Fatal(err)
	}
	const threshold = 64 << 20
	events, err := os.OpenFile(filepath.Join(k.root, "t", "memory.events"), os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer events.Close()
	current, err := os.OpenFile(filepath.Join(k.root, "t", "memory.current"), os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer current.Close()
	setUsage := func(v uint64) {
		if _, err := current.WriteAt([]byte(fmt.Sprintf("%020d\n", v)), 0); err != nil {
			b.Fatal(err)
		}
	}
	setUsage(0)
	levels := make(chan MemoryLevel, 16)
	w, err := cg.WatchMemory(threshold, func(l MemoryLevel) { levels <- l })
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	<-levels
	var took []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		above := i%2 == 0
		if above {
			setUsage(threshold)
		} else {
			setUsage(0)
		}
		start := time.Now()
		if _, err := events.WriteAt([]byte(fmt.Sprintf("high %010d\n", i)), 0); err != nil {
			b.Fatal(err)
		}
		if l := <-levels; l.Above != above {
			b.Fatalf("report %+v, want above=%v", l, above)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	reportMicros(b, "event", took)
}

func TestV2WatchMemorySharesOneInotifyInstance(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory")
	m.memoryPoll = time.Hour // only events wake the watches
	// More watches than the kernel's default 128 inotify instances per
	// user: one instance serves them all.
	const n = 200
	type watched struct {
		rec *levelRecorder
		w   MemoryWatch
	}
	var all []watched
	for i := range n {
		path := fmt.Sprintf("/t%d", i)
		cg, err := m.Create(path, Spec{})
		if err != nil {
			t.Fatal(err)
		}
		fakeUsage(t, k, path[1:], 0)
		rec := newLevelRecorder()
		w, err := cg.WatchMemory(1<<20, rec.notify)
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		rec.next(t, "the level at the start")
		all = append(all, watched{rec, w})
	}
	// Two watches of one cgroup share the kernel's watch descriptor: both
	// are woken, and closing one leaves the other working.
	cg0, err := m.Load("/t0")
	if err != nil {
		t.Fatal(err)
	}
	twin := newLevelRecorder()
	tw, err := cg0.WatchMemory(1<<20, twin.notify)
	if err != nil {
		t.Fatal(err)
	}
	twin.next(t, "the twin's level at the start")
	fakeUsage(t, k, "t0", 2<<20)
	setKernelValue(t, k, "t0", "memory.events", "low 0\nhigh 1\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	if l := all[0].rec.next(t, "t0 above"); !l.Above {
		t.Fatalf("t0: %+v, want above", l)
	}
	if l := twin.next(t, "the twin above"); !l.Above {
		t.Fatalf("twin: %+v, want above", l)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	fakeUsage(t, k, "t0", 0)
	setKernelValue(t, k, "t0", "memory.events", "low 0\nhigh 2\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	if l := all[0].rec.next(t, "t0 below, its twin closed"); l.Above {
		t.Fatalf("t0: %+v, want below", l)
	}
	// The last cgroup's event reaches its own watch.
	fakeUsage(t, k, fmt.Sprintf("t%d", n-1), 5<<20)
	setKernelValue(t, k, fmt.Sprintf("t%d", n-1), "memory.events", "low 0\nhigh 1\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	if l := all[n-1].rec.next(t, "the last one above"); !l.Above {
		t.Fatalf("last: %+v, want above", l)
	}
	for _, w := range all {
		if err := w.w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m.inotify.mu.Lock()
	defer m.inotify.mu.Unlock()
	if m.inotify.file != nil {
		t.Error("the inotify instance stays open without watches")
	}
}

func TestV2WatchMemoryOfARemovedCgroup(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory")
	m.memoryPoll = time.Hour
	cg, err := m.Create("/gone", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	fakeUsage(t, k, "gone", 0)
	rec := newLevelRecorder()
	w, err := cg.WatchMemory(1<<20, rec.notify)
	if err != nil {
		t.Fatal(err)
	}
	rec.next(t, "the level at the start")
	if err := cg.Delete(); err != nil {
		t.Fatal(err)
	}
	// The kernel drops its watch of the removed file (IN_IGNORED); the
	// hub forgets the descriptor, which the kernel may hand out again.
	waitFor(t, "the hub to forget the removed file", func() (bool, error) {
		m.inotify.mu.Lock()
		defer m.inotify.mu.Unlock()
		return len(m.inotify.wakes) == 0, nil
	})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	m.inotify.mu.Lock()
	open := m.inotify.file != nil
	m.inotify.mu.Unlock()
	if open {
		t.Error("the inotify instance stays open without watches")
	}
	// A new watch opens a new instance.
	again, err := m.Create("/again", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	fakeUsage(t, k, "again", 3<<20)
	rec2 := newLevelRecorder()
	w2, err := again.WatchMemory(1<<20, rec2.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if l := rec2.next(t, "the new watch's first level"); !l.Above {
		t.Fatalf("%+v, want above", l)
	}
}
