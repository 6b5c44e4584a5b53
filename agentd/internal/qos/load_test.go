package qos

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewLoadRejectsBadConfig(t *testing.T) {
	proc := newFakeProc(t)
	proc.loadavg(t, 1, 1)
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"no threshold":     {cfg: Config{}, want: "needs -qos-load-5min or -qos-load-15min"},
		"negative":         {cfg: Config{Load5: -1}, want: "-qos-load-5min -1"},
		"NaN":              {cfg: Config{Load15: nan()}, want: "-qos-load-15min NaN"},
		"no loadavg":       {cfg: Config{Load5: 4, ProcDir: t.TempDir()}, want: "loadavg: no such file"},
		"a broken loadavg": {cfg: Config{Load5: 4, ProcDir: brokenLoadavg(t)}, want: "want at least three"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Kind = KindLoad
			if tc.cfg.ProcDir == "" {
				tc.cfg.ProcDir = string(proc)
			}
			c, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "qos load: ") {
				t.Fatalf("New(%+v) = %v, %v; want an error saying %q", tc.cfg, c, err, tc.want)
			}
		})
	}
}

func brokenLoadavg(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "loadavg"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadCorrections walks the load controller through an overload: it
// kills the fewest revocable tasks, youngest first, that bring the load
// back under the threshold, credits them while the average catches up, and
// kills nothing once under.
func TestLoadCorrections(t *testing.T) {
	proc := newFakeProc(t)
	proc.loadavg(t, 2, 1)
	c, err := New(Config{Kind: KindLoad, Load5: 6, Load15: 4, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != KindLoad {
		t.Errorf("Name() = %q", c.Name())
	}
	tasks := []Task{
		task("regular", 1, false, false, 3, 0),
		task("young", 5, true, true, 0.5, 0),
		task("big", 60, true, true, 2, 0),
		task("mid", 120, true, true, 1.5, 0),
		task("old", 240, true, true, 1, 0),
	}
	round := func(now time.Time, tasks []Task, load5, load15 float64) []Correction {
		t.Helper()
		proc.loadavg(t, load5, load15)
		got, err := c.Corrections(now, Node{Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	if got := round(at, tasks, 5.9, 3.9); got != nil {
		t.Fatalf("under both thresholds: %v, want none", got)
	}
	// 7.9 − 6 = 1.9 cores to free: "big" alone does it.
	got := round(at, tasks, 7.9, 3)
	if !slices.Equal(ids(got), []string{"big"}) || got[0].Message != "qos load: 5-minute load 7.90 over 6" {
		t.Fatalf("5-minute load over: %+v, want big with the reading", got)
	}
	// The average still reads 7.9 a round later, "big" still listed: no
	// more kills, it is accounted for.
	if got := round(at.Add(time.Second), tasks, 7.9, 3); got != nil {
		t.Fatalf("while big is being killed: %v, want none", got)
	}
	// The 15-minute load over: 7.4 − 4 = 3.4, less what big
	// (2 cores for an hour) adds to it, 2·(1 − e^(−1h/15m)) = 1.96: 1.44
	// left, which mid (1.5) covers alone.
	got = round(at.Add(2*time.Second), tasks, 6, 7.4)
	if !slices.Equal(ids(got), []string{"mid"}) || got[0].Message != "qos load: 15-minute load 7.40 over 4" {
		t.Fatalf("15-minute load over: %+v, want mid", got)
	}

	// Both gone; the averages fall as they would.
	left := []Task{tasks[0], tasks[1], tasks[4]}
	if got := round(at.Add(time.Minute), left, 7, 6.5); got != nil {
		t.Fatalf("a minute after the kills, the averages still catching up: %v, want none", got)
	}
	if got := round(at.Add(time.Hour), left, 3, 3.9); got != nil {
		t.Fatalf("an hour later, under: %v, want none", got)
	}
	// Overloaded again an hour later: the old kills no longer count.
	got = round(at.Add(time.Hour+time.Second), left, 6.4, 3)
	if !slices.Equal(ids(got), []string{"young"}) {
		t.Fatalf("overloaded again: %v, want young", ids(got))
	}
}

// TestLoadAllRevocableWhenTheyCannotCover: the load is not theirs to
// cover, but they are all the controller may kill; regular tasks and tasks
// using no cpu are left.
func TestLoadAllRevocableWhenTheyCannotCover(t *testing.T) {
	proc := newFakeProc(t)
	proc.loadavg(t, 20, 20)
	c, err := New(Config{Kind: KindLoad, Load5: 4, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	tasks := []Task{
		task("regular", 1, false, false, 8, 0),
		task("idle", 2, true, true, 0, 512),
		task("slack", 3, true, true, 1, 0),
		task("lent", 4, true, false, 1, 0),
	}
	got, err := c.Corrections(at, Node{Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), []string{"slack", "lent"}) {
		t.Fatalf("corrections %v, want slack then lent", ids(got))
	}
}

// TestLoadReissuesAKillThatDidNotTake: a task still listed long after its
// kill is picked again.
func TestLoadReissuesAKillThatDidNotTake(t *testing.T) {
	proc := newFakeProc(t)
	proc.loadavg(t, 8, 0)
	c, err := New(Config{Kind: KindLoad, Load5: 6, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	tasks := []Task{task("stuck", 5, true, true, 3, 0)}
	for _, now := range []time.Time{at, at.Add(reissueAfter + time.Second)} {
		got, err := c.Corrections(now, Node{Tasks: tasks})
		if err != nil || !slices.Equal(ids(got), []string{"stuck"}) {
			t.Fatalf("at %v: %v, %v; want stuck", now, ids(got), err)
		}
	}
}

func TestLoadReadError(t *testing.T) {
	proc := newFakeProc(t)
	proc.loadavg(t, 1, 1)
	c, err := New(Config{Kind: KindLoad, Load5: 6, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	proc.write(t, "loadavg", "1.0\n")
	got, err := c.Corrections(at, Node{Tasks: []Task{task("a", 1, true, true, 1, 0)}})
	if err == nil || got != nil || !strings.Contains(err.Error(), filepath.Join(string(proc), "loadavg")) {
		t.Fatalf("Corrections = %v, %v; want an error naming the file", got, err)
	}
}
