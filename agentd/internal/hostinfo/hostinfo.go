//go:build linux

// Package hostinfo detects the resources agentd offers when -resources
// does not name them: the CPUs it may run on, the memory of the machine
// less a reserve for the system, and the size of its work dir's file
// system.
package hostinfo

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/allot/allot/masterd/api"
	"golang.org/x/sys/unix"
)

const bytesPerMiB = 1 << 20

// Detect returns {"cpus", "mem", "disk"} for this host, rounded to the
// 0.001 every resource value is kept at (api.RoundScalar):
//
//   - cpus: the CPUs this process may run on (sched_getaffinity(2)), which
//     honours the cpuset it was started in (taskset, a container's
//     --cpuset-cpus, cpuset.cpus of its cgroup), not the CPUs the
//     machine has;
//   - mem: MemTotal of /proc/meminfo in MiB, less memReserveMiB for the
//     system and agentd itself; an error when nothing is left;
//   - disk: the total size of the file system that holds workDir, in whole
//     MiB (task sandboxes live there).
func Detect(workDir string, memReserveMiB float64) (api.Resources, error) {
	if math.IsNaN(memReserveMiB) || math.IsInf(memReserveMiB, 0) || memReserveMiB < 0 {
		return nil, fmt.Errorf("memory reserve %v MiB: want a finite number ≥ 0", memReserveMiB)
	}
	cpus, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	memTotal, err := memTotalMiB()
	if err != nil {
		return nil, err
	}
	mem := memTotal - memReserveMiB
	if api.RoundScalar(mem) <= 0 {
		return nil, fmt.Errorf("memory reserve %v MiB leaves nothing of the %v MiB of MemTotal", memReserveMiB, api.RoundScalar(memTotal))
	}
	disk, err := fileSystemMiB(workDir)
	if err != nil {
		return nil, err
	}
	return api.Resources{
		"cpus": api.RoundScalar(float64(cpus)),
		"mem":  api.RoundScalar(mem),
		"disk": disk,
	}, nil
}

// allowedCPUs counts the CPUs in this process's affinity mask. The mask
// holds 1024 CPUs; on a larger machine the kernel refuses it with EINVAL,
// and the list in /proc/self/status, which has no such bound, counts.
func allowedCPUs() (int, error) {
	var set unix.CPUSet
	err := unix.SchedGetaffinity(0, &set)
	if err == nil {
		return set.Count(), nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return 0, fmt.Errorf("cpus: sched_getaffinity: %w", err)
	}
	f, openErr := os.Open("/proc/self/status")
	if openErr != nil {
		return 0, fmt.Errorf("cpus: sched_getaffinity: %w; %w", err, openErr)
	}
	defer f.Close()
	cpus, parseErr := parseCPUsAllowed(f)
	if parseErr != nil {
		return 0, fmt.Errorf("cpus: sched_getaffinity: %w; /proc/self/status: %w", err, parseErr)
	}
	return len(cpus), nil
}

func memTotalMiB() (float64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("mem: %w", err)
	}
	defer f.Close()
	total, err := MemTotalMiB(f)
	if err != nil {
		return 0, fmt.Errorf("mem: /proc/meminfo: %w", err)
	}
	return total, nil
}

// fileSystemMiB is the total size of the file system holding dir, rounded
// down to whole MiB. Blocks are counted in units of the fragment size
// (f_frsize), as df does; f_bsize is the preferred I/O size and may
// differ.
func fileSystemMiB(dir string) (float64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("disk: statfs %s: %w", dir, err)
	}
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return math.Floor(float64(st.Blocks) * float64(unit) / bytesPerMiB), nil
}
