package qos

import (
	"math"
	"time"
)

// reissueAfter is how long a killed task may stay listed before the
// controller forgets the kill: the agent failed to kill it, and it may be
// picked (and named) again.
const reissueAfter = time.Minute

// kill is a correction the controller issued, remembered so that later
// rounds credit what it takes off averages that have not caught up yet.
type kill struct {
	startedAt time.Time // the task's start: a young task has added little to an average
	killedAt  time.Time
	goneAt    time.Time // the first round the task was no longer listed; zero while listed
	cpus      float64   // cores the task used
	memMiB    float64   // MiB the task used
	memPSI    float64   // memory PSI points (percent) the kill was charged with
}

// kills are a controller's recent kills by container id.
type kills struct {
	byID map[string]*kill
	// settle is how long an average takes to show a change at all: the
	// kernel updates loadavg every 5 s and PSI averages every 2 s.
	settle time.Duration
	// longestTau is the slowest average the controller reads.
	longestTau time.Duration
}

func newKills(settle, longestTau time.Duration) kills {
	return kills{byID: map[string]*kill{}, settle: settle, longestTau: longestTau}
}

// observe notes which killed tasks are gone and forgets the kills that no
// longer matter: long gone (their share has decayed to nothing), or never
// carried out.
func (k *kills) observe(now time.Time, tasks []Task) {
	listed := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		listed[t.ContainerID] = true
	}
	for id, rec := range k.byID {
		switch {
		case listed[id] && now.Sub(rec.killedAt) > reissueAfter:
			delete(k.byID, id)
		case listed[id]:
		case rec.goneAt.IsZero():
			rec.goneAt = now
		case now.Sub(rec.goneAt) > k.settle+7*k.longestTau: // e^-7 < 0.1%
			delete(k.byID, id)
		}
	}
}

// inFlight reports whether a kill that match accepts is not yet reflected
// in the averages: its task is listed, or gone for less than settle.
func (k *kills) inFlight(now time.Time, match func(*kill) bool) bool {
	for _, rec := range k.byID {
		if match(rec) && (rec.goneAt.IsZero() || now.Sub(rec.goneAt) < k.settle) {
			return true
		}
	}
	return false
}

func (k *kills) pending(t Task) bool { return k.byID[t.ContainerID] != nil }

func (k *kills) add(now time.Time, t Task, memPSI float64) {
	k.byID[t.ContainerID] = &kill{
		startedAt: t.StartedAt,
		killedAt:  now,
		cpus:      max(cpuShare(t), 0),
		memMiB:    max(memoryShare(t), 0),
		memPSI:    memPSI,
	}
}

// residual is how much of an average with time constant tau the recent
// kills still account for, by share: an exponential average of a constant
// input c that ran from s to g holds c·(e^(−(t−g)/τ) − e^(−(t−s)/τ)) of it
// at t. While a killed task is listed, and for settle after, it holds all
// it has added so far, c·(1 − e^(−(t−s)/τ)). With tau 0 (an instant
// reading, such as memory in use, which the agent measures afresh each
// round) a kill counts in full while its task is listed and not at all once
// it is gone.
func (k *kills) residual(now time.Time, tau time.Duration, share func(*kill) float64) float64 {
	sum := 0.0
	for _, rec := range k.byID {
		c := share(rec)
		if c <= 0 || math.IsNaN(c) {
			continue
		}
		if tau == 0 {
			if rec.goneAt.IsZero() {
				sum += c
			}
			continue
		}
		gone := !rec.goneAt.IsZero() && now.Sub(rec.goneAt) >= k.settle
		added := 1 - decay(now.Sub(rec.startedAt), tau)
		if gone {
			added = decay(now.Sub(rec.goneAt.Add(k.settle)), tau) - decay(now.Sub(rec.startedAt), tau)
		}
		sum += c * max(added, 0)
	}
	return sum
}

// decay is e^(−d/τ); a negative d (a start in the future) is no decay.
func decay(d, tau time.Duration) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp(-d.Seconds() / tau.Seconds())
}
