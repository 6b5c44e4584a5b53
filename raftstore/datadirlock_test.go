package raftstore

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A second server on a data dir in use is refused at once, naming the
// process that holds it, with either log store; once the first stops, the
// data dir opens again.
func TestDataDirInUseIsRefused(t *testing.T) {
	for _, kind := range LogStores {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			first := onDisk(t, dir, kind)
			_, err := openWithin(t, Config{ID: "m2", DataDir: dir, LogStore: kind, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
			var inUse *DataDirInUseError
			if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || !strings.Contains(err.Error(), dir) {
				t.Fatalf("second Open on %s: %v, want a DataDirInUseError naming pid %d", dir, err, os.Getpid())
			}
			if err := first.Shutdown(); err != nil {
				t.Fatal(err)
			}
			again, err := openWithin(t, Config{ID: "m1", DataDir: dir, LogStore: kind, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
			if err != nil {
				t.Fatalf("Open after the first server stopped: %v", err)
			}
			waitNodeReady(t, again)
			again.Shutdown()
		})
	}
}
