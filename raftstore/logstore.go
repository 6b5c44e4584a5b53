package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	walmeta "github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"
)

// The Raft log (and the few values Raft keeps beside it: the current term,
// the last vote) lives in one of two stores in the data dir:
//
//   - bolt, the default: raft.db, a B+tree file (hashicorp/raft-boltdb), as
//     Consul and Nomad have long used. Each append costs two fsyncs (the
//     pages, then the meta page).
//   - wal: the wal/ directory, an append-only log in segment files with
//     a small meta file (hashicorp/raft-wal, which Consul offers as its
//     "wal" backend). Each append costs one fsync, so a write reaches a
//     quorum sooner (see the benchmarks guide for the figures).
//
// A data dir holds one kind for good: a server refuses to start on the other
// kind's data dir (LogStoreMismatchError) rather than start empty beside it.
// To move a server to the other kind, stop it, remove its data dir and start
// it with the other -raft-log-store and -join: it copies the state back from
// the cluster, as a replacement server does. Servers of one cluster may run
// different kinds: the kind is local to each data dir.
const (
	LogStoreBolt = "bolt"
	LogStoreWAL  = "wal"
)

// LogStores lists the log stores, the default first.
var LogStores = []string{LogStoreBolt, LogStoreWAL}

const (
	boltFile = "raft.db"
	walDir   = "wal"
)

// LogStoreMismatchError means a data dir holds a Raft log of another kind
// than the server was started with.
type LogStoreMismatchError struct {
	DataDir string
	// Found is the kind the data dir holds, Want the one asked for.
	Found, Want string
}

func (e *LogStoreMismatchError) Error() string {
	return fmt.Sprintf("data dir %s holds a %q Raft log (%s), not a %q one: start this server with -raft-log-store %s, "+
		"or, to change its kind, remove the data dir and start it again with -join to copy the state back from the cluster",
		e.DataDir, e.Found, filepath.Join(e.DataDir, logStorePath(e.Found)), e.Want, e.Found)
}

func logStorePath(kind string) string {
	if kind == LogStoreWAL {
		return walDir
	}
	return boltFile
}

// DataDirLogStore reports which kind of Raft log a data dir holds: "" when
// it holds none yet. A data dir holding both is an error.
func DataDirLogStore(dir string) (string, error) {
	var found []string
	for _, kind := range LogStores {
		path := filepath.Join(dir, logStorePath(kind))
		_, err := os.Stat(path)
		if err == nil && kind == LogStoreWAL {
			// An empty wal/ is what a first start with the wal store
			// leaves when it fails before writing: no log yet.
			var entries []os.DirEntry
			if entries, err = os.ReadDir(path); err == nil && len(entries) == 0 {
				continue
			}
		}
		switch {
		case err == nil:
			found = append(found, kind)
		case !errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("data dir %s: %w", dir, err)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("data dir %s holds both a bolt Raft log (%s) and a wal one (%s): one of them was copied in by hand; remove the data dir and start the server again with -join",
			dir, boltFile, walDir+"/")
	}
}

// diskLogStore is a server's log and stable store on disk.
type diskLogStore struct {
	logs   raft.LogStore
	stable raft.StableStore
	close  func() error
}

// logStoreKind is the log store kind asked for ("" is bolt), or an error
// naming the kinds there are.
func logStoreKind(kind string) (string, error) {
	if kind == "" {
		return LogStoreBolt, nil
	}
	if !slices.Contains(LogStores, kind) {
		return "", fmt.Errorf("unknown Raft log store %q: want %s or %s", kind, LogStoreBolt, LogStoreWAL)
	}
	return kind, nil
}

// openLogStore opens (creating it if the data dir has none) the Raft log of
// kind (one of LogStores: see logStoreKind), after checking that the data
// dir holds no other kind, and reads it whole (see verify.go).
func openLogStore(dataDir, kind string, snapshotIndex uint64, logger hclog.Logger) (*diskLogStore, error) {
	found, err := DataDirLogStore(dataDir)
	if err != nil {
		return nil, err
	}
	if found != "" && found != kind {
		return nil, &LogStoreMismatchError{DataDir: dataDir, Found: found, Want: kind}
	}
	if kind == LogStoreWAL {
		return openWAL(dataDir, snapshotIndex, logger)
	}
	return openBolt(dataDir, snapshotIndex)
}

func openBolt(dataDir string, snapshotIndex uint64) (*diskLogStore, error) {
	path := filepath.Join(dataDir, boltFile)
	if err := checkBoltFile(path); err != nil {
		return nil, err
	}
	var bolt *raftboltdb.BoltStore
	err := readWhole(path, func() error {
		var err error
		bolt, err = raftboltdb.New(raftboltdb.Options{
			Path: path,
			// The free list is rebuilt when the file is opened, so syncing it
			// on every append only makes each write larger (Consul does the same).
			BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true},
		})
		if errors.Is(err, bbolt.ErrInvalid) || errors.Is(err, bbolt.ErrChecksum) || errors.Is(err, bbolt.ErrVersionMismatch) {
			return &CorruptionError{Path: path, Err: err}
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		if err := checkLogs(path, bolt, bolt, snapshotIndex); err != nil {
			bolt.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &diskLogStore{logs: bolt, stable: bolt, close: bolt.Close}, nil
}

func openWAL(dataDir string, snapshotIndex uint64, logger hclog.Logger) (*diskLogStore, error) {
	dir := filepath.Join(dataDir, walDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	// The meta file is a bbolt file: read it whole first, as raft.db.
	meta := filepath.Join(dir, "wal-meta.db")
	if err := checkBoltFile(meta); err != nil {
		var corrupt *CorruptionError
		if errors.As(err, &corrupt) {
			corrupt.DataDir = dataDir
		}
		return nil, err
	}
	var wal *raftwal.WAL
	// raft-wal's Close leaves its meta file open (and locked: the next
	// Open in this process would wait for it forever), so it gets a meta
	// store it does not own, closed after it.
	metaStore := &walmeta.BoltMetaDB{}
	closeWAL := func() error { return errors.Join(wal.Close(), metaStore.Close()) }
	err := readWhole(dir, func() error {
		var err error
		wal, err = raftwal.Open(dir, raftwal.WithLogger(logger.Named("wal")), raftwal.WithMetaStore(metaStore))
		if err != nil {
			metaStore.Close()
			// raft-wal refuses a segment it cannot recover or a meta file
			// that disagrees with the segments. A failure of the system
			// (permissions, open files, a full disk) is no corruption:
			// removing the data dir, as CorruptionError advises, would be
			// the wrong cure for it.
			var pathErr *fs.PathError
			var errno syscall.Errno
			if !errors.Is(err, raftwal.ErrCorrupt) && (errors.As(err, &pathErr) || errors.As(err, &errno)) {
				return fmt.Errorf("open the Raft log in %s: %w", dir, err)
			}
			return &CorruptionError{Path: dir, Err: err, DataDir: dataDir}
		}
		if err := checkLogs(dir, wal, wal, snapshotIndex); err != nil {
			closeWAL()
			var corrupt *CorruptionError
			if errors.As(err, &corrupt) {
				corrupt.DataDir = dataDir
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &diskLogStore{logs: wal, stable: wal, close: closeWAL}, nil
}

// IsMonotonic tells Raft (through its log cache) whether the store under the
// guard refuses gaps in the log, as the wal does: Raft then removes the old
// log after restoring a backup instead of leaving a gap before the restored
// index.
func (g guardedLogStore) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
