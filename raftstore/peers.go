package raftstore

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// peerHealth is the leader's view of which followers answer its heartbeats,
// from Raft's heartbeat observations. It lets membership changes tell a
// member that is gone (its host died) from one that is live, which a join
// under its id must not take over.
type peerHealth struct {
	mu sync.Mutex
	// leadingSince is when this server last became leader; zero while it
	// follows. Contact before it is not known to this leader.
	leadingSince time.Time
	// failing holds the followers whose latest heartbeat failed, with the
	// last time they answered one (zero: not since this server leads).
	failing map[raft.ServerID]time.Time
}

func (p *peerHealth) observe(o raft.Observation, self raft.ServerID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.LeaderObservation:
		// A new term: what the last leader saw is no longer known.
		p.failing = map[raft.ServerID]time.Time{}
		p.leadingSince = time.Time{}
		if d.LeaderID == self {
			p.leadingSince = now
		}
	case raft.FailedHeartbeatObservation:
		if p.failing == nil {
			p.failing = map[raft.ServerID]time.Time{}
		}
		p.failing[d.PeerID] = d.LastContact
	case raft.ResumedHeartbeatObservation:
		delete(p.failing, d.PeerID)
	case raft.PeerObservation:
		delete(p.failing, d.Peer.ID)
	}
}

// unreachableFor is how long the leader has had no contact with id, when
// heartbeats to it currently fail; ok is false when they do not (or this
// server does not lead, or has not tried yet).
func (p *peerHealth) unreachableFor(id raft.ServerID, now time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leadingSince.IsZero() {
		return 0, false
	}
	last, failing := p.failing[id]
	if !failing {
		return 0, false
	}
	if last.Before(p.leadingSince) {
		last = p.leadingSince
	}
	return now.Sub(last), true
}

func isPeerHealthObservation(o *raft.Observation) bool {
	switch o.Data.(type) {
	case raft.LeaderObservation, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.PeerObservation:
		return true
	}
	return false
}

// watchPeers feeds Raft's observations to n.peers until Shutdown has stopped
// Raft. The observer blocks Raft rather than drop an observation: a lost
// "resumed" would make a live member look gone.
func (n *Node) watchPeers(ch chan raft.Observation, stop chan struct{}) {
	defer n.done.Done()
	self := raft.ServerID(n.cfg.ID)
	for {
		select {
		case o := <-ch:
			n.peers.observe(o, self, time.Now())
		case <-stop:
			return
		}
	}
}

// PeerUnreachableFor reports, on the leader, how long it has had no contact
// with server id, when its heartbeats to id currently fail. ok is false when
// they succeed, when this server does not lead, or when it has not yet
// tried: then id must be taken as live.
func (n *Node) PeerUnreachableFor(id string) (time.Duration, bool) {
	if !n.IsLeader() {
		return 0, false
	}
	return n.peers.unreachableFor(raft.ServerID(id), time.Now())
}
