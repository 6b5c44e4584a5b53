package qos

import (
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"
)

// The time constants of the kernel's load averages and how often it
// updates them (LOAD_FREQ).
const (
	load5Tau    = 5 * time.Minute
	load15Tau   = 15 * time.Minute
	loadUpdates = 5 * time.Second
)

// load is the load average controller.
type load struct {
	path          string
	load5, load15 float64

	mu    sync.Mutex
	kills kills
}

func newLoad(cfg Config) (Controller, error) {
	for _, threshold := range []struct {
		flag string
		v    float64
	}{{"-qos-load-5min", cfg.Load5}, {"-qos-load-15min", cfg.Load15}} {
		if err := checkThreshold(KindLoad, threshold.flag, threshold.v, math.MaxFloat64); err != nil {
			return nil, err
		}
	}
	if cfg.Load5 == 0 && cfg.Load15 == 0 {
		return nil, fmt.Errorf("qos load: needs -qos-load-5min or -qos-load-15min")
	}
	l := &load{path: filepath.Join(cfg.ProcDir, "loadavg"), load5: cfg.Load5, load15: cfg.Load15, kills: newKills(loadUpdates, load15Tau)}
	if _, err := readFile(l.path, parseLoadAvg); err != nil {
		return nil, fmt.Errorf("qos load: %w", err)
	}
	return l, nil
}

func (*load) Name() string { return KindLoad }

func (l *load) Corrections(now time.Time, n Node) ([]Correction, error) {
	reading, err := readFile(l.path, parseLoadAvg)
	if err != nil {
		return nil, fmt.Errorf("qos load: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kills.observe(now, n.Tasks)

	signals := []struct {
		name               string
		reading, threshold float64
		tau                time.Duration
	}{
		{"5-minute", reading.Load5, l.load5, load5Tau},
		{"15-minute", reading.Load15, l.load15, load15Tau},
	}
	need, worst := 0.0, -1
	for i, s := range signals {
		if s.threshold == 0 {
			continue
		}
		// A task's share of the load is its cpu usage: a task keeping c
		// cores busy adds c runnable threads on average.
		estimate := s.reading - l.kills.residual(now, s.tau, func(k *kill) float64 { return k.cpus })
		if excess := estimate - s.threshold; excess > need {
			need, worst = excess, i
		}
	}
	if worst < 0 {
		return nil, nil
	}
	s := signals[worst]
	message := fmt.Sprintf("qos load: %s load %.2f over %g", s.name, s.reading, s.threshold)
	picked, _ := pickRevocable(n.Tasks, l.kills.pending, cpuShare, need)
	var out []Correction
	for _, c := range picked {
		l.kills.add(now, c.task, 0)
		out = append(out, Correction{ContainerID: c.task.ContainerID, Message: message})
	}
	return out, nil
}
