package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// headerStoreVersion carries a joining server's store version (a header,
// not a body field, so that a leader of an older release, which refuses
// unknown fields, still takes the join).
const headerStoreVersion = api.HeaderStoreVersion

// versionPollInterval is how often the leader asks its servers which store
// version they run: a server upgraded in place is counted within it.
const versionPollInterval = 2 * time.Second

// healthAnswer is GET /v1/health. A server of a release before store
// versions answers without store_version: it runs version 1.
type healthAnswer struct {
	Status       string `json:"status"`
	StoreVersion uint32 `json:"store_version,omitempty"`
}

// watchServerVersions asks every other server of the Raft configuration
// for its store version while this server leads, so that writes carry the
// cluster's version and newer command types wait for every server (see
// raftstore/versions.go). It ends with the term (termEnd), so that a term
// started again (after a restore) has one poller.
func (s *Server) watchServerVersions(termEnd <-chan struct{}) {
	defer s.bg.Done()
	s.node.ForgetServerVersions()
	client := &http.Client{Timeout: time.Second, Transport: s.internalTransport()}
	for {
		if !s.node.IsLeader() {
			return
		}
		servers, err := s.node.Servers()
		if err == nil {
			for _, srv := range servers {
				if id := string(srv.ID); id != s.cfg.ID {
					s.pollServerVersion(client, id)
				}
			}
			s.commitStoreVersion()
		}
		select {
		case <-s.stop:
			return
		case <-termEnd:
			return
		case <-time.After(versionPollInterval):
		}
	}
}

// pollServerVersion records what a server answers; a server that does not
// answer keeps the version last heard (1 until heard).
func (s *Server) pollServerVersion(client *http.Client, id string) {
	var addr string
	s.fsm.Read(func(st *raftstore.State) {
		rec, _ := st.Server(id)
		addr = rec.APIAddress
	})
	if addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/health", nil)
	if err != nil {
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var h healthAnswer
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&h) != nil {
		return
	}
	s.node.SetServerVersion(id, max(h.StoreVersion, 1))
}

// commitStoreVersion moves the cluster to the version every server has been
// heard to run, rather than at whichever write a client sends next: until
// then GET /v1/cluster shows the older version, for as long as no client
// writes. It writes this server's own record unchanged, which changes and
// audits nothing. Before registerSelf has written that record, that write
// carries the stamp: a write ahead of it would make a new cluster look used,
// and registerSelf seeds -rate-limits only into an unused one.
func (s *Server) commitStoreVersion() {
	var (
		committed  uint32
		registered bool
	)
	s.fsm.Read(func(st *raftstore.State) {
		committed = st.RulesVersion()
		_, registered = st.Server(s.cfg.ID)
	})
	if !registered || s.node.ClusterStoreVersion() <= committed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionPollInterval)
	defer cancel()
	cmd := &raftstore.ServerSet{WriteMeta: raftstore.WriteMeta{Time: time.Now().UTC(), Principal: "masterd"},
		ID: s.cfg.ID, RaftAddress: s.node.RaftAddress(), APIAddress: s.apiAddr}
	if _, err := s.node.Apply(ctx, cmd); err != nil {
		s.logger.Warn("commit the cluster's store version", "error", err)
	}
}

// joinVersion is the store version a joining server says it runs: the
// header, or 1 without it (a release before store versions).
func joinVersion(r *http.Request) (uint32, *api.Error) {
	h := r.Header.Get(headerStoreVersion)
	if h == "" {
		return 1, nil
	}
	v, err := strconv.ParseUint(h, 10, 32)
	if err != nil || v == 0 {
		return 0, api.Errorf(api.CodeInvalidArgument, "%s %q: want a store version, 1 or more", headerStoreVersion, h)
	}
	return uint32(v), nil
}

// checkJoinVersion refuses a server older than the version writes are
// stamped with: it could not read the log or the snapshots. It answers dry
// runs and refuses early; AddVoter checks again when the join is decided.
func (s *Server) checkJoinVersion(r *http.Request, id string) *api.Error {
	version, e := joinVersion(r)
	if e != nil {
		return e
	}
	// Writes may already be stamped with the version every member runs,
	// before one commits: a joiner must read those too.
	if cluster := s.node.ClusterStoreVersion(); version < cluster {
		return joinVersionConflict(&raftstore.JoinVersionError{ID: id, Version: version, Cluster: cluster})
	}
	// Nothing is recorded from the header here, so a dry run or a failed
	// join changes nothing: a join that succeeds records it (AddVoter).
	return nil
}

// addVoter adds the joining server to the Raft configuration. Raft decides
// the join while no write is being stamped, so the version check is made
// again there: the cluster may have moved since checkJoinVersion.
func (s *Server) addVoter(r *http.Request, req api.AddServerRequest) *api.Error {
	version, e := joinVersion(r)
	if e != nil {
		return e
	}
	var tooOld *raftstore.JoinVersionError
	switch err := s.node.AddVoter(req.ID, req.RaftAddress, version); {
	case errors.As(err, &tooOld):
		return joinVersionConflict(tooOld)
	case err != nil:
		return api.Errorf(api.CodeNoLeader, "%v", err)
	}
	return nil
}

func joinVersionConflict(e *raftstore.JoinVersionError) *api.Error {
	return api.Errorf(api.CodeConflict, "server %s runs store version %d (a join without the %s header counts as 1), "+
		"but this cluster has moved to version %d: run a release of masterd that supports version %d",
		e.ID, e.Version, headerStoreVersion, e.Cluster, e.Cluster).
		WithDetails(map[string]any{"store_version": e.Version, "cluster_store_version": e.Cluster})
}

// heardStoreVersion is what GET /v1/cluster shows for a server: its own
// version, or, on the leader, the version it last heard from the server.
func (s *Server) heardStoreVersion(id string) uint32 {
	switch {
	case id == s.cfg.ID:
		return raftstore.StoreVersion
	case s.node.IsLeader():
		return s.node.ServerVersion(id)
	}
	return 0
}
