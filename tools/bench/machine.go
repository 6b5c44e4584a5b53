package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// machineDescription is the table that makes figures comparable across runs.
func machineDescription(workDir string) string {
	var s strings.Builder
	s.WriteString("| machine | |\n|---|---|\n")
	fmt.Fprintf(&s, "| CPUs (nproc) | %d |\n", runtime.NumCPU())
	fmt.Fprintf(&s, "| CPU model | %s |\n", fromFile("/proc/cpuinfo", cpuModel))
	fmt.Fprintf(&s, "| memory | %s |\n", fromFile("/proc/meminfo", memTotal))
	fmt.Fprintf(&s, "| Go | %s %s/%s |\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	// Other work on the machine skews every figure; say how much there was.
	fmt.Fprintf(&s, "| load average at start (1/5/15 min) | %s |\n", fromFile("/proc/loadavg", loadAverage))
	// Write latency is mostly fsync latency, so the data directories' file
	// system belongs next to the figures.
	fmt.Fprintf(&s, "| data directories | %s on %s |\n", workDir, fromFile("/proc/self/mounts", mountOf(workDir)))
	return s.String()
}

func fromFile(path string, parse func(io.Reader) string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	return parse(f)
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel(r io.Reader) string {
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

// memTotal returns MemTotal of /proc/meminfo in GiB.
func memTotal(r io.Reader) string {
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				break
			}
			return fmt.Sprintf("%.1f GiB", kib/(1<<20))
		}
	}
	return "unknown"
}

// mountOf returns a parser of /proc/self/mounts that names the file system
// type and device of the longest mount point containing path.
func mountOf(path string) func(io.Reader) string {
	return func(r io.Reader) string {
		best, found := "", "unknown"
		scanner := bufio.NewScanner(r)
		for scanner.Scan() {
			fields := strings.Fields(scanner.Text())
			if len(fields) < 3 {
				continue
			}
			device, mountPoint, fsType := fields[0], fields[1], fields[2]
			inside := path == mountPoint || strings.HasPrefix(path, strings.TrimSuffix(mountPoint, "/")+"/")
			if inside && len(mountPoint) >= len(best) {
				best, found = mountPoint, fsType+" ("+device+")"
			}
		}
		return found
	}
}

// loadAverage returns the first three fields of /proc/loadavg.
func loadAverage(r io.Reader) string {
	data, err := io.ReadAll(io.LimitReader(r, 256))
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}
