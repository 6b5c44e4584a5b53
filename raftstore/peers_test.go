package raftstore

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestPeerHealthTellsAGoneMemberFromALiveOne(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	obs := func(d any) raft.Observation { return raft.Observation{Data: d} }
	var p peerHealth
	if _, failing := p.unreachableFor("m2", t0); failing {
		t.Fatal("a follower knows nothing of heartbeats")
	}
	p.observe(obs(raft.LeaderObservation{LeaderID: "m1"}), "m1", t0)
	if _, failing := p.unreachableFor("m2", t0.Add(time.Minute)); failing {
		t.Fatal("a member never reported failing counts as gone")
	}
	// Heartbeats to m2 fail; it last answered 2 s after this server won.
	p.observe(obs(raft.FailedHeartbeatObservation{PeerID: "m2", LastContact: t0.Add(2 * time.Second)}), "m1", t0.Add(3*time.Second))
	if d, failing := p.unreachableFor("m2", t0.Add(10*time.Second)); !failing || d != 8*time.Second {
		t.Fatalf("unreachable for %v (failing %v), want 8s since its last answer", d, failing)
	}
	// m3 never answered this leader: counted from when it won.
	p.observe(obs(raft.FailedHeartbeatObservation{PeerID: "m3"}), "m1", t0.Add(time.Second))
	if d, failing := p.unreachableFor("m3", t0.Add(5*time.Second)); !failing || d != 5*time.Second {
		t.Fatalf("m3 unreachable for %v (failing %v), want 5s since the leader won", d, failing)
	}
	// m2 answers again: live.
	p.observe(obs(raft.ResumedHeartbeatObservation{PeerID: "m2"}), "m1", t0.Add(11*time.Second))
	if _, failing := p.unreachableFor("m2", t0.Add(12*time.Second)); failing {
		t.Fatal("a member whose heartbeats resumed still counts as failing")
	}
	// Another server leads: this one knows nothing any more.
	p.observe(obs(raft.LeaderObservation{LeaderID: "m2"}), "m1", t0.Add(20*time.Second))
	if _, failing := p.unreachableFor("m3", t0.Add(30*time.Second)); failing {
		t.Fatal("a follower still reports what it saw as leader")
	}
}
