package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// GET /v1/snapshot streams a backup of the replicated state, PUT restores
// one into the cluster (see raftstore/backup.go for what a backup holds,
// api/snapshot.go for the file, raftstore/restore.go for how Raft installs
// it). Both need acl write: a backup holds every object and the ACL state,
// and a restore replaces the tokens, so only a caller who could grant
// itself everything may do either.

// maxSnapshotBytes bounds a PUT /v1/snapshot body, instead of the 1 MiB of
// JSON bodies: a state with the audit trail full and many thousand agents
// is tens of MiB.
const maxSnapshotBytes = 256 << 20

// restoreTimeout bounds a restore once its file is read: Raft installing
// it on a quorum and the leader's term starting again take seconds.
const restoreTimeout = 5 * time.Minute

// snapshotChunk is how much of a backup goes out under one write deadline.
const snapshotChunk = 64 << 10

// saveSnapshot answers GET /v1/snapshot on the leader, once it has
// confirmed its leadership, from a copy of its state: a state the cluster
// committed, as a linearizable read sees it.
func (s *Server) saveSnapshot(w http.ResponseWriter, r *http.Request) {
	// Here, or on a follower that passes the leader's answer on, a client
	// that stops reading is cut off rather than holding the server.
	w = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.timeouts().write}
	if !s.confirmedLeader(w, r) {
		return
	}
	var (
		st *raftstore.State
		e  *api.Error
	)
	s.fsm.Read(func(cur *raftstore.State) {
		if e = stillValid(r.Context(), cur); e == nil {
			st = cur.Clone()
		}
	})
	if e != nil {
		s.writeError(w, e)
		return
	}
	h := w.Header()
	h.Set("Content-Type", api.SnapshotContentType)
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="allot-%d.snap"`, st.Index()))
	h.Set(api.HeaderIndex, strconv.FormatUint(st.Index(), 10))
	w.WriteHeader(http.StatusOK)
	if err := raftstore.WriteBackup(w, st, s.cfg.ID, time.Now()); err != nil {
		// The answer has begun: cut the connection, so that the client
		// holds a file without its checksum line, which it detects.
		s.logger.Warn("stream a backup", "error", err)
		panic(http.ErrAbortHandler)
	}
}

// restoreSnapshot answers PUT /v1/snapshot: it reads and checks the whole
// backup, then has Raft install it on every server (raftstore.Node.Restore).
// A follower passes the request on to the leader, body and all.
func (s *Server) restoreSnapshot(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		// A backup may take longer to arrive than the time any body is
		// given; it only has to keep coming.
		r.Body = &deadlineReader{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: s.timeouts().body}
	}
	if !s.node.IsLeader() {
		s.forward(w, r)
		return
	}
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" {
		s.writeError(w, api.Errorf(api.CodeInvalidArgument, "If-Match and If-None-Match are not supported on a restore: it replaces every object"))
		return
	}
	if !s.readyToLead(w, r) {
		return
	}
	if !s.restoring.TryLock() {
		s.writeError(w, api.Errorf(api.CodeConflict, "another restore is under way on this cluster; wait for its answer"))
		return
	}
	defer s.restoring.Unlock()
	if r.ContentLength > maxSnapshotBytes {
		s.writeError(w, api.Errorf(api.CodePayloadTooLarge, "the backup is %d bytes, more than the %d a restore takes", r.ContentLength, maxSnapshotBytes))
		return
	}
	st, header, err := raftstore.ReadBackup(http.MaxBytesReader(w, r.Body, maxSnapshotBytes))
	if err != nil {
		s.writeError(w, s.backupRefused(err))
		return
	}
	s.hearServerVersions()
	if cluster := s.node.ClusterStoreVersion(); st.RulesVersion() > cluster {
		s.writeError(w, restoreTooNew(&raftstore.RestoreVersionError{Backup: st.RulesVersion(), Cluster: cluster}))
		return
	}
	// Asked again under the restore's lock (Node.Restore); asked here so
	// that a dry run answers as the restore would.
	var refused error
	s.fsm.Read(func(cur *raftstore.State) { refused = raftstore.CheckRestore(cur, st) })
	if refused != nil {
		s.writeError(w, restoreRefused(refused))
		return
	}
	if flag(r, paramDryRun) {
		object, _ := json.Marshal(api.SnapshotRestored{Index: st.Index()})
		s.writeJSON(w, http.StatusOK, s.appliedIndex(), api.DryRun{DryRun: true, Object: object, Effects: api.Effects{}})
		return
	}
	var revoked *api.Error
	s.fsm.Read(func(cur *raftstore.State) { revoked = stillValid(r.Context(), cur) })
	if revoked != nil {
		s.writeError(w, revoked)
		return
	}
	// Not the request's context: a restore runs to its end once Raft has
	// it, and the next one must wait for that, client or no client.
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	index, err := s.node.Restore(ctx, st)
	var tooNew *raftstore.RestoreVersionError
	switch {
	case errors.As(err, &tooNew):
		s.writeError(w, restoreTooNew(tooNew))
		return
	case errors.Is(err, raftstore.ErrRestoreUnbootstraps):
		s.writeError(w, restoreRefused(err))
		return
	case err != nil:
		s.logger.Error("restore a backup", "error", err, "backup_index", header.Index, "principal", principalOf(r.Context()))
		s.writeError(w, api.Errorf(api.CodeNoLeader, "the restore did not complete: %v; it may or may not have happened "+
			"(GET /v1/audit shows the trail in force): restore again, which is harmless", err))
		return
	}
	s.logger.Info("restored a backup", "principal", principalOf(r.Context()), "index", index,
		"written_by", header.Server, "written_at", header.CreatedAt, "store_version", header.StoreVersion)
	s.writeJSON(w, http.StatusOK, index, api.SnapshotRestored{Index: index})
}

// backupRefused is the answer to a body that ReadBackup refused.
func (s *Server) backupRefused(err error) *api.Error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return api.Errorf(api.CodePayloadTooLarge, "the backup is larger than the %d bytes a restore takes", maxSnapshotBytes)
	case errors.Is(err, os.ErrDeadlineExceeded):
		e := api.Errorf(api.CodeInvalidArgument, "the backup stopped arriving (nothing for %s): send it again", s.timeouts().body)
		e.Status = http.StatusRequestTimeout
		return e
	case errors.Is(err, api.ErrSnapshotEmpty):
		return api.Errorf(api.CodeInvalidArgument, "the body is empty: send a backup saved with GET %s", api.SnapshotPath)
	}
	return api.Errorf(api.CodeInvalidArgument, "the body is not a backup this cluster can restore: %v; nothing was changed", err)
}

// restoreRefused is the answer to a backup that CheckRestore refused.
func restoreRefused(err error) *api.Error {
	return api.Errorf(api.CodeConflict, "%v; nothing was changed", err)
}

func restoreTooNew(e *raftstore.RestoreVersionError) *api.Error {
	return api.Errorf(api.CodeInvalidArgument, "%v; nothing was changed", e).
		WithDetails(map[string]any{"needs_store_version": e.Backup, "store_version": e.Cluster})
}

// hearServerVersions asks the servers whose store version the leader has
// not heard as this binary's: a restore right after an election must not be
// refused for an answer that the poll (watchServerVersions) brings a moment
// later.
func (s *Server) hearServerVersions() {
	servers, err := s.node.Servers()
	if err != nil {
		return
	}
	client := &http.Client{Timeout: time.Second, Transport: s.internalTransport()}
	for _, srv := range servers {
		if id := string(srv.ID); id != s.cfg.ID && s.node.ServerVersion(id) < raftstore.StoreVersion {
			s.pollServerVersion(client, id)
		}
	}
}

// deadlineWriter gives each chunk of a long answer its own write deadline:
// a client that reads steadily gets all of it, one that stops reading is
// cut off.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// Unwrap lets an http.ResponseController (the proxy's flushes) reach the
// connection.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

func (d *deadlineWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), snapshotChunk)]
		_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
		n, err := d.ResponseWriter.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// deadlineReader gives each read of a long body its own read deadline, as
// deadlineWriter does for writes. It sets none once the body has ended:
// net/http then reads the connection in the background to notice a client
// that leaves, and a deadline there would end the request's context while
// the restore runs.
type deadlineReader struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	ended   bool
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if !d.ended {
		_ = d.rc.SetReadDeadline(time.Now().Add(d.timeout))
	}
	n, err := d.ReadCloser.Read(p)
	d.ended = d.ended || err != nil
	return n, err
}
