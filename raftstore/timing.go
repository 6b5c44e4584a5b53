package raftstore

import (
	"fmt"
	"time"
)

// Timing is how quickly the servers of a cluster notice that their leader
// is gone and elect another. Shorter is a faster failover; too short for
// the network (or for a server's pauses) deposes healthy leaders.
type Timing struct {
	// HeartbeatTimeout is how long a follower goes without hearing from
	// the leader before it stands for election. The leader sends
	// heartbeats ten times as often.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes before it
	// starts another election.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader keeps leading without
	// hearing from a quorum; after it, the leader steps down, so a leader
	// cut off from its cluster stops accepting writes.
	LeaderLeaseTimeout time.Duration
}

// DefaultTiming suits servers on one LAN. hashicorp/raft's defaults (1 s,
// 1 s, 500 ms) are what Nomad runs with (its DefaultRaftMultiplier is 1),
// and Consul multiplies them by its raft_multiplier (5 by default, 1 for
// production servers); Consul's own test servers on loopback run at 200 ms,
// 200 ms, 100 ms. allot's servers share a LAN and their messages are small,
// so it takes a quarter of hashicorp/raft's heartbeat and election
// timeouts: a follower notices a killed leader after 250–750 ms, and a new
// one is elected within a second even when the first election is split.
//
// The leader lease is the one value not scaled like the others: it is the
// heartbeat timeout, not half of it as in the above. A leader steps down
// when no quorum has answered it for a lease, and at 125 ms a leader whose
// only live follower was a server just restarted and still catching up (a
// rolling restart) stepped down, for an election more, when that follower
// was busy for a moment on a loaded machine. Reads do not rely on the
// lease (a linearizable read confirms the leadership with a quorum), so a
// longer one costs nothing but a cut-off leader refusing writes a little
// later, when its followers elect another anyway.
var DefaultTiming = Timing{
	HeartbeatTimeout:   250 * time.Millisecond,
	ElectionTimeout:    250 * time.Millisecond,
	LeaderLeaseTimeout: 250 * time.Millisecond,
}

// minTiming is hashicorp/raft's own floor for each timeout; maxTiming
// bounds them so that a unit typo (500s for 500ms) is caught at start
// instead of leaving a dead leader unreplaced for minutes.
const (
	minTiming = 5 * time.Millisecond
	maxTiming = time.Minute
)

// orDefault fills the zero fields: the heartbeat timeout from DefaultTiming,
// the election timeout and the leader lease from the heartbeat timeout (so
// that setting it alone scales the rest, in DefaultTiming's proportions).
func (t Timing) orDefault() Timing {
	if t.HeartbeatTimeout == 0 {
		t.HeartbeatTimeout = DefaultTiming.HeartbeatTimeout
	}
	if t.ElectionTimeout == 0 {
		t.ElectionTimeout = t.HeartbeatTimeout
	}
	if t.LeaderLeaseTimeout == 0 {
		t.LeaderLeaseTimeout = t.HeartbeatTimeout
	}
	return t
}

// Problems checks the timeouts as hashicorp/raft will (it refuses to start
// otherwise, with a less helpful message) and returns what is wrong, keyed
// by "heartbeat-timeout", "election-timeout" and "leader-lease-timeout"
// (masterd's flags are -raft-<key>). Zero fields are judged as orDefault
// fills them.
func (t Timing) Problems() map[string]string {
	problems := map[string]string{}
	// A field left zero is not judged on its own: it derives from the
	// heartbeat timeout, whose problem is the one to report.
	for key, d := range map[string]time.Duration{"heartbeat-timeout": t.HeartbeatTimeout,
		"election-timeout": t.ElectionTimeout, "leader-lease-timeout": t.LeaderLeaseTimeout} {
		if d != 0 && (d < minTiming || d > maxTiming) {
			problems[key] = fmt.Sprintf("must be between %v and %v, not %v", minTiming, maxTiming, d)
		}
	}
	t = t.orDefault()
	inRange := func(keys ...string) bool {
		for _, key := range keys {
			if _, bad := problems[key]; bad {
				return false
			}
		}
		return true
	}
	if inRange("leader-lease-timeout", "heartbeat-timeout") && t.LeaderLeaseTimeout > t.HeartbeatTimeout {
		// A leader would keep its lease after its followers stopped
		// waiting for it and elected another.
		problems["leader-lease-timeout"] = fmt.Sprintf("%v is longer than the heartbeat timeout (%v): it must not be", t.LeaderLeaseTimeout, t.HeartbeatTimeout)
	}
	if inRange("election-timeout", "heartbeat-timeout") && t.ElectionTimeout < t.HeartbeatTimeout {
		problems["election-timeout"] = fmt.Sprintf("%v is shorter than the heartbeat timeout (%v): it must not be", t.ElectionTimeout, t.HeartbeatTimeout)
	}
	return problems
}

// Check is Problems as one error (nil when there is none).
func (t Timing) Check() error {
	problems := t.Problems()
	for _, key := range []string{"heartbeat-timeout", "election-timeout", "leader-lease-timeout"} {
		if p, ok := problems[key]; ok {
			return fmt.Errorf("raft %s: %s", key, p)
		}
	}
	return nil
}
