//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// removeWhenEmpty removes one cgroup directory with rmdir. The kernel
// answers EBUSY while the cgroup has processes, which is an error at once,
// and for a moment after its last process or child went, until it has
// released the dying cgroup; that EBUSY is retried for up to wait. A cgroup
// already gone is fine.
func removeWhenEmpty(dir string, rmdir func(string) error, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		err := rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		if f, openErr := os.Open(filepath.Join(dir, "cgroup.procs")); openErr == nil {
			pids, _ := parsePidList(f)
			f.Close()
			if len(pids) > 0 {
				return fmt.Errorf("%w: processes %v are in it", err, pids)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: still busy after %v without processes", err, wait)
		}
		time.Sleep(pause)
	}
}

// waitNoPids polls pids until it lists none or deadline passes, and returns
// what is left. Neither cgroup version has a way to wait for a cgroup to
// empty short of inotify; a pause that grows from 100 µs costs little when
// the processes die at once.
func waitNoPids(pids func() ([]int, error), deadline time.Time) ([]int, error) {
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		left, err := pids()
		if err != nil || len(left) == 0 || time.Now().After(deadline) {
			return left, err
		}
		time.Sleep(pause)
	}
}
