package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/allot/allot/masterd/api"
)

// catchUpWait bounds how long a stale read waits for this server to apply
// what it knows is committed before it answers no_leader: long enough for
// the usual lag of a follower, short enough not to hide one that restarted
// and has not heard from the leader.
const catchUpWait = time.Second

// freshness is how current this server's state is: what the headers of an
// answer from its own state say (api.HeaderKnownLeader and the others, as
// Consul's X-Consul-KnownLeader and X-Consul-LastContact).
type freshness struct {
	leaderID    string
	lastContact time.Duration // 0 on the leader; -1 before it heard from one
	applied     uint64
	known       uint64
}

func (s *Server) freshness() freshness {
	r := s.node.Raft()
	f := freshness{applied: r.AppliedIndex(), known: r.CommitIndex()}
	if f.known == 0 {
		// Raft learns the commit index from the leader; until then the
		// entries of its own log are the least this server is behind by.
		f.known = r.LastIndex()
	}
	f.known = max(f.known, f.applied)
	f.leaderID, _ = s.node.Leader()
	switch last := s.node.LastContact(); {
	case s.node.IsLeader():
	case last.IsZero():
		f.lastContact = -1
	default:
		f.lastContact = time.Since(last)
	}
	return f
}

func (f freshness) caughtUp() bool { return f.applied >= f.known }

func (f freshness) setHeaders(h http.Header) {
	h.Set(api.HeaderKnownLeader, strconv.FormatBool(f.leaderID != ""))
	ms := int64(-1)
	if f.lastContact >= 0 {
		ms = f.lastContact.Milliseconds()
	}
	h.Set(api.HeaderLastContact, strconv.FormatInt(ms, 10))
	h.Set(api.HeaderAppliedIndex, strconv.FormatUint(f.applied, 10))
	h.Set(api.HeaderKnownIndex, strconv.FormatUint(f.known, 10))
}

// staleReady waits, within catchUpWait, until this server has applied what
// it knew of when the read came in. It sets the freshness headers and
// returns an error when the server stays behind: its state would answer
// not_found for objects that exist.
func (s *Server) staleReady(ctx context.Context, w http.ResponseWriter) *api.Error {
	f := s.freshness()
	target := f.known
	done := func() bool { return f.applied >= target || f.caughtUp() }
	if !done() {
		ctx, cancel := context.WithTimeout(ctx, catchUpWait)
		defer cancel()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for !done() && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			f = s.freshness()
		}
	}
	f.setHeaders(w.Header())
	if done() {
		return nil
	}
	why := "it is applying entries the leader committed"
	if f.leaderID == "" {
		why = "it has not heard from a leader since it started"
	} else if s.node.Raft().CommitIndex() == 0 {
		why = "it restarted and the leader has not sent it the commit index yet"
	}
	return api.Errorf(api.CodeNoLeader, "this server's state is behind (applied Raft index %d of %d it knows of: %s); "+
		"retry, or read without ?stale=true", f.applied, f.known, why).
		WithDetails(map[string]any{"applied_index": f.applied, "known_index": f.known, "known_leader": f.leaderID != ""})
}

// leaderLive asks the leader for what only it knows: the live totals
// (allocated, offered, revocable, revocable allocated) and the recovery,
// for GET /v1/cluster on a follower, which copies them into out. It
// leaves out as it is when no leader answers; refused is the leader's 401
// or 403 when it refuses the caller's token (revoked there, not yet here),
// which the follower answers.
func (s *Server) leaderLive(r *http.Request, out *api.Cluster) (refused *api.Error) {
	addr, known := s.leaderAPIAddress()
	if !known || r.Header.Get(forwardedHeader) != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), leaderLiveTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/cluster", nil)
	if err != nil {
		return nil
	}
	req.Header.Set(forwardedHeader, s.cfg.ID)
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	var leader api.Cluster
	if err := s.getJSON(addr, req, &leader); err != nil {
		var status *statusError
		if errors.As(err, &status) && (status.code == http.StatusUnauthorized || status.code == http.StatusForbidden) && status.body.Error != nil {
			return status.body.Error
		}
		s.logger.Debug("ask the leader for its live state", "leader", addr, "error", err)
		return nil
	}
	out.Allocated, out.Offered, out.Revocable, out.RevocableAllocated = leader.Allocated, leader.Offered, leader.Revocable, leader.RevocableAllocated
	out.Recovery = leader.Recovery
	return nil
}

// statusError is an answer other than 200 to getJSON.
type statusError struct {
	code   int
	status string
	body   api.ErrorBody
}

func (e *statusError) Error() string { return e.status }

// leaderLiveTimeout bounds the question GET /v1/cluster asks the leader.
const leaderLiveTimeout = 2 * time.Second

// getJSON sends req to the server at addr over the connections kept to it
// for forwarding.
func (s *Server) getJSON(addr string, req *http.Request, out any) error {
	resp, err := s.proxy(addr).Transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := &statusError{code: resp.StatusCode, status: resp.Status}
		_ = json.NewDecoder(io.LimitReader(resp.Body, maxBodyBytes)).Decode(&e.body)
		return e
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxBodyBytes)).Decode(out)
}

// noLeader is the answer of a server that has no leader to pass a request
// on to: none is known, or this server has not caught up to the entry that
// records the leader's API address.
func (s *Server) noLeader(w http.ResponseWriter) *api.Error {
	f := s.freshness()
	f.setHeaders(w.Header())
	if f.leaderID == "" {
		return api.Errorf(api.CodeNoLeader, "no leader is known (an election is under way, or this server has not heard from a leader since it started); retry")
	}
	return api.Errorf(api.CodeNoLeader, "leader %s is known, but this server has not yet applied the entry that records its API address "+
		"(applied Raft index %d of %d it knows of); retry, or ask another server", f.leaderID, f.applied, f.known).
		WithDetails(map[string]any{"leader": f.leaderID, "applied_index": f.applied, "known_index": f.known})
}
