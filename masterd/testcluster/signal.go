package testcluster

import (
	"errors"
	"fmt"
	"os"
	"syscall"
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
	return nil
}
