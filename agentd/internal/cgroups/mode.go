package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// unifiedMountpoint is where a host with the unified hierarchy mounts it;
// containerd's cgroups.Mode() looks there and nowhere else.
const unifiedMountpoint = "/sys/fs/cgroup"

// ModeFromMountinfo tells the cgroup layout from a mountinfo file
// (/proc/self/mountinfo, proc(5)), as containerd's cgroups.Mode() does from
// statfs(2), and returns where it is mounted:
//
//   - a cgroup2 file system at /sys/fs/cgroup is V2 (unified), mounted
//     there, whatever else is mounted;
//   - otherwise any cgroup v1 hierarchy makes V1, legacy or hybrid (an
//     extra cgroup2, normally empty, at /sys/fs/cgroup/unified changes
//     nothing: the controllers are on the v1 mounts); the mount point is
//     the directory that holds the v1 mounts, normally /sys/fs/cgroup;
//   - with neither, Unavailable. Here containerd says Legacy whenever
//     /sys/fs/cgroup exists and is not cgroup2, even with nothing mounted
//     on it; we have nothing to manage then.
//
// Only mounts that are visible count: a mount hidden by a later one on the
// same mount point (its child in mountinfo), and everything mounted on top
// of a hidden mount, is skipped. Whether the unified hierarchy has the
// controllers allot needs enabled is not in mountinfo; NewV2 checks that.
func ModeFromMountinfo(r io.Reader) (Mode, string, error) {
	mounts, err := parseMountinfo(r)
	if err != nil {
		return Unavailable, "", err
	}
	var v1Root string
	for _, m := range visibleMounts(mounts) {
		switch {
		case m.fsType == "cgroup2" && m.mountPoint == unifiedMountpoint:
			return V2, m.mountPoint, nil
		case m.fsType == "cgroup" && v1Root == "":
			v1Root = filepath.Dir(m.mountPoint)
		}
	}
	if v1Root != "" {
		return V1, v1Root, nil
	}
	return Unavailable, "", nil
}

type mountinfoEntry struct {
	id, parent string
	mountPoint string
	fsType     string
}

// parseMountinfo reads the fields of each line that ModeFromMountinfo
// needs: "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw"
// is mount 41 on parent 31, at /sys/fs/cgroup/unified, of type cgroup2.
// The optional fields before " - " vary in number.
func parseMountinfo(r io.Reader) ([]mountinfoEntry, error) {
	var out []mountinfoEntry
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 6 || len(tail) < 1 {
			return nil, fmt.Errorf("mountinfo line %d: want \"ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - TYPE ...\", got %q", n, line)
		}
		out = append(out, mountinfoEntry{
			id:         fields[0],
			parent:     fields[1],
			mountPoint: mountinfoUnescaper.Replace(fields[4]),
			fsType:     tail[0],
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return out, nil
}

// mountinfoUnescaper undoes the kernel's escapes in mountinfo paths (it
// escapes exactly these four characters, as octal).
var mountinfoUnescaper = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

// visibleMounts drops the mounts that cannot be reached by path: those
// over-mounted by a child on the same mount point (a tmpfs remounted over
// /sys/fs/cgroup hides the old one and the controllers mounted in it), and
// the mounts on top of a hidden one. It keeps the file's order.
func visibleMounts(mounts []mountinfoEntry) []mountinfoEntry {
	byID := make(map[string]mountinfoEntry, len(mounts))
	hidden := map[string]bool{}
	for _, m := range mounts {
		byID[m.id] = m
	}
	for _, m := range mounts {
		if p, ok := byID[m.parent]; ok && p.id != m.id && p.mountPoint == m.mountPoint {
			hidden[p.id] = true
		}
	}
	// A mount is visible when it is not hidden and the place it is
	// mounted on can be reached: its parent is visible, or, for an
	// over-mount (on its parent's own mount point), the parent's place
	// can be reached.
	var visible, reachable func(m mountinfoEntry, depth int) bool
	visible = func(m mountinfoEntry, depth int) bool {
		return !hidden[m.id] && reachable(m, depth)
	}
	reachable = func(m mountinfoEntry, depth int) bool {
		p, ok := byID[m.parent]
		// The root mount's parent is outside the namespace's list; a
		// loop (a corrupt file) ends the walk rather than the program.
		if !ok || p.id == m.id || depth > len(mounts) {
			return true
		}
		if p.mountPoint == m.mountPoint {
			return reachable(p, depth+1)
		}
		return visible(p, depth+1)
	}
	var out []mountinfoEntry
	for _, m := range mounts {
		if visible(m, 0) {
			out = append(out, m)
		}
	}
	return out
}

var hostMode struct {
	once       sync.Once
	mode       Mode
	mountpoint string
	err        error
}

// detect reads this process's mountinfo once: the mode does not change
// while agentd runs.
func detect() (Mode, string, error) {
	hostMode.once.Do(func() {
		f, err := os.Open("/proc/self/mountinfo")
		if err != nil {
			hostMode.err = fmt.Errorf("detect the cgroup mode: %w", err)
			return
		}
		defer f.Close()
		hostMode.mode, hostMode.mountpoint, hostMode.err = ModeFromMountinfo(f)
		if hostMode.err != nil {
			hostMode.err = fmt.Errorf("detect the cgroup mode: /proc/self/mountinfo: %w", hostMode.err)
		}
	})
	return hostMode.mode, hostMode.mountpoint, hostMode.err
}

// DetectMode is this host's cgroup mode (see ModeFromMountinfo); it agrees
// with containerd's cgroups.Mode(), Legacy and Hybrid being V1.
// Unavailable when /proc/self/mountinfo cannot be read.
func DetectMode() Mode {
	mode, _, err := detect()
	if err != nil {
		return Unavailable
	}
	return mode
}

// NewManager returns the Manager for this host's cgroup mode: NewV1 on
// legacy and hybrid hosts, NewV2 on the unified hierarchy. log may be nil.
func NewManager(log hclog.Logger) (Manager, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	mode, mountpoint, err := detect()
	if err != nil {
		return nil, err
	}
	var m Manager
	switch mode {
	case V1:
		m, err = NewV1()
	case V2:
		m, err = NewV2(mountpoint)
	default:
		return nil, errors.New("no cgroup hierarchy is mounted (neither cgroup2 at " + unifiedMountpoint +
			" nor cgroup v1 controllers in /proc/self/mountinfo)")
	}
	if err != nil {
		return nil, err
	}
	log.Info("cgroups", "mode", mode.String(), "mountpoint", mountpoint)
	return m, nil
}
