package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// A server must not serve from a data dir it cannot read back whole: a
// truncated raft.db made bbolt read past the end of its memory map (a
// SIGBUS: a Go fault trace was the only message), and hashicorp/raft skips
// a snapshot whose meta.json it cannot read and falls back to an older one
// when a newer one fails its CRC, then replays a log that may no longer
// reach back that far. So Open reads everything first, and refuses with a
// CorruptionError that names the file.

// CorruptionError means a file of the data dir is damaged: the server does
// not start from it.
type CorruptionError struct {
	Path string
	Err  error
	// DataDir is the data dir that holds Path ("" when it is Path's own
	// directory), the one the operator removes.
	DataDir string
}

func (e *CorruptionError) Error() string {
	dataDir := e.DataDir
	if dataDir == "" {
		dataDir = filepath.Dir(e.Path)
	}
	return fmt.Sprintf("%s is corrupted: %v; this server will not serve from it: remove its data dir (%s) and start it again with -join to copy the state back from the cluster",
		e.Path, e.Err, dataDir)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// readWhole runs fn, which reads path, and turns a fault on its memory map
// (bbolt reads through mmap) or a panic of the store into an error.
func readWhole(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptionError{Path: path, Err: fmt.Errorf("reading it failed: %v", r)}
		}
	}()
	return fn()
}

// checkLogs reads every entry of the log store and the stable store's keys.
// Entries at or below snapshotIndex (the newest snapshot's) may be missing:
// the snapshot holds them, and Raft leaves such a gap when a backup is
// restored (the restored state takes an index of its own, with no entry).
func checkLogs(path string, logs raft.LogStore, stable raft.StableStore, snapshotIndex uint64) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return &CorruptionError{Path: path, Err: fmt.Errorf("first index: %w", err)}
	}
	last, err := logs.LastIndex()
	if err != nil {
		return &CorruptionError{Path: path, Err: fmt.Errorf("last index: %w", err)}
	}
	if first > last && last != 0 {
		return &CorruptionError{Path: path, Err: fmt.Errorf("first index %d above last index %d", first, last)}
	}
	for i := first; i <= last && last != 0; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) && i <= snapshotIndex {
				continue
			}
			return &CorruptionError{Path: path, Err: fmt.Errorf("log entry %d of %d..%d: %w", i, first, last, err)}
		}
		if l.Index != i {
			return &CorruptionError{Path: path, Err: fmt.Errorf("log entry %d holds index %d", i, l.Index)}
		}
	}
	for _, key := range []string{"CurrentTerm", "LastVoteTerm"} {
		if _, err := stable.GetUint64([]byte(key)); err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
			return &CorruptionError{Path: path, Err: fmt.Errorf("stable key %s: %w", key, err)}
		}
	}
	return nil
}

// snapshotMeta is what this check needs of hashicorp/raft's meta.json.
type snapshotMeta struct {
	ID    string
	Index uint64
	Size  int64
	CRC   []byte
}

// checkSnapshots verifies every snapshot under dir/snapshots: a meta.json
// that decodes, and a state.bin of the size and CRC-64 it records. It
// returns the newest snapshot's index (0: none).
func checkSnapshots(dir string) (uint64, error) {
	root := filepath.Join(dir, "snapshots")
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read snapshots in %s: %w", root, err)
	}
	var newest uint64
	for _, e := range entries {
		// Raft writes a snapshot under NAME.tmp and renames it when done;
		// it removes what an interrupted one left.
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		index, err := checkSnapshot(filepath.Join(root, e.Name()))
		if err != nil {
			var corrupt *CorruptionError
			if errors.As(err, &corrupt) {
				corrupt.DataDir = dir
			}
			return 0, err
		}
		newest = max(newest, index)
	}
	return newest, nil
}

func checkSnapshot(dir string) (uint64, error) {
	metaPath := filepath.Join(dir, "meta.json")
	data, err := os.ReadFile(metaPath)
	if err != nil {
		return 0, &CorruptionError{Path: metaPath, Err: err}
	}
	var meta snapshotMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		return 0, &CorruptionError{Path: metaPath, Err: fmt.Errorf("decode: %w", err)}
	}
	statePath := filepath.Join(dir, "state.bin")
	f, err := os.Open(statePath)
	if err != nil {
		return 0, &CorruptionError{Path: statePath, Err: err}
	}
	defer f.Close()
	hash := crc64.New(crc64.MakeTable(crc64.ECMA))
	size, err := io.Copy(hash, f)
	if err != nil {
		return 0, &CorruptionError{Path: statePath, Err: err}
	}
	if size != meta.Size {
		return 0, &CorruptionError{Path: statePath, Err: fmt.Errorf("%d bytes, %s records %d", size, metaPath, meta.Size)}
	}
	if sum := hash.Sum(nil); !bytes.Equal(sum, meta.CRC) {
		return 0, &CorruptionError{Path: statePath, Err: fmt.Errorf("CRC-64 %x, %s records %x", sum, metaPath, meta.CRC)}
	}
	return meta.Index, nil
}

// checkBoltFile reads every key of raft.db, read-only, before bbolt opens it
// for writing: opening it for writing rebuilds the free list by walking the
// pages in a goroutine of bbolt's own, where a damaged page is a panic that
// nothing can recover. Here the walk runs in this goroutine (readWhole), and
// bbolt's structural check reports instead of panicking.
func checkBoltFile(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return readWhole(path, func() error {
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if errors.Is(err, bbolt.ErrInvalid) || errors.Is(err, bbolt.ErrChecksum) || errors.Is(err, bbolt.ErrVersionMismatch) {
			return &CorruptionError{Path: path, Err: err}
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		defer db.Close()
		return db.View(func(tx *bbolt.Tx) error {
			if err := tx.ForEach(func(_ []byte, b *bbolt.Bucket) error { return walkBucket(b) }); err != nil {
				return &CorruptionError{Path: path, Err: err}
			}
			var first error
			for err := range tx.Check() { // drained: the check's goroutine ends
				if first == nil {
					first = &CorruptionError{Path: path, Err: err}
				}
			}
			return first
		})
	})
}

func walkBucket(b *bbolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return walkBucket(nested)
			}
		}
		return nil
	})
}
