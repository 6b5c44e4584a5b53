// Package runner runs one chaos run: a real masterd cluster, concurrent
// clients, faults injected and healed, then the checks (linearizability,
// lost writes, convergence) and the figures of every fault.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/tools/chaos/checker"
	"github.com/allot/allot/tools/chaos/history"
	"github.com/allot/allot/tools/chaos/nemesis"
	"github.com/allot/allot/tools/chaos/workload"
)

// Config is one run.
type Config struct {
	Binary   string // masterd; "" builds ./masterd of this module
	Servers  int
	Clients  int
	Keys     int
	Duration time.Duration // how long the clients run while faults come and go
	Interval time.Duration // how long each fault lasts, and the quiet time between faults
	Nemeses  []nemesis.Nemesis
	Seed     int64
	// Dir holds the run's cluster (data dirs, logs) and history; Run
	// removes it after a passing run unless Keep is set.
	Dir  string
	Keep bool
	// CheckTimeout bounds porcupine's search per key.
	CheckTimeout time.Duration
	Log          hclog.Logger
}

// FaultReport is one injected fault and what the clients saw.
type FaultReport struct {
	Fault    string
	Injected time.Duration // since the run's start
	Healed   time.Duration
	// Recovered is when every running server named the same leader again
	// after the heal.
	Recovered time.Duration
	// FirstWrite is from the injection to the completion of the first
	// acknowledged write invoked after it: the write unavailability the
	// fault caused (0 if no write invoked after it succeeded).
	FirstWrite time.Duration
	// LongestGap is the longest window between Injected and Recovered with
	// no acknowledged write.
	LongestGap time.Duration
	Err        string `json:",omitempty"`
}

// Recovery is from the heal to an agreed leader.
func (f FaultReport) Recovery() time.Duration { return f.Recovered - f.Healed }

// Report is a run's outcome.
type Report struct {
	Seed      int64
	Dir       string // kept for a failed run (or with Keep), else removed
	Ops       int
	Faults    []FaultReport
	Check     checker.Result
	Converged bool
	Diverged  string // what differed between servers, when not converged
}

// OK reports a run with no violation.
func (r *Report) OK() bool { return r.Check.OK() && r.Converged }

// Run runs cfg. An error means the run could not be carried out (no
// cluster, no leader); violations are in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = time.Minute
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("run dir %s: %w", cfg.Dir, err)
	}
	rep := &Report{Seed: cfg.Seed, Dir: cfg.Dir}
	keep := cfg.Keep
	defer func() {
		if !keep {
			os.RemoveAll(cfg.Dir)
			rep.Dir = ""
		}
	}()
	rng := rand.New(rand.NewSource(cfg.Seed))
	cluster, err := testcluster.New(testcluster.Config{
		Binary:  cfg.Binary,
		N:       cfg.Servers,
		BaseDir: filepath.Join(cfg.Dir, "cluster"),
		Logf:    func(f string, a ...any) { cfg.Log.Debug(fmt.Sprintf(f, a...)) },
	})
	if err != nil {
		keep = true
		return rep, err
	}
	defer cluster.Stop()
	if err := waitLeader(ctx, cluster); err != nil {
		keep = true
		return rep, err
	}

	rec := history.NewRecorder()
	keys := workload.Keys(cfg.Keys)
	values := &workload.Values{}
	stop := make(chan struct{})
	var clients sync.WaitGroup
	for i := range cfg.Clients {
		c := &workload.Client{ID: i, Addrs: cluster.Addresses(), Keys: keys, Rec: rec, Values: values,
			Rng: rand.New(rand.NewSource(rng.Int63()))}
		clients.Add(1)
		go func() { defer clients.Done(); c.Run(stop) }()
	}

	runErr := faults(ctx, cfg, cluster, rng, rec, rep)
	close(stop)
	clients.Wait()
	if runErr == nil {
		runErr = waitLeader(ctx, cluster)
	}
	if runErr == nil {
		runErr = finalReads(ctx, cluster, cfg.Clients, keys, rec, values)
	}
	if runErr == nil {
		rep.Converged, rep.Diverged = converge(ctx, cluster, keys)
	}

	ops := rec.Ops()
	rep.Ops = len(ops)
	for i := range rep.Faults {
		measure(&rep.Faults[i], ops)
	}
	if err := history.Save(filepath.Join(cfg.Dir, "history.json"), ops); err != nil {
		cfg.Log.Error("save history", "error", err)
	}
	if runErr != nil {
		keep = true
		return rep, runErr
	}
	rep.Check = checker.Check(ops, cfg.CheckTimeout)
	if !rep.OK() {
		keep = true
		if files, err := rep.Check.Visualize(cfg.Dir); err != nil {
			cfg.Log.Error("visualize", "error", err)
		} else if len(files) > 0 {
			cfg.Log.Info("linearizability violations drawn", "files", files)
		}
	}
	return rep, nil
}

// faults injects one fault at a time until cfg.Duration is over: a quiet
// interval, a fault that lasts an interval, its heal, and a wait until the
// cluster agrees on a leader again.
func faults(ctx context.Context, cfg Config, c *testcluster.Cluster, rng *rand.Rand, rec *history.Recorder, rep *Report) error {
	end := rec.Now() + cfg.Duration
	for {
		if err := sleep(ctx, cfg.Interval); err != nil {
			return err
		}
		if rec.Now()+cfg.Interval > end || len(cfg.Nemeses) == 0 {
			return sleep(ctx, max(0, end-rec.Now()))
		}
		n := cfg.Nemeses[rng.Intn(len(cfg.Nemeses))]
		fault, err := n.Inject(ctx, c, rng)
		if err != nil {
			return fmt.Errorf("inject %s: %w", n.Name(), err)
		}
		// Taken once the fault is in place (a killed server has exited),
		// not before Inject looked for the leader.
		fr := FaultReport{Fault: fault.String(), Injected: rec.Now()}
		cfg.Log.Info("fault", "fault", fault.String())
		sleepErr := sleep(ctx, cfg.Interval)
		// Heal even when the run is cancelled: a stopped or killed server
		// must not outlive it.
		healErr := fault.Heal(context.WithoutCancel(ctx))
		fr.Healed = rec.Now()
		if healErr != nil {
			fr.Err = healErr.Error()
			rep.Faults = append(rep.Faults, fr)
			return healErr
		}
		if sleepErr != nil {
			rep.Faults = append(rep.Faults, fr)
			return sleepErr
		}
		err = waitLeader(ctx, c)
		fr.Recovered = rec.Now()
		cfg.Log.Info("healed", "fault", fault.String(), "recovery", fr.Recovery())
		rep.Faults = append(rep.Faults, fr)
		if err != nil {
			return fmt.Errorf("after %s: %w", fault, err)
		}
	}
}

// measure fills the fault's figures from the acknowledged writes.
func measure(f *FaultReport, ops []history.Op) {
	last := f.Injected
	end := f.Recovered
	if end == 0 {
		end = f.Healed
	}
	var acks []time.Duration
	for _, op := range ops {
		if op.IsWrite() && op.Outcome == history.OK {
			if f.FirstWrite == 0 && op.Invoke >= f.Injected {
				f.FirstWrite = op.Complete - f.Injected
			}
			acks = append(acks, op.Complete)
		}
	}
	slices.Sort(acks)
	for _, t := range acks {
		if t <= f.Injected {
			continue
		}
		if t > end {
			break
		}
		f.LongestGap = max(f.LongestGap, t-last)
		last = t
	}
	f.LongestGap = max(f.LongestGap, end-last)
}

// waitLeader bounds the wait for an agreed leader: a cluster that cannot
// elect one within a minute is a finding, not something to wait out.
func waitLeader(ctx context.Context, c *testcluster.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := c.WaitLeader(ctx)
	return err
}

// finalReads reads every key from every server once the faults are healed,
// so that the history ends with the state each server serves.
func finalReads(ctx context.Context, c *testcluster.Cluster, id int, keys []string, rec *history.Recorder, values *workload.Values) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	reader := &workload.Client{ID: id, Addrs: c.Addresses(), Keys: keys, Rec: rec, Values: values}
	for _, key := range keys {
		for i := range c.N() {
			if _, err := reader.Final(ctx, key, i); err != nil {
				return err
			}
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errDiverged is wrapped by convergence failures.
var errDiverged = errors.New("servers diverged")
