//go:build linux

package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parsers of the /proc and cgroup v1 files this package reads. Each takes
// an io.Reader and is tested on fixtures in testdata/v1.

// parseV1Mounts lists the cgroup v1 hierarchies in a mountinfo file
// (proc(5)): "36 25 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup
// cgroup rw,memory". Controllers are the super options that are not mount
// flags; named hierarchies (name=systemd) are kept under their name= form.
func parseV1Mounts(r io.Reader) ([]v1Hierarchy, error) {
	var out []v1Hierarchy
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("bad mountinfo line %q", line)
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 6 || len(tail) < 3 {
			return nil, fmt.Errorf("bad mountinfo line %q", line)
		}
		if tail[0] != "cgroup" {
			continue
		}
		h := v1Hierarchy{root: unescapeMountinfo(fields[3]), mount: unescapeMountinfo(fields[4])}
		for _, opt := range strings.Split(tail[2], ",") {
			switch {
			case opt == "rw" || opt == "ro" || opt == "clone_children" || opt == "xattr" ||
				opt == "noprefix" || opt == "cpuset_v2_mode" || opt == "favordynmods" ||
				strings.HasPrefix(opt, "release_agent="):
			default:
				h.controllers = append(h.controllers, opt)
			}
		}
		out = append(out, h)
	}
	return out, sc.Err()
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseProcCgroupV1 maps each v1 controller (and name=… hierarchy) in a
// /proc/<pid>/cgroup file to the process's path in it:
// "4:memory:/allot/task" → memory: /allot/task; "2:cpu,cpuacct:/x" gives
// both cpu and cpuacct. The v2 line "0::/" is skipped.
func parseProcCgroupV1(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("bad cgroup line %q", line)
		}
		if parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// parsePidList reads a cgroup.procs or tasks file: one pid a line.
func parsePidList(r io.Reader) ([]int, error) {
	var pids []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		pid, err := strconv.Atoi(line)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("bad pid %q", line)
		}
		pids = append(pids, pid)
	}
	return pids, sc.Err()
}

// parseV1Uint reads a file that holds one unsigned number, like
// cpuacct.usage or memory.usage_in_bytes.
func parseV1Uint(r io.Reader) (uint64, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want one number, got %q", s)
	}
	return v, nil
}

// v1OOMControl is memory.oom_control.
type v1OOMControl struct {
	KillDisabled bool
	UnderOOM     bool
	OOMKills     uint64 // 0 on kernels before 4.13, which lack the line
}

func parseOOMControl(r io.Reader) (v1OOMControl, error) {
	var oc v1OOMControl
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			if key == "" {
				continue
			}
			return v1OOMControl{}, fmt.Errorf("bad oom_control line %q", sc.Text())
		}
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return v1OOMControl{}, fmt.Errorf("bad oom_control line %q", sc.Text())
		}
		switch key {
		case "oom_kill_disable":
			oc.KillDisabled = n != 0
		case "under_oom":
			oc.UnderOOM = n != 0
		case "oom_kill":
			oc.OOMKills = n
		}
	}
	return oc, sc.Err()
}
