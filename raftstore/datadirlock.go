package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// lockFile is the file in a data dir that a running server holds locked.
const lockFile = "LOCK"

// DataDirInUseError means another server (another process, or another node
// of this one) runs on the data dir: two servers on one Raft log would
// corrupt it.
type DataDirInUseError struct {
	DataDir string
	// PID is the process that holds the data dir, 0 when it did not say.
	PID int
}

func (e *DataDirInUseError) Error() string {
	holder := "another server"
	if e.PID > 0 {
		holder = fmt.Sprintf("another server (pid %d)", e.PID)
	}
	return fmt.Sprintf("data dir %s is in use by %s: stop it first, or give this server a data dir of its own", e.DataDir, holder)
}

// lockDataDir locks dataDir for this server's life and returns what
// releases it. It fails at once when another server holds it, naming that
// process, where the log stores' own locks answered after a second with
// "open …/raft.db: timeout". The kernel releases the lock when the process
// ends, however it ends: a server killed with -9 leaves no stale lock.
func lockDataDir(dataDir string) (release func() error, err error) {
	path := filepath.Join(dataDir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(string(bytes.TrimSpace(holder)))
			return nil, &DataDirInUseError{DataDir: dataDir, PID: pid}
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dataDir, err)
	}
	// Who holds it, for the error above; the lock, not the content, is
	// what counts.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil
}
