package containerizer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// procStat is what the containerizer needs from /proc/<pid>/stat.
type procStat struct {
	State byte
	PPid  int
	// StartTime is when the process started, in clock ticks since boot
	// (field 22). A pid with another start time is another process: the
	// kernel reuses pids, never (pid, start time) pairs.
	StartTime uint64
}

// parseProcStat parses /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so the fields
// after it are found from the LAST ')'.
func parseProcStat(r io.Reader) (procStat, error) {
	data, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return procStat{}, err
	}
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return procStat{}, errors.New("no command name in parentheses")
	}
	// Fields from 3 (state) on; field n is rest[n-3].
	rest := strings.Fields(string(data[end+1:]))
	if len(rest) < 20 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(rest))
	}
	if len(rest[0]) != 1 {
		return procStat{}, fmt.Errorf("state %q is not one letter", rest[0])
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return procStat{}, fmt.Errorf("ppid: %w", err)
	}
	start, err := strconv.ParseUint(rest[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("start time: %w", err)
	}
	return procStat{State: rest[0][0], PPid: ppid, StartTime: start}, nil
}

// readProcStat reads /proc/<pid>/stat; errors.Is(err, os.ErrNotExist)
// when no such process exists.
func readProcStat(pid int) (procStat, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	defer f.Close()
	st, err := parseProcStat(f)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// parseCmdline splits /proc/<pid>/cmdline into its arguments.
func parseCmdline(r io.Reader) ([]string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSuffix(data, []byte{0})
	if len(data) == 0 {
		return nil, nil // a kernel thread or a zombie
	}
	return strings.Split(string(data), "\x00"), nil
}

// findMonitors scans /proc for monitor processes: processes running
// monitorCommand (with or without a records directory argument). It maps
// each one's cwd, which a monitor sets to its records directory, to the
// process. Recovery uses it only when a container's own record of its
// monitor is missing or damaged: the cwd names the container exactly.
func findMonitors(monitorCommand []string) (map[string]monitorProc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan /proc for monitors: %w", err)
	}
	found := map[string]monitorProc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		args, err := parseCmdline(f)
		f.Close()
		if err != nil || !isMonitorCommand(args, monitorCommand) {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.State == 'Z' {
			continue
		}
		// A monitor's child between fork and exec has the monitor's
		// command line and, until it enters the sandbox, its cwd: the
		// monitor is the one that started first. Taking the child for it
		// made recovery watch the task as if it were the monitor, and
		// report it lost when it ended (TestAgentdKilledMidLaunch).
		if prev, ok := found[cwd]; ok && (prev.StartTime < st.StartTime || prev.StartTime == st.StartTime && prev.Pid < pid) {
			continue
		}
		found[cwd] = monitorProc{Pid: pid, StartTime: st.StartTime}
	}
	return found, nil
}

// isMonitorCommand reports whether args are monitorCommand, optionally
// followed by a records directory. The program is compared by name: agentd
// may have been started through another path to the same binary.
func isMonitorCommand(args, monitorCommand []string) bool {
	n := len(monitorCommand)
	if len(args) != n && len(args) != n+1 {
		return false
	}
	return filepath.Base(args[0]) == filepath.Base(monitorCommand[0]) && slices.Equal(args[1:n], monitorCommand[1:])
}

// monitorProc identifies a monitor process across pid reuse.
type monitorProc struct {
	Pid       int
	StartTime uint64
}

// childrenOf lists the children of process pid from
// /proc/<pid>/task/*/children (each thread lists the children it forked).
func childrenOf(pid int) []int {
	threads, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var children []int
	for _, path := range threads {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(data)) {
			if child, err := strconv.Atoi(field); err == nil {
				children = append(children, child)
			}
		}
	}
	slices.Sort(children)
	return children
}
