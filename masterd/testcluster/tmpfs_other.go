//go:build !linux

package testcluster

import (
	"errors"
	"path/filepath"
)

var errNoTmpfs = errors.New("testcluster: tmpfs data dirs need Linux")

// WithTmpfsDataDirs needs Linux; elsewhere New fails with a clear error.
func WithTmpfsDataDirs(size int64) Option {
	return func(c *Config) { c.TmpfsDataDir = size }
}

// DataDir is server i's -data-dir.
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.servers[i].dir, "data") }

func (c *Cluster) mountDataDir(*server) error {
	if c.cfg.TmpfsDataDir > 0 {
		return errNoTmpfs
	}
	return nil
}

func (c *Cluster) unmountDataDirs() {}

// FillDataDir needs Linux.
func (c *Cluster) FillDataDir(int) (int64, error) { return 0, errNoTmpfs }

// FreeDataDir needs Linux.
func (c *Cluster) FreeDataDir(int) error { return errNoTmpfs }

// DataDirFree needs Linux.
func (c *Cluster) DataDirFree(int) (int64, error) { return 0, errNoTmpfs }
