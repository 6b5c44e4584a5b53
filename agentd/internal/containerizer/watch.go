package containerizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openPidfd opens a non-blocking pidfd for pid. A pidfd names one process
// for good: once it is open, a reused pid cannot be mistaken for it.
func openPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	// Non-blocking, the file joins Go's poller: waiting for a monitor's
	// end costs no thread (cmd.Wait would block one per monitor).
	return os.NewFile(uintptr(fd), fmt.Sprintf("pidfd %d", pid)), nil
}

// waitPidfd returns once the process has exited (a pidfd polls readable
// then), or with an error when f is closed.
func waitPidfd(f *os.File) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var pollErr error
	err = conn.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err != nil && !errors.Is(err, unix.EINTR) {
			pollErr = err
			return true
		}
		return n > 0
	})
	return errors.Join(err, pollErr)
}

// reapIfChild collects the exit status of the process behind pidfd f if it
// is our child (a monitor left by an earlier Containerizer of this
// process, or one that came to us as a subreaper), so that no zombie is
// left; for any other process it does nothing.
func reapIfChild(f *os.File) {
	var info unix.Siginfo
	_ = unix.Waitid(unix.P_PIDFD, int(f.Fd()), &info, unix.WEXITED|unix.WNOHANG, nil)
}

// watch watches the container's monitor, pid, until it exits, then
// finishes the container. reap collects the monitor's exit status when it
// is our child.
func (c *Containerizer) watch(ct *container, id string, pid int, reap func()) error {
	f, err := openPidfd(pid)
	if err != nil {
		return err
	}
	return c.watchPidfd(ct, id, f, reap)
}

func (c *Containerizer) watchPidfd(ct *container, id string, f *os.File, reap func()) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		f.Close()
		return errors.New("the containerizer is closed")
	}
	c.watchers[f] = struct{}{}
	c.mu.Unlock()
	go func() {
		err := waitPidfd(f)
		c.mu.Lock()
		_, watched := c.watchers[f]
		delete(c.watchers, f)
		c.mu.Unlock()
		if !watched || errors.Is(err, os.ErrClosed) {
			return // Close: someone else takes over
		}
		if reap != nil {
			reap()
		} else {
			reapIfChild(f)
		}
		f.Close()
		if err != nil {
			c.log.Error("wait for monitor", "container_id", id, "error", err)
		}
		c.finish(ct, id)
	}()
	return nil
}

// finish reports a container whose monitor has exited: the status from its
// exit record, or Lost (with everything left of it killed) when there is
// none. Its own cgroup is deleted before OnExit.
func (c *Containerizer) finish(ct *container, id string) {
	log := c.log.With("container_id", id)
	var rec exitRecordData
	var status ExitStatus
	err := readRecord(filepath.Join(c.recordsDir(id), exitRecord), &rec)
	if err == nil {
		status = rec.status()
	} else {
		log.Error("the monitor ended without an exit record; killing what is left of the container", "error", err)
		c.killOrphaned(ct, ct.info.Pid)
		status = ExitStatus{Lost: true}
	}
	c.stopTaskMemory(ct)
	if ct.own && ct.cg != nil {
		if err := ct.cg.Delete(); err != nil {
			log.Error("delete the container's cgroup", "error", err)
		}
	}
	c.mu.Lock()
	if c.containers[id] == ct {
		delete(c.containers, id)
	}
	closed := c.closed
	c.mu.Unlock()
	close(ct.ended)
	if closed {
		return
	}
	log.Debug("container ended", "exit_code", status.ExitCode, "signal", status.Signal, "oom_killed", status.OOMKilled,
		"limit_oom", status.LimitOOM, "lost", status.Lost, "start_error", status.StartError)
	c.cfg.OnExit(id, status)
}
