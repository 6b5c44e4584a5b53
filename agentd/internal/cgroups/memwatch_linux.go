package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"
)

// memoryWatch is the part of WatchMemory both versions share: a goroutine
// that reads the usage whenever wake returns, and reports the side of the
// threshold it is on when that changed. wake blocks until the kernel (or
// the v2 poll) says to look again, and fails once cancel was called.
type memoryWatch struct {
	path      string // the cgroup's, for errors
	threshold uint64
	usageFD   int // memory.usage_in_bytes or memory.current, read with pread
	cancel    func()
	notify    func(MemoryLevel)

	closeOnce sync.Once
	done      chan struct{}
}

func (w *memoryWatch) run(wake func() error) {
	defer close(w.done)
	reported, first := false, true
	for {
		usage, err := preadUint(w.usageFD)
		switch {
		case errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT):
			// The cgroup was removed (v1 signals the eventfd then):
			// nothing is left to watch.
			return
		case err != nil:
			// Not seen from a kernel; a reading that makes no sense is
			// no level to report, and the next wake reads again.
		case first || (usage >= w.threshold) != reported:
			above := usage >= w.threshold
			first, reported = false, above
			w.notify(MemoryLevel{Above: above, UsageBytes: usage})
		}
		if err := wake(); err != nil {
			return
		}
	}
}

func (w *memoryWatch) Close() error {
	w.closeOnce.Do(func() {
		w.cancel()
		<-w.done
		unix.Close(w.usageFD)
	})
	return nil
}

// preadUint reads a one-number cgroup file from its start: cgroup files
// regenerate their contents on a read at offset 0, so one descriptor
// serves every reading without an open and close each time.
func preadUint(fd int) (uint64, error) {
	var buf [64]byte
	n, err := unix.Pread(fd, buf[:], 0)
	if err != nil {
		return 0, err
	}
	return parseV1Uint(bytes.NewReader(buf[:n]))
}

func checkWatch(path string, threshold int64, notify func(MemoryLevel)) error {
	if threshold <= 0 {
		return fmt.Errorf("cgroup %s: watch memory: threshold %d bytes: want a positive size", path, threshold)
	}
	if notify == nil {
		return fmt.Errorf("cgroup %s: watch memory: no notify function", path)
	}
	return nil
}

// WatchMemory registers a memory threshold (cgroup-v1 memory.rst §9):
// "<eventfd> <fd of memory.usage_in_bytes> <threshold>" written to the
// cgroup's cgroup.event_control. The eventfd is registered before the
// usage is first read, so a crossing after that reading always wakes the
// watch. The kernel signals the eventfd once more when the cgroup is
// removed, which ends the watch.
//
// The kernel keeps the threshold in pages, rounded down, and counts usage
// in pages: a threshold off a page boundary would fire at a usage this
// watch reads as below, and the kernel, above by its own count, would not
// fire again while the usage grows. Rounded up to a page, the kernel's
// rule and the watch's (usage ≥ threshold) agree on every usage, which is
// a whole number of pages.
func (c *v1Cgroup) WatchMemory(threshold int64, notify func(MemoryLevel)) (MemoryWatch, error) {
	if err := checkWatch(c.path, threshold, notify); err != nil {
		return nil, err
	}
	threshold = roundUpToPage(threshold, int64(os.Getpagesize()))
	dir := c.dir(cgroup1.Memory)
	usagePath := filepath.Join(dir, "memory.usage_in_bytes")
	usageFD, err := unix.Open(usagePath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: watch memory: open %s: %w", c.path, usagePath, notExistErrno(err))
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(usageFD)
		return nil, fmt.Errorf("cgroup %s: watch memory: eventfd: %w", c.path, err)
	}
	// Non-blocking, the eventfd joins Go's poller: a waiting watch costs
	// no thread.
	events := os.NewFile(uintptr(efd), "memory threshold eventfd of "+c.path)
	control := fmt.Sprintf("%d %d %d", efd, usageFD, threshold)
	if err := c.writeFile(dir, "cgroup.event_control", control); err != nil {
		events.Close()
		unix.Close(usageFD)
		return nil, fmt.Errorf("watch memory: %w", err)
	}
	w := &memoryWatch{path: c.path, threshold: uint64(threshold), usageFD: usageFD, notify: notify, done: make(chan struct{})}
	// Closing the file ends a Read under way (os.ErrClosed), and dropping
	// the eventfd unregisters the threshold.
	w.cancel = func() { events.Close() }
	go w.run(func() error {
		var count [8]byte // the eventfd's counter: how many crossings; we re-read the usage anyway
		_, err := events.Read(count[:])
		return err
	})
	return w, nil
}

// roundUpToPage is n rounded up to a multiple of page (a power of two); a
// size within a page of the largest int64, which no usage reaches, stays.
func roundUpToPage(n, page int64) int64 {
	if n > math.MaxInt64-(page-1) {
		return n
	}
	return (n + page - 1) &^ (page - 1)
}

// WatchMemory on v2 watches memory.events with the manager's inotify
// instance and polls memory.current every V2MemoryPollInterval in between
// (see Cgroup).
func (c *v2Cgroup) WatchMemory(threshold int64, notify func(MemoryLevel)) (MemoryWatch, error) {
	if err := checkWatch(c.path, threshold, notify); err != nil {
		return nil, err
	}
	currentPath := filepath.Join(c.dir(), "memory.current")
	usageFD, err := unix.Open(currentPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: watch memory: open %s: %w", c.path, currentPath, notExistErrno(err))
	}
	eventsPath := filepath.Join(c.dir(), "memory.events")
	wakes := make(chan struct{}, 1)
	wd, err := c.m.inotify.add(eventsPath, wakes)
	if err != nil {
		unix.Close(usageFD)
		return nil, fmt.Errorf("cgroup %s: watch memory: inotify %s: %w", c.path, eventsPath, notExistErrno(err))
	}
	closed := make(chan struct{})
	w := &memoryWatch{path: c.path, threshold: uint64(threshold), usageFD: usageFD, notify: notify, done: make(chan struct{})}
	w.cancel = func() {
		close(closed)
		c.m.inotify.remove(wd, wakes)
	}
	poll := time.NewTimer(c.m.memoryPoll)
	go w.run(func() error {
		select {
		case <-wakes:
		case <-poll.C:
		case <-closed:
			poll.Stop()
			return os.ErrClosed
		}
		// Since Go 1.23 Reset leaves no stale tick behind to drain.
		poll.Reset(c.m.memoryPoll)
		return nil
	})
	return w, nil
}

// inotifyHub is one inotify instance for all of a manager's v2 memory
// watches: the kernel allows 128 instances per user by default
// (fs.inotify.max_user_instances), shared with every other process of
// root, and an agent runs more tasks than that. It holds the instance
// while any watch uses it, and one goroutine reads it and wakes the
// watches of each event's file.
type inotifyHub struct {
	mu    sync.Mutex
	file  *os.File                               // nil while no watch uses it
	wakes map[int32]map[chan<- struct{}]struct{} // by watch descriptor
}

// add watches path for IN_MODIFY and sends on wake (without blocking: a
// wake waiting is enough) for each event. Two watches of one file share
// the kernel's watch descriptor.
func (h *inotifyHub) add(path string, wake chan<- struct{}) (int32, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.file == nil {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return 0, fmt.Errorf("inotify: %w", err)
		}
		// Non-blocking, it joins Go's poller: its reader costs no
		// thread while it waits.
		h.file = os.NewFile(uintptr(fd), "inotify of cgroup memory watches")
		h.wakes = map[int32]map[chan<- struct{}]struct{}{}
		go h.read(h.file)
	}
	wd, err := unix.InotifyAddWatch(int(h.file.Fd()), path, unix.IN_MODIFY)
	if err != nil {
		h.closeIfUnusedLocked()
		return 0, err
	}
	if h.wakes[int32(wd)] == nil {
		h.wakes[int32(wd)] = map[chan<- struct{}]struct{}{}
	}
	h.wakes[int32(wd)][wake] = struct{}{}
	return int32(wd), nil
}

// remove stops waking wake. The kernel's watch goes with the file's last
// watcher; a watch descriptor that the kernel dropped already (the file
// was removed: IN_IGNORED) and may have given to another file since is
// left alone.
func (h *inotifyHub) remove(wd int32, wake chan<- struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.closeIfUnusedLocked()
	set, ok := h.wakes[wd]
	if _, mine := set[wake]; !ok || !mine {
		return
	}
	delete(set, wake)
	if len(set) == 0 {
		delete(h.wakes, wd)
		_, _ = unix.InotifyRmWatch(int(h.file.Fd()), uint32(wd))
	}
}

func (h *inotifyHub) closeIfUnusedLocked() {
	if h.file != nil && len(h.wakes) == 0 {
		h.file.Close() // ends its reader
		h.file, h.wakes = nil, nil
	}
}

// read dispatches the events of one inotify instance until it is closed.
func (h *inotifyHub) read(file *os.File) {
	// Room for many events: a burst of them needs one read.
	var buf [64 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)]byte
	for {
		n, err := file.Read(buf[:])
		if err != nil {
			return // closed
		}
		h.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if h.file != file {
				continue // closed meanwhile; its watches are gone
			}
			for wake := range h.wakes[ev.Wd] {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				// The file is gone and the kernel dropped the watch:
				// its watches were woken to find that out, and the
				// descriptor may name another file from now on.
				delete(h.wakes, ev.Wd)
			}
		}
		h.mu.Unlock()
	}
}

// notExistErrno maps ENOENT to ErrNotExist, keeping other errnos.
func notExistErrno(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return ErrNotExist
	}
	return err
}

func (c *v1Cgroup) Memory() (MemoryUsage, error) {
	memory := c.dir(cgroup1.Memory)
	usage, err := c.readUint(memory, "memory.usage_in_bytes")
	if err != nil {
		return MemoryUsage{}, err
	}
	stat, err := readFlatKeyedFile(c.path, filepath.Join(memory, "memory.stat"))
	if err != nil {
		return MemoryUsage{}, err
	}
	// total_* are the hierarchical counts, the cgroup's own and its
	// descendants'; usage_in_bytes is hierarchical too.
	return MemoryUsage{UsageBytes: usage, InactiveFileBytes: stat["total_inactive_file"]}, nil
}

func (c *v2Cgroup) Memory() (MemoryUsage, error) {
	usage, err := c.readUint("memory.current")
	if err != nil {
		return MemoryUsage{}, err
	}
	stat, err := c.readFlatKeyed("memory.stat")
	if err != nil {
		return MemoryUsage{}, err
	}
	return MemoryUsage{UsageBytes: usage, InactiveFileBytes: stat["inactive_file"]}, nil
}

func readFlatKeyedFile(cgroupPath, path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: read %s: %w", cgroupPath, path, unwrapPathError(err))
	}
	defer f.Close()
	values, err := parseFlatKeyed(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: read %s: %w", cgroupPath, path, err)
	}
	return values, nil
}

func (c *v1Cgroup) SetOOMScoreAdj(adj int) error {
	return setOOMScoreAdj(c.path, c.Pids, adj)
}

func (c *v2Cgroup) SetOOMScoreAdj(adj int) error {
	return setOOMScoreAdj(c.path, c.Pids, adj)
}

// oomScoreRounds bounds how many times SetOOMScoreAdj lists the cgroup
// again for processes forked while it wrote. A child forked after its
// parent got the value inherits it; only a fork racing with the write can
// need another round, so a cgroup forking without pause (a fork bomb) is
// the only one that uses them all.
const oomScoreRounds = 4

// setOOMScoreAdj writes adj to every process pids lists (see
// Cgroup.SetOOMScoreAdj): each round pins the processes not yet written
// with a /proc/<pid> directory descriptor, which names that one process
// for good (reads and writes through it fail with ESRCH once it is gone,
// whoever takes the pid next), lists the cgroup again, and writes only to
// the pinned processes still listed. A pid reused between the two listings
// by a process outside the cgroup is not listed the second time.
func setOOMScoreAdj(path string, pids func() ([]int, error), adj int) error {
	if adj < -1000 || adj > 1000 {
		return fmt.Errorf("cgroup %s: oom_score_adj %d outside [-1000, 1000]", path, adj)
	}
	value := []byte(strconv.Itoa(adj))
	written := map[int]bool{}
	for range oomScoreRounds {
		listed, err := pids()
		if err != nil {
			return err
		}
		pinned := map[int]int{}
		for _, pid := range listed {
			if written[pid] {
				continue
			}
			fd, err := unix.Open(fmt.Sprintf("/proc/%d", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // exited
			}
			pinned[pid] = fd
		}
		if len(pinned) == 0 {
			return nil
		}
		still, err := pids()
		var errs []error
		if err != nil {
			errs = append(errs, err)
		}
		for _, pid := range still {
			fd, ok := pinned[pid]
			if !ok {
				continue
			}
			written[pid] = true
			if err := writeAt(fd, "oom_score_adj", value); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("cgroup %s: write oom_score_adj %d of process %d: %w", path, adj, pid, err))
			}
		}
		for _, fd := range pinned {
			unix.Close(fd)
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// writeAt writes value to the file name in the directory dirfd in one
// write(2).
func writeAt(dirfd int, name string, value []byte) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, value)
	return errors.Join(err, unix.Close(fd))
}
