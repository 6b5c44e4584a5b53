package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Pid is the process id of server i, or 0 when it is not running.
func (c *Cluster) Pid(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.servers[i]
	if !s.alive() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Signal sends sig to server i's process. It is for faults that keep the
// process (SIGSTOP, SIGCONT); use Kill or Terminate to end one, so that its
// exit is expected rather than reported as a crash.
//
// SIGSTOP returns once every thread of the process has stopped: the kernel
// stops each thread as it next enters it, and on a loaded machine a server
// was seen answering a request sent a millisecond after kill(2) returned.
func (c *Cluster) Signal(i int, sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.servers[i]
	if !s.alive() {
		return fmt.Errorf("testcluster: signal %s: %s is not running", sig, s.id)
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testcluster: signal %s to %s: %w", sig, s.id, err)
	}
	if sig == syscall.SIGSTOP {
		return waitStopped(s.cmd.Process.Pid, s.id)
	}
	return nil
}

// stopWait bounds waitStopped: a stop takes the kernel microseconds, or as
// long as the busiest thread waits for a core.
const stopWait = 10 * time.Second

// waitStopped waits until every thread of pid is stopped (state T), or the
// process is gone.
func waitStopped(pid int, id string) error {
	deadline := time.Now().Add(stopWait)
	for !stoppedOrGone(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("testcluster: %s: SIGSTOP sent, but its threads still run after %s", id, stopWait)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stoppedOrGone reports whether every thread of pid is stopped, or the
// process is gone or exiting: either way nothing is left to answer.
func stoppedOrGone(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return true
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(task)
		if err != nil {
			continue // a thread that ended
		}
		// The state follows the command, which may hold spaces and
		// parentheses: it is the field after the last ')'.
		end := bytes.LastIndexByte(stat, ')')
		if end < 0 || end+2 >= len(stat) {
			return true // unreadable: nothing to wait for
		}
		switch stat[end+2] {
		case 'T', 't':
		case 'Z', 'X':
			return true
		default:
			return false
		}
	}
	return true
}
