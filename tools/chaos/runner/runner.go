// Package runner runs one chaos run: a real masterd cluster, concurrent
// clients, faults injected and healed, then the checks (linearizability,
// lost writes, convergence) and the figures of every fault.
package runner

import (
	"context"
	"encoding/json"
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
	// Combined overlaps faults: sometimes a second fault of another kind
	// comes while the first is in place (at most two at a time), and the
	// two are healed in a random order. Without it, one fault at a time.
	Combined bool
	Seed     int64
	// TmpfsSize is each server's tmpfs data dir when a disk-full nemesis
	// is chosen (0: DefaultTmpfsSize).
	TmpfsSize int64
	// Dir holds the run's cluster (data dirs, logs) and history; Run
	// removes it after a passing run unless Keep is set.
	Dir  string
	Keep bool
	// CheckTimeout bounds porcupine's search per key (0: five minutes).
	CheckTimeout time.Duration
	Log          hclog.Logger
}

// DefaultTmpfsSize is each server's data dir with a disk-full nemesis: a
// five-minute run of five clients writes a few MiB of raft.db and
// snapshots (the run logs the most a data dir held), so the run's own
// writes never fill it; the nemesis fills what is left.
const DefaultTmpfsSize = 64 << 20

// FaultReport is one injected fault and what the clients saw.
type FaultReport struct {
	Nemesis  string // the nemesis's name, e.g. "partition-leader"
	Fault    string
	Injected time.Duration // since the run's start, once the fault is in place
	// HealStarted is when its Heal was called, Healed when it returned.
	HealStarted time.Duration
	Healed      time.Duration
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
	// Pair numbers the overlapping pairs of a run (1, 2, …): the two
	// faults of a pair share it; 0 for a fault alone.
	Pair int `json:",omitempty"`
	// CutOff names the servers the fault cut off from any majority (a
	// partition's CutOff, taken when it was injected).
	CutOff []string `json:",omitempty"`
	// CutOffReads are the linearizable reads a cut-off server answered
	// (200, or 404 for an absent key) between the cut and the heal: each
	// is a violation, as that server could confirm nothing with a quorum.
	CutOffReads []history.Op `json:",omitempty"`
	Err         string       `json:",omitempty"`

	cutOff []int
}

// Recovery is from the heal to an agreed leader.
func (f FaultReport) Recovery() time.Duration { return f.Recovered - f.Healed }

// Report is a run's outcome.
type Report struct {
	Seed      int64
	Dir       string // kept for a failed run (or with Keep), else removed
	Ops       int
	Faults    []FaultReport
	Skipped   []string // second faults of a pair that could not be injected, and why
	Check     checker.Result
	Converged bool
	Diverged  string // what differed between servers, when not converged
	// DataDirMax is the most bytes a server's tmpfs data dir held at the
	// end of the run (0 without tmpfs data dirs).
	DataDirMax int64
}

// OK reports a run with no violation.
func (r *Report) OK() bool { return r.Check.OK() && r.Converged && r.CutOffReads() == 0 }

// CutOffReads counts the linearizable reads cut-off servers answered.
func (r *Report) CutOffReads() int {
	n := 0
	for _, f := range r.Faults {
		n += len(f.CutOffReads)
	}
	return n
}

// Preflight reports why the nemeses cannot run on this machine: partitions
// need network namespaces (root, iproute2), full disks a tmpfs per server
// (root, to mount it).
func Preflight(nemeses []nemesis.Nemesis) error {
	needs := nemesis.NeedsOf(nemeses)
	if needs.Netns {
		if err := netnsSupported(); err != nil {
			return fmt.Errorf("the partition nemeses run servers in network namespaces: %w", err)
		}
	}
	if needs.Tmpfs && geteuid() != 0 {
		return errors.New("the disk-full nemeses mount a tmpfs data dir per server: that needs root")
	}
	return nil
}

// Seams for a test of Preflight on a machine where the checks pass.
var (
	netnsSupported = testcluster.NetnsSupported
	geteuid        = os.Geteuid
)

// Run runs cfg. An error means the run could not be carried out (no
// cluster, no leader); violations are in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.CheckTimeout == 0 {
		// A five-minute history with hundreds of indeterminate writes on one
		// key has taken porcupine more than a minute (seed 502).
		cfg.CheckTimeout = 5 * time.Minute
	}
	if cfg.TmpfsSize == 0 {
		cfg.TmpfsSize = DefaultTmpfsSize
	}
	if err := Preflight(cfg.Nemeses); err != nil {
		return nil, err
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
	needs := nemesis.NeedsOf(cfg.Nemeses)
	clusterCfg := testcluster.Config{
		Binary:  cfg.Binary,
		N:       cfg.Servers,
		BaseDir: filepath.Join(cfg.Dir, "cluster"),
		Logf:    func(f string, a ...any) { cfg.Log.Debug(fmt.Sprintf(f, a...)) },
		Netns:   needs.Netns,
	}
	if needs.Tmpfs {
		clusterCfg.TmpfsDataDir = cfg.TmpfsSize
	}
	cluster, err := testcluster.New(clusterCfg)
	if err != nil {
		keep = true
		return rep, err
	}
	defer stop(cluster)
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

	if needs.Tmpfs {
		rep.DataDirMax = dataDirMax(cluster, cfg.TmpfsSize)
	}
	ops := rec.Ops()
	rep.Ops = len(ops)
	for i := range rep.Faults {
		measure(&rep.Faults[i], ops)
	}
	if err := history.Save(filepath.Join(cfg.Dir, "history.json"), ops); err != nil {
		cfg.Log.Error("save history", "error", err)
	}
	// The faults, their times on the history's clock and what they cut
	// off, next to the history they explain.
	if data, err := json.MarshalIndent(rep.Faults, "", "  "); err == nil {
		if err := os.WriteFile(filepath.Join(cfg.Dir, "faults.json"), data, 0o644); err != nil {
			cfg.Log.Error("save faults", "error", err)
		}
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

// episode is one step of the schedule, drawn before anything is injected so
// that a seed gives the same schedule whatever the cluster does.
type episode struct {
	first, second nemesis.Nemesis // second is nil for a fault alone
	// delay is from the first fault to the second.
	delay time.Duration
	// secondHealedFirst: the second fault is healed before the first.
	secondHealedFirst bool
	// seeds of the rngs each Inject draws its target from, so that what
	// one injection draws does not shift the rest of the schedule.
	firstSeed, secondSeed int64
}

// draw picks the next episode. With cfg.Combined, every other episode on
// average overlaps a second fault of another kind, injected a quarter to
// three quarters of an interval after the first.
func draw(cfg Config, rng *rand.Rand) episode {
	e := episode{first: cfg.Nemeses[rng.Intn(len(cfg.Nemeses))], firstSeed: rng.Int63()}
	if !cfg.Combined || rng.Intn(2) == 0 {
		return e
	}
	var others []nemesis.Nemesis
	for _, n := range cfg.Nemeses {
		if nemesis.Kind(n) != nemesis.Kind(e.first) {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return e
	}
	e.second = others[rng.Intn(len(others))]
	e.delay = cfg.Interval/4 + time.Duration(rng.Int63n(int64(cfg.Interval/2)+1))
	e.secondHealedFirst = rng.Intn(2) == 0
	e.secondSeed = rng.Int63()
	return e
}

// faults injects faults until cfg.Duration is over: a quiet interval, an
// episode (one fault, or two overlapping) that lasts about an interval,
// its heals, and a wait until the cluster agrees on a leader again.
func faults(ctx context.Context, cfg Config, c *testcluster.Cluster, rng *rand.Rand, rec *history.Recorder, rep *Report) error {
	end := rec.Now() + cfg.Duration
	pairs := 0
	for {
		if err := sleep(ctx, cfg.Interval); err != nil {
			return err
		}
		// An episode lasts an interval, an overlapping one up to an
		// interval and a half.
		length := cfg.Interval
		if cfg.Combined {
			length += cfg.Interval / 2
		}
		if rec.Now()+length > end || len(cfg.Nemeses) == 0 {
			return sleep(ctx, max(0, end-rec.Now()))
		}
		e := draw(cfg, rng)
		if e.second != nil {
			pairs++
		}
		if err := runEpisode(ctx, cfg, c, e, pairs, rec, rep); err != nil {
			return err
		}
	}
}

// active is a fault in place and its report, filled as it goes.
type active struct {
	kind   string // nemesis.Kind
	fault  nemesis.Fault
	report FaultReport
}

func inject(ctx context.Context, cfg Config, c *testcluster.Cluster, n nemesis.Nemesis, seed int64, rec *history.Recorder) (*active, error) {
	fault, err := n.Inject(ctx, c, rand.New(rand.NewSource(seed)))
	if err != nil {
		return nil, fmt.Errorf("inject %s: %w", n.Name(), err)
	}
	// Taken once the fault is in place (a killed server has exited, the
	// cut is in every namespace), not before Inject looked for the leader.
	a := &active{kind: nemesis.Kind(n), fault: fault, report: FaultReport{Nemesis: n.Name(), Fault: fault.String(), Injected: rec.Now()}}
	if co, ok := fault.(nemesis.CutOffer); ok {
		a.report.cutOff = co.CutOff()
		for _, i := range a.report.cutOff {
			a.report.CutOff = append(a.report.CutOff, c.ID(i))
		}
	}
	cfg.Log.Info("fault", "fault", fault.String())
	return a, nil
}

// heal heals a, even when the run is cancelled: a stopped, killed or cut
// off server must not outlive it.
func heal(ctx context.Context, cfg Config, a *active, rec *history.Recorder) error {
	a.report.HealStarted = rec.Now()
	err := a.fault.Heal(context.WithoutCancel(ctx))
	a.report.Healed = rec.Now()
	if err != nil {
		a.report.Err = err.Error()
		return err
	}
	cfg.Log.Info("healed", "fault", a.fault.String())
	return nil
}

// runEpisode injects e's faults, heals them and waits for a leader. Every
// fault it injected is healed and reported, whatever fails.
func runEpisode(ctx context.Context, cfg Config, c *testcluster.Cluster, e episode, pair int, rec *history.Recorder, rep *Report) error {
	first, err := inject(ctx, cfg, c, e.first, e.firstSeed, rec)
	if err != nil {
		return err
	}
	faults := []*active{first}
	defer func() {
		for _, a := range faults {
			rep.Faults = append(rep.Faults, a.report)
		}
	}()
	sleepErr := sleep(ctx, e.delay)
	if e.second != nil && sleepErr == nil {
		// The second fault looks for its target in a cluster the first one
		// degraded; when there is none to find (no leader while a majority
		// is cut, paused or full), the episode goes on with the first alone.
		injectCtx, cancel := context.WithTimeout(ctx, 2*cfg.Interval)
		second, err := inject(injectCtx, cfg, c, e.second, e.secondSeed, rec)
		cancel()
		switch {
		case err == nil:
			first.report.Pair, second.report.Pair = pair, pair
			faults = append(faults, second)
		case ctx.Err() != nil:
			sleepErr = ctx.Err()
		default:
			cfg.Log.Info("second fault skipped", "during", first.fault.String(), "error", err)
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s during %s: %v", e.second.Name(), first.fault, err))
		}
	}
	if sleepErr == nil {
		sleepErr = sleep(ctx, first.report.Injected+cfg.Interval-rec.Now())
	}
	order := healOrder(faults, e.secondHealedFirst)
	var healErrs []error
	for k, a := range order {
		if k > 0 && sleepErr == nil {
			sleepErr = sleep(ctx, cfg.Interval/2)
		}
		if err := heal(ctx, cfg, a, rec); err != nil {
			healErrs = append(healErrs, err)
		}
	}
	if err := errors.Join(healErrs...); err != nil {
		return err
	}
	if sleepErr != nil {
		return sleepErr
	}
	err = waitLeader(ctx, c)
	for _, a := range faults {
		a.report.Recovered = rec.Now()
		cfg.Log.Info("recovered", "fault", a.fault.String(), "recovery", a.report.Recovery())
	}
	if err != nil {
		return fmt.Errorf("after %s: %w", first.fault, err)
	}
	return nil
}

// healOrder is the order the faults are healed in: the draw's, except that
// a full disk is freed before a killed server restarts, since restarting a
// server on a full disk would be a third fault, not the pair's.
func healOrder(faults []*active, secondFirst bool) []*active {
	if len(faults) < 2 {
		return faults
	}
	a, b := faults[0], faults[1]
	if secondFirst {
		a, b = b, a
	}
	if a.kind == "kill" && b.kind == "disk" {
		a, b = b, a
	}
	return []*active{a, b}
}

// measure fills the fault's figures from the history: the write
// unavailability, and the linearizable reads its cut-off servers answered.
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
		if op.Kind == history.Read && op.Outcome == history.OK && !op.Final &&
			slices.Contains(f.cutOff, op.Server) &&
			op.Invoke >= f.Injected && op.Complete <= f.HealStarted {
			f.CutOffReads = append(f.CutOffReads, op)
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

// dataDirMax is the most bytes any server's tmpfs data dir holds.
func dataDirMax(c *testcluster.Cluster, size int64) int64 {
	var most int64
	for i := range c.N() {
		if free, err := c.DataDirFree(i); err == nil {
			most = max(most, size-free)
		}
	}
	return most
}

// stop ends the run's cluster with kill -9, its checks done. A graceful
// stop waits on every server's SIGTERM, and a server caught campaigning
// after a partition has been seen to go on with its election for seconds
// after "shutting down" (the cluster's own deadline then covers only the
// first such server), which would hang the program between runs.
func stop(c *testcluster.Cluster) {
	for _, i := range c.Live() {
		c.Kill(i)
	}
	c.Stop()
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
