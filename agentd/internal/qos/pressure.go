package qos

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The time constant of PSI's avg10 and how often the kernel updates it
// (PSI_FREQ).
const (
	avg10Tau   = 10 * time.Second
	psiUpdates = 2 * time.Second
)

const mib = 1 << 20

// psiSource is one PSI file the controller reads.
type psiSource struct {
	label    string // "cpu", "memory", "root cgroup cpu", "root cgroup memory"
	path     string
	resource string // "cpu" or "memory"
}

// pressure is the PSI and root cgroup memory controller.
type pressure struct {
	sources                []psiSource
	cpuSome, cpuFull       float64
	memorySome, memoryFull float64
	memoryFraction         float64
	cpus                   float64

	mu    sync.Mutex
	kills kills
}

func newPressure(cfg Config) (Controller, error) {
	for _, threshold := range []struct {
		flag   string
		v, max float64
	}{
		{"-qos-pressure-cpu-some", cfg.CPUSome, 100},
		{"-qos-pressure-cpu-full", cfg.CPUFull, 100},
		{"-qos-pressure-memory-some", cfg.MemorySome, 100},
		{"-qos-pressure-memory-full", cfg.MemoryFull, 100},
		{"-qos-pressure-memory-fraction", cfg.MemoryFraction, 1},
	} {
		if err := checkThreshold(KindPressure, threshold.flag, threshold.v, threshold.max); err != nil {
			return nil, err
		}
	}
	if cfg.CPUSome == 0 && cfg.CPUFull == 0 && cfg.MemorySome == 0 && cfg.MemoryFull == 0 && cfg.MemoryFraction == 0 {
		return nil, errors.New("qos pressure: every threshold is off (0): set one of -qos-pressure-cpu-some, -cpu-full, -memory-some, -memory-full, -memory-fraction")
	}
	if err := checkCPUs(KindPressure, cfg.CPUs); err != nil {
		return nil, err
	}
	p := &pressure{
		cpuSome: cfg.CPUSome, cpuFull: cfg.CPUFull,
		memorySome: cfg.MemorySome, memoryFull: cfg.MemoryFull,
		memoryFraction: cfg.MemoryFraction,
		cpus:           cfg.CPUs,
		kills:          newKills(psiUpdates, avg10Tau),
	}
	candidates := []psiSource{
		{label: "cpu", path: filepath.Join(cfg.ProcDir, "pressure", "cpu"), resource: "cpu"},
		{label: "memory", path: filepath.Join(cfg.ProcDir, "pressure", "memory"), resource: "memory"},
	}
	if cfg.CgroupDir != "" {
		candidates = append(candidates,
			psiSource{label: "root cgroup cpu", path: filepath.Join(cfg.CgroupDir, "cpu.pressure"), resource: "cpu"},
			psiSource{label: "root cgroup memory", path: filepath.Join(cfg.CgroupDir, "memory.pressure"), resource: "memory"})
	}
	// A file that is absent or cannot be read (a kernel booted with psi=0
	// has /proc/pressure and answers every read with EOPNOTSUPP) is not a
	// source; the controller reads what the kernel has.
	var missing []string
	for _, source := range candidates {
		if _, err := readFile(source.path, parsePSI); err != nil {
			missing = append(missing, err.Error())
			continue
		}
		p.sources = append(p.sources, source)
	}
	if len(p.sources) == 0 {
		return nil, fmt.Errorf("qos pressure: the kernel reports no pressure stall information (PSI needs Linux 4.20 or later built with CONFIG_PSI, not booted with psi=0): %s", strings.Join(missing, "; "))
	}
	return p, nil
}

func (*pressure) Name() string { return KindPressure }

// psiSignal is one avg10 against its threshold.
type psiSignal struct {
	label     string // "memory some"
	reading   float64
	threshold float64
	excess    float64 // the estimate (reading less the credit for recent kills) over the threshold
}

func (s psiSignal) message() string {
	return fmt.Sprintf("qos pressure: %s avg10 %.1f%% over %g%%", s.label, s.reading, s.threshold)
}

func (p *pressure) Corrections(now time.Time, n Node) ([]Correction, error) {
	readings := make([]psi, len(p.sources))
	for i, source := range p.sources {
		r, err := readFile(source.path, parsePSI)
		if err != nil {
			return nil, fmt.Errorf("qos pressure: %w", err)
		}
		readings[i] = r
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kills.observe(now, n.Tasks)

	var out []Correction
	chosen := map[string]bool{}
	skip := func(t Task) bool { return p.kills.pending(t) || chosen[t.ContainerID] }
	choose := func(c candidate, message string, memPSI float64) {
		chosen[c.task.ContainerID] = true
		p.kills.add(now, c.task, memPSI)
		if !c.task.Revocable {
			message += fmt.Sprintf("; the task uses %.0f MiB, %.0f MiB over its memory request of %g MiB",
				c.task.Used["mem"], memoryOverRequest(c.task), c.task.Requests["mem"])
		}
		out = append(out, Correction{ContainerID: c.task.ContainerID, Message: message})
	}

	// Every reading is judged before this round's kills are credited.
	memoryNeed, memoryMessage := p.memoryOverFraction(now, n)
	memoryStall, memoryStalled := p.worstPSI(now, "memory", readings, p.memorySome, p.memoryFull, func(k *kill) float64 { return k.memPSI })
	// A task's share of cpu pressure is its usage over the node's cores.
	cpuStall, cpuStalled := p.worstPSI(now, "cpu", readings, p.cpuSome, p.cpuFull, func(k *kill) float64 { return k.cpus / p.cpus * 100 })

	// Memory first: running out of it kills, running out of cpu slows.
	if memoryNeed > 0 {
		picked, rest := pickRevocable(n.Tasks, skip, memoryShare, memoryNeed)
		above, _ := pickAboveRequest(n.Tasks, func(t Task) bool { return skip(t) || contains(picked, t) }, rest)
		for _, c := range append(picked, above...) {
			choose(c, memoryMessage, 0)
		}
	}
	switch {
	case !memoryStalled:
	case len(out) > 0:
		// The kills for memory in use relieve the stalls too: charge
		// them with it, so later rounds wait to see how much.
		p.kills.byID[out[0].ContainerID].memPSI = memoryStall.excess
	case p.kills.inFlight(now, func(k *kill) bool { return k.memPSI > 0 }):
		// The last kill for stalls has not shown in the average yet.
	default:
		// Stalls do not say how much memory is short: one task a round,
		// and the average shows what its death did.
		picked, _ := pickRevocable(n.Tasks, skip, memoryShare, coverSlack*2)
		if len(picked) == 0 {
			picked, _ = pickAboveRequest(n.Tasks, skip, coverSlack*2)
		}
		if len(picked) > 0 {
			choose(picked[0], memoryStall.message(), memoryStall.excess)
		}
	}

	if cpuStalled {
		need := cpuStall.excess / 100 * p.cpus
		for _, c := range out { // what dies for memory frees its cpu too
			need -= max(p.kills.byID[c.ContainerID].cpus, 0)
		}
		if need > 0 {
			picked, _ := pickRevocable(n.Tasks, skip, cpuShare, need)
			for _, c := range picked {
				choose(c, cpuStall.message(), 0)
			}
		}
	}
	return out, nil
}

// memoryOverFraction is how many MiB the root cgroup's memory in use
// (less what killed tasks still listed hold) is over its threshold, and
// the message that names the reading.
func (p *pressure) memoryOverFraction(now time.Time, n Node) (float64, string) {
	if p.memoryFraction == 0 || n.MemoryLimit <= 0 || n.MemoryUsed < 0 {
		return 0, ""
	}
	used, limit := float64(n.MemoryUsed)/mib, float64(n.MemoryLimit)/mib
	estimate := used - p.kills.residual(now, 0, func(k *kill) float64 { return k.memMiB })
	need := estimate - p.memoryFraction*limit
	if need <= 0 {
		return 0, ""
	}
	return need, fmt.Sprintf("qos pressure: root cgroup memory %.0f MiB of %.0f MiB (%.1f%%) over %g%%",
		used, limit, used/limit*100, p.memoryFraction*100)
}

// worstPSI is the resource's avg10 signal furthest over its threshold,
// judged by the estimate: the reading less what recent kills still account
// for in it.
func (p *pressure) worstPSI(now time.Time, resource string, readings []psi, some, full float64, share func(*kill) float64) (psiSignal, bool) {
	credit := p.kills.residual(now, avg10Tau, share)
	var worst psiSignal
	found := false
	consider := func(label string, reading, threshold float64) {
		if threshold == 0 {
			return
		}
		excess := reading - credit - threshold
		if excess > 0 && (!found || excess > worst.excess) {
			worst, found = psiSignal{label: label, reading: reading, threshold: threshold, excess: excess}, true
		}
	}
	for i, source := range p.sources {
		if source.resource != resource {
			continue
		}
		consider(source.label+" some", readings[i].Some.Avg10, some)
		if readings[i].Full != nil {
			consider(source.label+" full", readings[i].Full.Avg10, full)
		}
	}
	return worst, found
}

func contains(cands []candidate, t Task) bool {
	for _, c := range cands {
		if c.task.ContainerID == t.ContainerID {
			return true
		}
	}
	return false
}
