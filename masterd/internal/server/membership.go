package server

import (
	"time"

	"github.com/allot/allot/masterd/api"
)

// memberGoneAfter is how long the leader must have had no answer to its
// heartbeats from a member before a join may take over that member's id. It
// is several heartbeat timeouts, so that a member that is only slow (a pause,
// a busy disk) is not replaced under its own feet.
const memberGoneAfter = 3 * time.Second

// checkJoin refuses, before the Raft configuration changes, a join that would
// silently take over another member: Raft itself would just move the id to
// the new address, and the leader would heartbeat the newcomer while the old
// server still believes it is a member. The same id at the same address is
// the same server joining again, and is accepted.
func (s *Server) checkJoin(req api.AddServerRequest) *api.Error {
	servers, err := s.node.Servers()
	if err != nil {
		return api.Errorf(api.CodeNoLeader, "%v", err)
	}
	for _, m := range servers {
		id, addr := string(m.ID), string(m.Address)
		switch {
		case id == req.ID && addr == req.RaftAddress:
			continue
		case id == req.ID:
			details := map[string]any{"id": id, "raft_address": addr}
			silent, failing := s.node.PeerUnreachableFor(id)
			if !failing {
				details["live"] = true
				return api.Errorf(api.CodeConflict, "server %s is a live member at %s (it answers the leader's heartbeats): "+
					"a second server cannot join under its id; stop it and join with -replace, or choose another id", id, addr).WithDetails(details)
			}
			silent = silent.Round(time.Millisecond)
			details["live"] = silent < memberGoneAfter
			details["unreachable_seconds"] = silent.Seconds()
			if silent < memberGoneAfter {
				return api.Errorf(api.CodeConflict, "server %s is a member at %s that last answered the leader %s ago; "+
					"a member counts as gone after %s without an answer: retry then (with -replace)", id, addr, silent, memberGoneAfter).WithDetails(details)
			}
			if !req.Replace {
				return api.Errorf(api.CodeConflict, "server %s is a member at %s, which has not answered the leader for %s: "+
					"to replace it with the server at %s, join with -replace (\"replace\": true)", id, addr, silent, req.RaftAddress).WithDetails(details)
			}
		case addr == req.RaftAddress:
			return api.Errorf(api.CodeConflict, "raft address %s belongs to member %s: remove it first (DELETE /v1/cluster/servers/%s) or use another address",
				addr, id, id).WithDetails(map[string]any{"id": id, "raft_address": addr})
		}
	}
	return nil
}
