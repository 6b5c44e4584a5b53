package qos

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestFewestYoungest(t *testing.T) {
	// Shares in cores; the names are youngest first: a is the youngest.
	cands := func(shares ...float64) []candidate {
		out := make([]candidate, len(shares))
		for i, s := range shares {
			out[i] = candidate{task: task(string(rune('a'+i)), i+1, true, true, s, 0), share: s}
		}
		return out
	}
	cases := map[string]struct {
		cands   []candidate
		need    float64
		want    string
		covered bool
	}{
		"nothing to free":                      {cands: cands(1, 1), need: 0, want: "", covered: true},
		"the youngest covers it":               {cands: cands(1, 2, 3), need: 0.5, want: "a", covered: true},
		"fewest before youngest":               {cands: cands(0.5, 0.5, 2), need: 1, want: "c", covered: true},
		"youngest among sets that few":         {cands: cands(0.2, 1, 1, 2), need: 2, want: "d", covered: true},
		"youngest pair among equal pairs":      {cands: cands(0.2, 1, 1, 1), need: 2, want: "bc", covered: true},
		"two needed, the youngest two that do": {cands: cands(0.1, 1, 0.5, 1, 0.6), need: 1.5, want: "bc", covered: true},
		"exactly enough":                       {cands: cands(0.3, 0.3, 0.4), need: 1, want: "abc", covered: true},
		"not enough: all of them":              {cands: cands(0.3, 0.3), need: 1, want: "ab", covered: false},
		"none":                                 {cands: nil, need: 1, want: "", covered: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			picked, covered := fewestYoungest(tc.cands, tc.need)
			got := ""
			for _, c := range picked {
				got += c.task.ContainerID
			}
			if got != tc.want || covered != tc.covered {
				t.Errorf("fewestYoungest(need %v) = %q, covered %v; want %q, %v", tc.need, got, covered, tc.want, tc.covered)
			}
		})
	}
}

// TestFewestYoungestAgainstAllSubsets checks the choice against every
// subset of random task sets: the set covers what must be freed, no smaller
// set does, and it is the youngest of the sets that few that do.
func TestFewestYoungestAgainstAllSubsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for round := range 2000 {
		n := rng.IntN(9)
		cands := make([]candidate, n)
		total := 0.0
		for i := range cands {
			share := float64(rng.IntN(8)+1) / 4 // quarters: ties are common
			cands[i] = candidate{task: task(strconv.Itoa(i), i+1, true, true, share, 0), share: share}
			total += share
		}
		need := rng.Float64() * (total + 1)
		picked, covered := fewestYoungest(cands, need)

		// The best by brute force: fewest members, then the youngest set
		// (smallest indices, compared in order).
		var best []int
		for mask := 0; mask < 1<<n; mask++ {
			var set []int
			sum := 0.0
			for i := range n {
				if mask&(1<<i) != 0 {
					set = append(set, i)
					sum += cands[i].share
				}
			}
			if sum < need-coverSlack {
				continue
			}
			if best == nil || len(set) < len(best) || (len(set) == len(best) && slices.Compare(set, best) < 0) {
				best = set
			}
		}
		var got []int
		for _, c := range picked {
			i, _ := strconv.Atoi(c.task.ContainerID)
			got = append(got, i)
		}
		if best == nil {
			if covered || len(got) != n {
				t.Fatalf("round %d: need %v of %v: picked %v (covered %v), want all %d and not covered", round, need, total, got, covered, n)
			}
			continue
		}
		if !covered || !slices.Equal(got, best) {
			t.Fatalf("round %d: shares %v need %v: picked %v (covered %v), want %v", round, shares(cands), need, got, covered, best)
		}
	}
}

func shares(cands []candidate) []float64 {
	out := make([]float64, len(cands))
	for i, c := range cands {
		out[i] = c.share
	}
	return out
}

func TestPickRevocable(t *testing.T) {
	never := func(Task) bool { return false }
	tasks := []Task{
		task("regular", 1, false, false, 4, 0), // never: not revocable
		task("idle", 2, true, true, 0, 0),      // never: frees no cpu
		task("slack-young", 3, true, true, 0.5, 0),
		task("slack-old", 30, true, true, 1, 0),
		task("lent", 4, true, false, 2, 0), // a lent reservation: after usage slack
	}
	cases := map[string]struct {
		need float64
		skip func(Task) bool
		want []string
		rest float64
	}{
		"the youngest slack task covers it": {need: 0.5, skip: never, want: []string{"slack-young"}},
		"one older slack task, not two":     {need: 0.8, skip: never, want: []string{"slack-old"}},
		"both slack tasks":                  {need: 1.5, skip: never, want: []string{"slack-young", "slack-old"}},
		"then lent reservations":            {need: 2, skip: never, want: []string{"slack-young", "slack-old", "lent"}},
		"all, and some left":                {need: 5, skip: never, want: []string{"slack-young", "slack-old", "lent"}, rest: 1.5},
		"a task being killed is not picked again": {need: 0.5, skip: func(t Task) bool { return t.ContainerID == "slack-young" },
			want: []string{"slack-old"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			picked, rest := pickRevocable(tasks, tc.skip, cpuShare, tc.need)
			var got []string
			for _, c := range picked {
				got = append(got, c.task.ContainerID)
			}
			if !slices.Equal(got, tc.want) || rest != tc.rest {
				t.Errorf("pickRevocable(need %v) = %v, rest %v; want %v, rest %v", tc.need, got, rest, tc.want, tc.rest)
			}
		})
	}
}

func TestPickAboveRequest(t *testing.T) {
	withMem := func(id string, minutes int, revocable bool, request, used float64) Task {
		tk := task(id, minutes, revocable, false, 0.1, used)
		tk.Requests["mem"] = request
		return tk
	}
	tasks := []Task{
		withMem("within", 1, false, 512, 500),        // never: within its request
		withMem("revocable", 2, true, 100, 900),      // never here: revocable tasks are another tier
		withMem("over-100", 3, false, 100, 200),      // 100 over
		withMem("over-300", 50, false, 100, 400),     // 300 over
		withMem("over-100-old", 90, false, 200, 300), // 100 over, older than over-100
	}
	never := func(Task) bool { return false }
	cases := map[string]struct {
		need float64
		want []string
	}{
		"the furthest over, even when smaller would do": {need: 50, want: []string{"over-300"}},
		"then the next, youngest among equals":          {need: 500, want: []string{"over-300", "over-100"}},
		"all above request":                             {need: 5000, want: []string{"over-300", "over-100", "over-100-old"}},
		"nothing needed":                                {need: 0, want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			picked, _ := pickAboveRequest(tasks, never, tc.need)
			var got []string
			for _, c := range picked {
				got = append(got, c.task.ContainerID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("pickAboveRequest(need %v) = %v, want %v", tc.need, got, tc.want)
			}
		})
	}
}

func TestYoungestFirstBreaksTiesByID(t *testing.T) {
	same := at.Add(-time.Minute)
	a, b := Task{ContainerID: "a", StartedAt: same}, Task{ContainerID: "b", StartedAt: same}
	if youngestFirst(a, b) >= 0 || youngestFirst(b, a) <= 0 {
		t.Errorf("equal starts: want a before b")
	}
}

func BenchmarkFewestYoungest(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run("tasks="+strconv.Itoa(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			cands := make([]candidate, n)
			total := 0.0
			for i := range cands {
				share := rng.Float64() * 2
				cands[i] = candidate{task: task(strconv.Itoa(i), i+1, true, true, share, 0), share: share}
				total += share
			}
			b.ReportAllocs()
			for b.Loop() {
				fewestYoungest(cands, total/3)
			}
		})
	}
}
