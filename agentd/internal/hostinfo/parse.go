package hostinfo

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// maxCPUs bounds a CPU list: the kernel's NR_CPUS is at most 8192, and a
// list like "0-4000000000" must not allocate gigabytes.
const maxCPUs = 1 << 16

// ParseCPUList reads a CPU list in the kernel's list format ("0-3,8"), as
// in cpuset.cpus.effective (cgroup v2), cpuset.effective_cpus (v1),
// /sys/devices/system/cpu/online or Cpus_allowed_list of
// /proc/<pid>/status, and returns the CPUs in ascending order, each once.
// An empty list (a cpuset without CPUs) is no error.
func ParseCPUList(r io.Reader) ([]int, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return nil, err
	}
	list := strings.TrimSpace(string(b))
	cpus := []int{}
	if list == "" {
		return cpus, nil
	}
	bad := func(item string) error {
		return fmt.Errorf("cpu list %q: bad item %q: want N or N-M with 0 ≤ N ≤ M < %d", list, item, maxCPUs)
	}
	for _, item := range strings.Split(list, ",") {
		first, last, isRange := strings.Cut(item, "-")
		lo, err := strconv.Atoi(first)
		if err != nil || lo < 0 || lo >= maxCPUs {
			return nil, bad(item)
		}
		hi := lo
		if isRange {
			if hi, err = strconv.Atoi(last); err != nil || hi < lo || hi >= maxCPUs {
				return nil, bad(item)
			}
		}
		for cpu := lo; cpu <= hi; cpu++ {
			cpus = append(cpus, cpu)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// parseCPUsAllowed reads the CPUs a process may run on from its
// /proc/<pid>/status (the Cpus_allowed_list line).
func parseCPUsAllowed(r io.Reader) ([]int, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if list, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			return ParseCPUList(strings.NewReader(list))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no Cpus_allowed_list line")
}

// MemTotalMiB reads MemTotal from /proc/meminfo, in MiB
// ("MemTotal:       24684084 kB"; the kernel writes every size in kB,
// which are KiB).
func MemTotalMiB(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		value, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("bad MemTotal line %q: want \"MemTotal: N kB\"", sc.Text())
		}
		kib, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad MemTotal line %q: want \"MemTotal: N kB\"", sc.Text())
		}
		return float64(kib) / 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no MemTotal line")
}
