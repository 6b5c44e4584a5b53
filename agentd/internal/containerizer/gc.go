package containerizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// GCSandboxes removes the sandboxes of ended containers older than maxAge.
// A container's age is the time since its last record or sandbox change
// (normally its end). Never removed: a container this Containerizer runs
// or launches, a group, and a container whose monitor still lives (one
// not recovered yet).
func (c *Containerizer) GCSandboxes(maxAge time.Duration) error {
	ids := map[string]bool{}
	for _, dir := range []string{sandboxesDir, recordsDir} {
		entries, err := os.ReadDir(filepath.Join(c.cfg.WorkDir, dir))
		if err != nil {
			return fmt.Errorf("collect sandboxes: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() && checkID("container", e.Name()) == nil {
				ids[e.Name()] = true
			}
		}
	}
	var errs []error
	now := time.Now()
	for id := range ids {
		c.mu.Lock()
		_, live := c.containers[id]
		_, group := c.groups[id]
		c.mu.Unlock()
		if live || group {
			continue
		}
		records := c.recordsDir(id)
		if _, err := os.Stat(filepath.Join(records, groupRecord)); err == nil {
			continue // removed with its group
		}
		if now.Sub(lastChange(records, c.sandboxDir(id))) < maxAge {
			continue
		}
		var mon monitorRecordData
		if readRecord(filepath.Join(records, monitorRecord), &mon) == nil {
			if f := openIfSame(mon.MonitorPid, mon.MonitorStartTime); f != nil {
				f.Close()
				continue
			}
		}
		// An ended container's cgroup was deleted when it ended; one that
		// is still there (a delete that failed) goes first, so that no
		// cgroup is left without its record.
		var rec launchRecord
		if readRecord(filepath.Join(records, containerRecord), &rec) == nil && rec.OwnCgroup && c.underRoot(rec.Cgroup) {
			if cg, err := c.cfg.Cgroups.Load(rec.Cgroup); err == nil {
				if err := errors.Join(cg.KillAll(), cg.Delete()); err != nil {
					errs = append(errs, fmt.Errorf("collect container %s: %w", id, err))
					continue
				}
			}
		}
		if err := c.removeContainerFiles(id); err != nil {
			errs = append(errs, fmt.Errorf("collect container %s: %w", id, err))
			continue
		}
		c.log.Debug("collected sandbox", "container_id", id)
	}
	return errors.Join(errs...)
}

// lastChange is the newest modification time of the container's records
// (the directory and the files in it) and of its sandbox directory.
func lastChange(records, sandbox string) time.Time {
	var last time.Time
	see := func(path string) {
		if fi, err := os.Stat(path); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	see(records)
	see(sandbox)
	for _, name := range []string{containerRecord, monitorRecord, exitRecord} {
		see(filepath.Join(records, name))
	}
	return last
}
