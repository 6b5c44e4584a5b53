//go:build linux

package testcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// fillFile is the file FillDataDir writes into a server's data dir; masterd
// never reads it, and FreeDataDir removes it.
const fillFile = "disk-fill"

// WithTmpfsDataDirs mounts a tmpfs of size bytes as every server's data dir
// (it needs root): a disk a test can fill with FillDataDir and free with
// FreeDataDir, while the server runs. Stop unmounts them.
func WithTmpfsDataDirs(size int64) Option {
	return func(c *Config) { c.TmpfsDataDir = size }
}

// DataDir is server i's -data-dir (raft.db and snapshots/ live there).
func (c *Cluster) DataDir(i int) string { return dataDir(c.servers[i]) }

func dataDir(s *server) string { return filepath.Join(s.dir, "data") }

// mountDataDir mounts the tmpfs of Config.TmpfsDataDir on s's data dir.
func (c *Cluster) mountDataDir(s *server) error {
	if c.cfg.TmpfsDataDir <= 0 {
		return nil
	}
	dir := dataDir(s)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	opts := fmt.Sprintf("size=%d,mode=0700", c.cfg.TmpfsDataDir)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return fmt.Errorf("testcluster: mount tmpfs (%s) on %s: %w", opts, dir, err)
	}
	c.mu.Lock()
	c.mounts = append(c.mounts, dir)
	c.mu.Unlock()
	return nil
}

// unmountDataDirs unmounts what mountDataDir mounted; the servers have
// exited by then. A mount still busy (a process we did not start holds a
// file) is detached, so that the directory can be removed all the same.
func (c *Cluster) unmountDataDirs() {
	c.mu.Lock()
	mounts := c.mounts
	c.mounts = nil
	c.mu.Unlock()
	for _, dir := range mounts {
		if err := syscall.Unmount(dir, 0); err != nil {
			c.cfg.Logf("testcluster: unmount %s: %v; detaching it", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	}
}

// FillDataDir writes a file into server i's data dir until its file system
// is full (ENOSPC), and returns how many bytes it took. The server's next
// write that needs a new block fails as on a full disk. It needs
// WithTmpfsDataDirs: filling the machine's own disk is not a test's to do.
func (c *Cluster) FillDataDir(i int) (int64, error) {
	if c.cfg.TmpfsDataDir <= 0 {
		return 0, errors.New("testcluster: FillDataDir needs WithTmpfsDataDirs")
	}
	path := filepath.Join(c.DataDir(i), fillFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("testcluster: fill %s: %w", path, err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var written int64
	for {
		n, err := f.Write(chunk)
		written += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			return written, fmt.Errorf("testcluster: fill %s: %w", path, err)
		}
	}
	// A smaller write may still fit in the last partial chunk.
	for size := len(chunk) / 2; size >= 512; size /= 2 {
		n, _ := f.Write(chunk[:size])
		written += int64(n)
	}
	c.cfg.Logf("testcluster: filled %s's data dir with %d bytes", c.ID(i), written)
	return written, nil
}

// FreeDataDir removes what FillDataDir wrote into server i's data dir.
func (c *Cluster) FreeDataDir(i int) error {
	path := filepath.Join(c.DataDir(i), fillFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("testcluster: free %s: %w", path, err)
	}
	c.cfg.Logf("testcluster: freed %s's data dir", c.ID(i))
	return nil
}

// DataDirFree is how many bytes are free on server i's data dir's file system.
func (c *Cluster) DataDirFree(i int) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.DataDir(i), &st); err != nil {
		return 0, fmt.Errorf("testcluster: statfs %s: %w", c.DataDir(i), err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}
