package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// treePids lists, sorted and once each, the processes in the cgroup
// directories roots and every cgroup below them: the union of their
// cgroup.procs. A cgroup removed while it is read is skipped.
func treePids(roots ...string) ([]int, error) {
	seen := map[int]bool{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) { // removed under our feet
					return nil
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			defer f.Close()
			pids, err := parsePidList(f)
			if err != nil {
				return fmt.Errorf("%s: %w", f.Name(), err)
			}
			for _, pid := range pids {
				seen[pid] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids, nil
}
