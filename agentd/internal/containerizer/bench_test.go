package containerizer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/agentd/internal/cgroups"
)

// Run both in one go, so that they see the same machine:
//
//	go test -run '^$' -bench 'Launch|RuncRun' -benchtime 200x ./agentd/internal/containerizer/
//
// BenchmarkLaunch times Launch: from the call to the moment the task's
// process runs in its cgroup (the monitor's report); BenchmarkRuncRun times
// `runc run --detach` of a busybox container to the same moment. Every
// container stays alive until the end, so the last launches happen next to
// b.N live ones, and BenchmarkLaunch reports what its b.N monitors cost in
// memory (smaps_rollup).

// ALLOT_BENCH_AGENTD=/path/to/agentd runs the real agentd binary as the
// monitor ("agentd monitor") instead of the test binary, for its figures.
func BenchmarkLaunch(b *testing.B) {
	var opts []harnessOption
	if agentd := os.Getenv("ALLOT_BENCH_AGENTD"); agentd != "" {
		opts = append(opts, func(c *Config) { c.MonitorCommand = []string{agentd, "monitor"} })
	}
	h := newHarness(b, opts...)
	spec := LaunchSpec{
		Resources:          cgroups.Spec{CPUShares: 102, MemorySoftBytes: 16 * mib, MemoryLimitBytes: 32 * mib},
		MemoryRequestBytes: 16 * mib,
		Argv:               []string{"/bin/sleep", "1000"},
		Env:                []string{"PATH=/usr/bin:/bin"},
	}
	var took []time.Duration
	var monitors []int
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		spec.ContainerID = ids[i]
		begin := time.Now()
		c, err := h.ctz.Launch(spec)
		took = append(took, time.Since(begin))
		if err != nil {
			b.Fatal(err)
		}
		monitors = append(monitors, c.MonitorPid)
	}
	b.StopTimer()
	reportLatencies(b, took)
	var rss, pss, private int64
	for _, pid := range monitors {
		m, err := smapsRollup(pid)
		if err != nil {
			b.Fatal(err)
		}
		rss, pss, private = rss+m["Rss:"], pss+m["Pss:"], private+m["Private_Dirty:"]+m["Private_Clean:"]
	}
	n := float64(len(monitors))
	b.ReportMetric(float64(rss)/n, "monitor-rss-KiB")
	b.ReportMetric(float64(pss)/n, "monitor-pss-KiB")
	b.ReportMetric(float64(private)/n, "monitor-private-KiB")
	b.ReportMetric(float64(pss)/1024, "monitors-pss-MiB-total")
	for _, id := range ids {
		if err := h.ctz.Kill(id, 0); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		h.waitExit(id)
	}
}

func reportLatencies(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	at := func(q float64) float64 {
		return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// smapsRollup is a process's /proc/<pid>/smaps_rollup, in KiB by field
// ("Rss:", "Pss:", "Private_Dirty:", …).
func smapsRollup(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fields := map[string]int64{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		parts := strings.Fields(lines.Text())
		if len(parts) == 3 && parts[2] == "kB" {
			fields[parts[0]], _ = strconv.ParseInt(parts[1], 10, 64)
		}
	}
	return fields, lines.Err()
}

// BenchmarkRuncRun is the anchor: runc (Debian's runc and busybox-static)
// starting a trivial container, `runc run --detach` until the container's
// process was started.
func BenchmarkRuncRun(b *testing.B) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		b.Skip("the anchor needs runc and busybox-static: apt-get install -y runc busybox-static")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		b.Skip("the anchor needs busybox-static: apt-get install -y busybox-static")
	}
	if os.Geteuid() != 0 {
		b.Skip("runc run needs root")
	}
	bundle, state := b.TempDir(), b.TempDir()
	rootfs := filepath.Join(bundle, "rootfs", "bin")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "busybox"), data, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, tool := range []string{"true", "sleep", "sh"} {
		if err := os.Symlink("busybox", filepath.Join(rootfs, tool)); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		b.Fatalf("runc spec: %v: %s", err, out)
	}
	configPath := filepath.Join(bundle, "config.json")
	var config map[string]any
	data, err = os.ReadFile(configPath)
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(data, &config); err != nil {
		b.Fatal(err)
	}
	process := config["process"].(map[string]any)
	process["args"] = []string{"/bin/sleep", "1000"}
	process["terminal"] = false
	if data, err = json.Marshal(config); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(configPath, data, 0o644); err != nil {
		b.Fatal(err)
	}

	var took []time.Duration
	var ids []string
	defer func() {
		for _, id := range ids {
			if out, err := exec.Command(runc, "--root", state, "delete", "-f", id).CombinedOutput(); err != nil {
				b.Errorf("runc delete %s: %v: %s", id, err, out)
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("allot-bench-%d-%d", os.Getpid(), i)
		// Without a terminal, runc hands its own stdio to the container's
		// process: a pipe here would stay open as long as the container
		// runs, so its errors go to a file.
		errFile, err := os.Create(filepath.Join(state, "stderr"))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(runc, "--root", state, "run", "--detach", "--bundle", bundle, id)
		cmd.Stderr = errFile
		begin := time.Now()
		err = cmd.Run()
		took = append(took, time.Since(begin))
		errFile.Close()
		if err != nil {
			out, _ := os.ReadFile(errFile.Name())
			b.Fatalf("runc run: %v: %s", err, out)
		}
		ids = append(ids, id)
	}
	b.StopTimer()
	reportLatencies(b, took)
}
