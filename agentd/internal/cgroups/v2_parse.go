//go:build linux

package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parsers of the cgroup v2 files this package reads. Each takes an
// io.Reader and is tested on fixtures in testdata/v2. One-number files
// (memory.current) and cgroup.procs share v1's parseV1Uint and
// parsePidList: their format is the same in both versions.

// parseFlatKeyed reads a "flat keyed" file (cgroup-v2.rst): one
// "KEY VALUE" pair a line with an unsigned value, like cpu.stat,
// memory.events and cgroup.events.
func parseFlatKeyed(r io.Reader) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("bad line %q: want \"KEY VALUE\"", line)
		}
		v, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad line %q: want an unsigned number", line)
		}
		out[fields[0]] = v
	}
	return out, sc.Err()
}

// parseControllers reads cgroup.controllers or cgroup.subtree_control: the
// names of controllers separated by spaces, on one line.
func parseControllers(r io.Reader) ([]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// parseKernelRelease reads the version of a uname(2) release string such
// as "6.8.0-45-generic" or "5.4.0".
func parseKernelRelease(release string) (major, minor int, err error) {
	majorText, rest, ok := strings.Cut(release, ".")
	if !ok {
		return 0, 0, fmt.Errorf("kernel release %q: want MAJOR.MINOR", release)
	}
	minorText := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorText = rest[:i]
	}
	major, err1 := strconv.Atoi(majorText)
	minor, err2 := strconv.Atoi(minorText)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("kernel release %q: want MAJOR.MINOR", release)
	}
	return major, minor, nil
}
