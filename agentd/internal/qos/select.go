package qos

import (
	"cmp"
	"slices"
)

// coverSlack absorbs float error in sums of shares: a set that covers
// what must be freed to within it covers it.
const coverSlack = 1e-9

// candidate is a task that may be killed and what its death takes off the
// reading being corrected (cores, MiB, percent points: one unit per call).
type candidate struct {
	task  Task
	share float64
}

// youngestFirst orders tasks youngest first; container ids break ties so
// that the choice does not depend on the agent's map order.
func youngestFirst(a, b Task) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ContainerID, b.ContainerID)
}

// candidates are the tasks keep accepts that would free something by
// share, youngest first.
func candidates(tasks []Task, keep func(Task) bool, share func(Task) float64) []candidate {
	var out []candidate
	for _, task := range tasks {
		if !keep(task) {
			continue
		}
		if s := share(task); s > 0 {
			out = append(out, candidate{task: task, share: s})
		}
	}
	slices.SortFunc(out, func(a, b candidate) int { return youngestFirst(a.task, b.task) })
	return out
}

// fewestYoungest picks from cands (youngest first) the fewest whose shares
// add up to need; among sets that few, the youngest (the one that, compared
// task by task from the youngest, holds the younger task first). With no
// such set it returns them all and covered false. Since no smaller set
// covers need, no task in the set could be spared.
func fewestYoungest(cands []candidate, need float64) (picked []candidate, covered bool) {
	if need <= 0 {
		return nil, true
	}
	// Indices by share, largest first.
	largest := make([]int, len(cands))
	for i := range largest {
		largest[i] = i
	}
	slices.SortStableFunc(largest, func(a, b int) int { return cmp.Compare(cands[b].share, cands[a].share) })
	// The fewest: as many as the largest shares need.
	fewest, sum := 0, 0.0
	for fewest < len(largest) && sum < need-coverSlack {
		sum += cands[largest[fewest]].share
		fewest++
	}
	if sum < need-coverSlack {
		return cands, false
	}
	// The youngest set of that size: take each task, youngest first, when
	// the largest of the older ones can still complete the set.
	sum = 0
	for i, c := range cands {
		left := fewest - len(picked) - 1
		if left < 0 {
			break
		}
		if sum+c.share+largestAfter(cands, largest, i, left) >= need-coverSlack {
			picked = append(picked, c)
			sum += c.share
		}
	}
	return picked, true
}

// largestAfter adds the n largest shares of the candidates older than
// cands[i], going down largest (cands' indices by share, largest first).
func largestAfter(cands []candidate, largest []int, i, n int) float64 {
	sum := 0.0
	for _, j := range largest {
		if n == 0 {
			break
		}
		if j > i {
			sum += cands[j].share
			n--
		}
	}
	return sum
}

// pickRevocable picks revocable tasks to free need by share, tier by tier:
// throttleable tasks (on usage slack, the room the node never promised)
// before other revocable ones (on lent reservations). A tier that cannot
// cover what is left goes whole. It returns the picks and what is still
// left to free.
func pickRevocable(tasks []Task, skip func(Task) bool, share func(Task) float64, need float64) ([]candidate, float64) {
	var picked []candidate
	for _, throttleable := range []bool{true, false} {
		if need <= coverSlack {
			break
		}
		tier := candidates(tasks, func(t Task) bool {
			return t.Revocable && t.Throttleable == throttleable && !skip(t)
		}, share)
		chosen, _ := fewestYoungest(tier, need)
		for _, c := range chosen {
			picked = append(picked, c)
			need -= c.share
		}
	}
	return picked, max(need, 0)
}

// memoryOverRequest is how far a task's memory use is above its request,
// in MiB (0 when within).
func memoryOverRequest(t Task) float64 {
	return max(t.Used["mem"]-t.Requests["mem"], 0)
}

// pickAboveRequest picks non-revocable tasks above their memory request,
// furthest above first (the youngest among equals), until their memory
// use covers need. A task within its request is never picked: that memory
// was promised to it.
func pickAboveRequest(tasks []Task, skip func(Task) bool, need float64) ([]candidate, float64) {
	tier := candidates(tasks, func(t Task) bool {
		return !t.Revocable && memoryOverRequest(t) > 0 && !skip(t)
	}, memoryShare)
	slices.SortStableFunc(tier, func(a, b candidate) int {
		return cmp.Compare(memoryOverRequest(b.task), memoryOverRequest(a.task))
	})
	var picked []candidate
	for _, c := range tier {
		if need <= coverSlack {
			break
		}
		picked = append(picked, c)
		need -= c.share
	}
	return picked, max(need, 0)
}

func memoryShare(t Task) float64 { return t.Used["mem"] }
func cpuShare(t Task) float64    { return t.Used["cpus"] }
