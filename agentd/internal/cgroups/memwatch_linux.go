package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"
)

// memoryWatch is the part of WatchMemory both versions share: a goroutine
// that reads the usage whenever wake returns, and reports the side of the
// threshold it is on when that changed. wake blocks until the kernel (or
// the v2 poll) says to look again, and fails once the watch is closed.
type memoryWatch struct {
	path      string // the cgroup's, for errors
	threshold uint64
	usageFD   int // memory.usage_in_bytes or memory.current, read with pread
	events    *os.File
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
		// Closing the file ends a Read under way in run (os.ErrClosed);
		// for v1, dropping the eventfd also unregisters the threshold.
		w.events.Close()
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
func (c *v1Cgroup) WatchMemory(threshold int64, notify func(MemoryLevel)) (MemoryWatch, error) {
	if err := checkWatch(c.path, threshold, notify); err != nil {
		return nil, err
	}
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
	w := &memoryWatch{path: c.path, threshold: uint64(threshold), usageFD: usageFD, events: events, notify: notify, done: make(chan struct{})}
	go w.run(func() error {
		var count [8]byte // the eventfd's counter: how many crossings; we re-read the usage anyway
		_, err := events.Read(count[:])
		return err
	})
	return w, nil
}

// WatchMemory on v2 watches memory.events with inotify and polls
// memory.current every V2MemoryPollInterval in between (see Cgroup).
// Deadlines on the inotify descriptor, which Go's poller holds, make the
// poll: one goroutine and no timer per watch.
func (c *v2Cgroup) WatchMemory(threshold int64, notify func(MemoryLevel)) (MemoryWatch, error) {
	if err := checkWatch(c.path, threshold, notify); err != nil {
		return nil, err
	}
	currentPath := filepath.Join(c.dir(), "memory.current")
	usageFD, err := unix.Open(currentPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: watch memory: open %s: %w", c.path, currentPath, notExistErrno(err))
	}
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		unix.Close(usageFD)
		return nil, fmt.Errorf("cgroup %s: watch memory: inotify: %w", c.path, err)
	}
	events := os.NewFile(uintptr(ifd), "memory.events inotify of "+c.path)
	eventsPath := filepath.Join(c.dir(), "memory.events")
	if _, err := unix.InotifyAddWatch(ifd, eventsPath, unix.IN_MODIFY); err != nil {
		events.Close()
		unix.Close(usageFD)
		return nil, fmt.Errorf("cgroup %s: watch memory: inotify %s: %w", c.path, eventsPath, notExistErrno(err))
	}
	poll := c.m.memoryPoll
	w := &memoryWatch{path: c.path, threshold: uint64(threshold), usageFD: usageFD, events: events, notify: notify, done: make(chan struct{})}
	go w.run(func() error {
		// Room for many events: a burst of them needs one reading.
		var buf [16 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)]byte
		if err := events.SetReadDeadline(time.Now().Add(poll)); err != nil {
			return err
		}
		_, err := events.Read(buf[:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil // time to poll
		}
		return err
	})
	return w, nil
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
