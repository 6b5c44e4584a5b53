package runner

import (
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// PairRow names the summary row of overlapping pairs.
const PairRow = "two at once"

// Row is one kind of fault over several runs: the fault matrix's row.
type Row struct {
	Name string // the nemesis, or PairRow
	// Runs counts the runs with this fault; Linearizable those of them
	// whose whole history was linearizable.
	Runs, Linearizable int
	// Faults counts the faults; Overlapped those that came in a pair
	// (their figures go to the PairRow, not this one).
	Faults, Overlapped int
	// LostWrites counts the acknowledged writes lost that were in flight
	// while this fault was in place (from the injection to the recovery).
	LostWrites int
	// CutOffReads counts the linearizable reads its cut-off servers
	// answered while cut off.
	CutOffReads int
	// The figures of the faults that came alone (for PairRow: of the pairs,
	// from the first injection, to the recovery after the last heal).
	FirstWrite, LongestGap, Recovery []time.Duration
}

// Summary gathers the rows of several runs.
type Summary struct {
	rows map[string]*Row
}

func (s *Summary) row(name string) *Row {
	if s.rows == nil {
		s.rows = map[string]*Row{}
	}
	r, ok := s.rows[name]
	if !ok {
		r = &Row{Name: name}
		s.rows[name] = r
	}
	return r
}

// Add counts one run's faults. A run that could not be checked (no
// history verdict) counts as not linearizable.
func (s *Summary) Add(rep *Report) {
	linearizable := len(rep.Check.Keys) > 0 && rep.Check.Linearizable() == porcupine.Ok
	seen := map[string]bool{}
	pairs := map[int][]FaultReport{}
	for _, f := range rep.Faults {
		r := s.row(f.Nemesis)
		if !seen[f.Nemesis] {
			seen[f.Nemesis] = true
			r.Runs++
			if linearizable {
				r.Linearizable++
			}
		}
		r.Faults++
		r.CutOffReads += len(f.CutOffReads)
		r.LostWrites += lostDuring(f, rep)
		if f.Pair != 0 {
			r.Overlapped++
			pairs[f.Pair] = append(pairs[f.Pair], f)
			continue
		}
		if f.FirstWrite > 0 {
			r.FirstWrite = append(r.FirstWrite, f.FirstWrite)
		}
		r.LongestGap = append(r.LongestGap, f.LongestGap)
		if f.Recovered > 0 {
			r.Recovery = append(r.Recovery, f.Recovery())
		}
	}
	if len(pairs) == 0 {
		return
	}
	r := s.row(PairRow)
	r.Runs++
	if linearizable {
		r.Linearizable++
	}
	for _, p := range pairs {
		r.Faults++
		first, last := p[0], p[0]
		var gap time.Duration
		for _, f := range p {
			if f.Injected < first.Injected {
				first = f
			}
			if f.Healed > last.Healed {
				last = f
			}
			gap = max(gap, f.LongestGap)
			r.CutOffReads += len(f.CutOffReads)
		}
		if first.FirstWrite > 0 {
			r.FirstWrite = append(r.FirstWrite, first.FirstWrite)
		}
		r.LongestGap = append(r.LongestGap, gap)
		if last.Recovered > 0 {
			r.Recovery = append(r.Recovery, last.Recovery())
		}
	}
}

// lostDuring counts the lost writes that were in flight between f's
// injection and its recovery.
func lostDuring(f FaultReport, rep *Report) int {
	end := f.Recovered
	if end == 0 {
		end = f.Healed
	}
	n := 0
	for _, k := range rep.Check.Keys {
		for _, op := range k.Lost {
			if op.Invoke <= end && op.Complete >= f.Injected {
				n++
			}
		}
	}
	return n
}

// Rows are the rows by name, the pairs last.
func (s *Summary) Rows() []Row {
	var rows []Row
	for name, r := range s.rows {
		if name != PairRow {
			rows = append(rows, *r)
		}
	}
	slices.SortFunc(rows, func(a, b Row) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	if r, ok := s.rows[PairRow]; ok {
		rows = append(rows, *r)
	}
	for _, r := range rows {
		slices.Sort(r.FirstWrite)
		slices.Sort(r.LongestGap)
		slices.Sort(r.Recovery)
	}
	return rows
}

// Percentile of sorted d, nearest rank; 0 for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}
