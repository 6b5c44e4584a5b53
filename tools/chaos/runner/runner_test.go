package runner

import (
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/allot/allot/tools/chaos/checker"
	"github.com/allot/allot/tools/chaos/history"
	"github.com/allot/allot/tools/chaos/nemesis"
)

func lookup(t *testing.T, list string) []nemesis.Nemesis {
	t.Helper()
	ns, err := nemesis.Lookup(list)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// describe is what a replay must repeat of an episode.
func describe(e episode) string {
	s := e.first.Name()
	if e.second != nil {
		s += " then " + e.second.Name() + " after " + e.delay.String()
		if e.secondHealedFirst {
			s += ", healed first"
		}
	}
	return s
}

func TestCombinedScheduleIsSeededAndOverlapsOnlyOtherKinds(t *testing.T) {
	cfg := Config{Nemeses: lookup(t, "combined"), Combined: true, Interval: 2 * time.Second}
	schedule := func(seed int64) []string {
		rng := rand.New(rand.NewSource(seed))
		var out []string
		for range 200 {
			e := draw(cfg, rng)
			if e.second != nil {
				if nemesis.Kind(e.first) == nemesis.Kind(e.second) {
					t.Fatalf("seed %d: %s overlaps a fault of its own kind", seed, describe(e))
				}
				if e.delay < cfg.Interval/4 || e.delay > 3*cfg.Interval/4 {
					t.Fatalf("seed %d: %s: second fault %s after the first, want within [%s, %s]",
						seed, describe(e), e.delay, cfg.Interval/4, 3*cfg.Interval/4)
				}
			}
			out = append(out, describe(e))
		}
		return out
	}
	a, b := schedule(7), schedule(7)
	if !slices.Equal(a, b) {
		t.Fatal("seed 7 drew two different schedules")
	}
	if slices.Equal(a, schedule(8)) {
		t.Fatal("seeds 7 and 8 drew the same schedule")
	}
	pairs, secondFirst, kinds := 0, 0, map[string]bool{}
	for _, s := range a {
		if strings.Contains(s, " then ") {
			pairs++
		}
		if strings.HasSuffix(s, "healed first") {
			secondFirst++
		}
		kinds[strings.SplitN(s, "-", 2)[0]] = true
	}
	// 200 draws at one chance in two: far from both ends.
	if pairs < 50 || pairs > 150 {
		t.Errorf("%d of 200 episodes overlap two faults, want about half", pairs)
	}
	if secondFirst == 0 || secondFirst == pairs {
		t.Errorf("of %d pairs, %d heal the second fault first: want both orders", pairs, secondFirst)
	}
	for _, k := range []string{"kill", "pause", "partition", "disk"} {
		if !kinds[k] {
			t.Errorf("no %s fault in 200 episodes: %v", k, kinds)
		}
	}
}

func TestOneAtATimeNeverOverlaps(t *testing.T) {
	cfg := Config{Nemeses: lookup(t, "combined"), Interval: 2 * time.Second}
	rng := rand.New(rand.NewSource(1))
	for range 200 {
		if e := draw(cfg, rng); e.second != nil {
			t.Fatalf("without Combined: %s", describe(e))
		}
	}
}

func TestHealOrderFreesADiskBeforeARestart(t *testing.T) {
	kill := &active{kind: "kill"}
	disk := &active{kind: "disk"}
	pause := &active{kind: "pause"}
	for _, secondFirst := range []bool{false, true} {
		if got := healOrder([]*active{kill, disk}, secondFirst); got[0] != disk {
			t.Errorf("kill then disk (second healed first: %v): the killed server restarts on a full disk", secondFirst)
		}
		if got := healOrder([]*active{disk, kill}, secondFirst); got[0] != disk {
			t.Errorf("disk then kill (second healed first: %v): the killed server restarts on a full disk", secondFirst)
		}
	}
	if got := healOrder([]*active{kill, pause}, true); got[0] != pause || got[1] != kill {
		t.Error("kill then pause, second healed first: the order was not kept")
	}
	if got := healOrder([]*active{kill, pause}, false); got[0] != kill || got[1] != pause {
		t.Error("kill then pause: the order was not kept")
	}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestMeasureCountsLinearizableReadsServedCutOff(t *testing.T) {
	f := FaultReport{Nemesis: "partition-leader", Injected: ms(1000), HealStarted: ms(3000), Healed: ms(3010), Recovered: ms(3500), cutOff: []int{0}}
	read := func(server int, invoke, complete int, outcome history.Outcome) history.Op {
		return history.Op{Server: server, Kind: history.Read, Invoke: ms(invoke), Complete: ms(complete), Outcome: outcome}
	}
	ops := []history.Op{
		read(0, 1100, 1102, history.OK),   // served while cut off: counted
		read(0, 1200, 1300, history.Fail), // refused (503): right
		read(1, 1200, 1300, history.OK),   // the majority's side: right
		read(0, 900, 1100, history.OK),    // sent before the cut
		read(0, 2900, 3100, history.OK),   // answered after the heal began
		{Server: 0, Kind: history.Write, Value: 5, Invoke: ms(1500), Complete: ms(1600), Outcome: history.Unknown},
		{Server: 1, Kind: history.Write, Value: 6, Invoke: ms(1500), Complete: ms(2200), Outcome: history.OK},
		{Server: 0, Kind: history.Read, Final: true, Invoke: ms(2000), Complete: ms(2001), Outcome: history.OK},
	}
	measure(&f, ops)
	if len(f.CutOffReads) != 1 || f.CutOffReads[0].Invoke != ms(1100) {
		t.Fatalf("cut-off reads %v, want the one invoked at 1.1s", f.CutOffReads)
	}
	if f.FirstWrite != ms(1200) {
		t.Errorf("first write after %s, want 1.2s", f.FirstWrite)
	}
	if f.LongestGap != ms(1300) { // from the last ack (2.2 s) to the recovery (3.5 s)
		t.Errorf("longest no-write window %s, want 1.3s", f.LongestGap)
	}
	rep := &Report{Check: checker.Result{Keys: []checker.KeyResult{{}}}, Converged: true, Faults: []FaultReport{f}}
	if rep.OK() {
		t.Error("a run with a read served by a cut-off server is OK")
	}
}

func TestSummaryRowsPerKindAndPairs(t *testing.T) {
	lost := history.Op{Kind: history.Write, Value: 9, Invoke: ms(10_100), Complete: ms(10_200), Outcome: history.OK}
	rep := &Report{
		Faults: []FaultReport{
			{Nemesis: "kill-leader", Injected: ms(1000), Healed: ms(3000), Recovered: ms(3200), FirstWrite: ms(1100), LongestGap: ms(1100)},
			{Nemesis: "kill-leader", Injected: ms(5000), Healed: ms(7000), Recovered: ms(7400), FirstWrite: ms(1500), LongestGap: ms(1500)},
			{Nemesis: "partition-leader", Pair: 1, Injected: ms(10_000), Healed: ms(12_000), Recovered: ms(13_500), FirstWrite: ms(900), LongestGap: ms(900),
				CutOffReads: []history.Op{{Kind: history.Read}}},
			{Nemesis: "pause", Pair: 1, Injected: ms(10_700), Healed: ms(13_000), Recovered: ms(13_500), FirstWrite: ms(2000), LongestGap: ms(2500)},
		},
		Check: checker.Result{Keys: []checker.KeyResult{{Key: "chaos-0", Linearizable: porcupine.Illegal, Lost: []history.Op{lost}}}},
	}
	var s Summary
	s.Add(rep)
	s.Add(&Report{Faults: rep.Faults[:1], Check: checker.Result{Keys: []checker.KeyResult{{Linearizable: porcupine.Ok}}}})
	rows := s.Rows()
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	if want := []string{"kill-leader", "partition-leader", "pause", PairRow}; !slices.Equal(names, want) {
		t.Fatalf("rows %v, want %v", names, want)
	}
	kill, part, pair := rows[0], rows[1], rows[3]
	if kill.Runs != 2 || kill.Faults != 3 || kill.Overlapped != 0 || kill.LostWrites != 0 {
		t.Errorf("kill-leader: %+v", kill)
	}
	if want := []time.Duration{ms(1100), ms(1100), ms(1500)}; !slices.Equal(kill.FirstWrite, want) {
		t.Errorf("kill-leader first writes %v, want %v", kill.FirstWrite, want)
	}
	if want := []time.Duration{ms(200), ms(200), ms(400)}; !slices.Equal(kill.Recovery, want) {
		t.Errorf("kill-leader recoveries %v, want %v", kill.Recovery, want)
	}
	if kill.Linearizable != 1 {
		t.Errorf("kill-leader: %d runs linearizable, want 1 (the second run's history is, the first's is not)", kill.Linearizable)
	}
	var unchecked Summary
	unchecked.Add(&Report{Faults: rep.Faults[:1]})
	if r := unchecked.Rows()[0]; r.Runs != 1 || r.Linearizable != 0 {
		t.Errorf("a run whose history was not checked counts as linearizable: %+v", r)
	}
	if part.Overlapped != 1 || len(part.FirstWrite) != 0 || part.LostWrites != 1 || part.CutOffReads != 1 {
		t.Errorf("partition-leader (in a pair, a lost write and a cut-off read in its window): %+v", part)
	}
	if pair.Faults != 1 || pair.CutOffReads != 1 {
		t.Errorf("pairs: %+v", pair)
	}
	if !slices.Equal(pair.FirstWrite, []time.Duration{ms(900)}) || !slices.Equal(pair.LongestGap, []time.Duration{ms(2500)}) ||
		!slices.Equal(pair.Recovery, []time.Duration{ms(500)}) {
		t.Errorf("pair figures: first write %v, longest gap %v, recovery %v; want 0.9s, 2.5s, 0.5s (from the last heal)",
			pair.FirstWrite, pair.LongestGap, pair.Recovery)
	}
}

func TestPreflightSaysWhatIsMissing(t *testing.T) {
	defer func(n func() error, e func() int) { netnsSupported, geteuid = n, e }(netnsSupported, geteuid)
	netnsSupported = func() error { return errors.New("network namespaces need root (ip netns add)") }
	geteuid = func() int { return 1000 }
	if err := Preflight(lookup(t, "kill-leader,pause")); err != nil {
		t.Errorf("kill and pause need nothing: %v", err)
	}
	if err := Preflight(lookup(t, "partition-bridge")); err == nil || !strings.Contains(err.Error(), "need root") {
		t.Errorf("partition without root: %v", err)
	}
	if err := Preflight(lookup(t, "disk-full-follower")); err == nil || !strings.Contains(err.Error(), "needs root") {
		t.Errorf("disk-full without root: %v", err)
	}
	if err := Preflight(lookup(t, "combined")); err == nil {
		t.Error("combined without root: no error")
	}
	if needs := nemesis.NeedsOf(lookup(t, "combined")); !needs.Netns || !needs.Tmpfs {
		t.Errorf("combined needs %+v, want namespaces and tmpfs", needs)
	}
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(i+1) * time.Millisecond
	}
	if got := Percentile(d, 0.5); got != 50*time.Millisecond {
		t.Errorf("p50 = %s, want 50ms", got)
	}
	if got := Percentile(d, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 = %s, want 99ms", got)
	}
	if got := Percentile(d[:1], 0.99); got != time.Millisecond {
		t.Errorf("p99 of one = %s, want 1ms", got)
	}
	if got := Percentile(nil, 0.99); got != 0 {
		t.Errorf("p99 of none = %s, want 0", got)
	}
}
