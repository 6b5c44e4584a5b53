package raftstore

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/allot/allot/masterd/api"
)

// A backup (GET and PUT /v1/snapshot) is the state document a Raft
// snapshot holds, framed as a backup file (api.SnapshotWriter): a header
// that says which store version wrote it and what a cluster needs to read
// it, and a checksum. So it holds exactly what the FSM persists: every
// object with its version, the registries, the ACL state (token hashes,
// never secrets) and the audit trail.

// ErrBackupTooNew is a backup whose state this server cannot read: it was
// written under a newer store version.
var ErrBackupTooNew = errors.New("the backup is newer than this server reads")

// WriteBackup writes s as a backup file. server and now go into its header.
func WriteBackup(w io.Writer, s *State, server string, now time.Time) error {
	rules := s.RulesVersion()
	sw, err := api.NewSnapshotWriter(w, api.SnapshotHeader{StoreVersion: StoreVersion, RulesVersion: rules,
		Format: snapshotFormat(rules), Index: s.index, Server: server, CreatedAt: now.UTC()})
	if err != nil {
		return err
	}
	if err := WriteSnapshot(sw, s); err != nil {
		return err
	}
	return sw.Close()
}

// ReadBackup reads a backup file into a fresh State. It reads the whole
// file and checks its checksum before it answers, so a file that is cut
// short or altered is refused whatever its content; every error but the
// reader's own (api.ErrSnapshot*, ErrBackupTooNew, a state that does not
// read or holds objects no write could have stored: checkBackupState) is
// the file's fault.
func ReadBackup(r io.Reader) (*State, api.SnapshotHeader, error) {
	sr, err := api.NewSnapshotReader(r)
	if err != nil {
		return nil, api.SnapshotHeader{}, err
	}
	h := sr.Header()
	switch {
	case h.Format > snapshotFormatV3 || h.RulesVersion > StoreVersion:
		return nil, h, fmt.Errorf("%w: it was written under store version %d (state format %d) by a masterd of store version %d; "+
			"this server runs store version %d (formats %d to %d): upgrade every server before restoring it",
			ErrBackupTooNew, h.RulesVersion, h.Format, h.StoreVersion, StoreVersion, snapshotFormatV1, snapshotFormatV3)
	case h.Format < snapshotFormatV1:
		return nil, h, fmt.Errorf("%w: its header names no state format", api.ErrNotSnapshot)
	}
	s, readErr := ReadSnapshot(sr)
	// The checksum is judged first: an altered file may well fail to
	// decode, and the decoder's complaint would hide what happened.
	if err := sr.Verify(); err != nil {
		return nil, h, err
	}
	if readErr != nil {
		return nil, h, fmt.Errorf("%w: its state does not read: %v", api.ErrNotSnapshot, readErr)
	}
	if s.index != h.Index || s.RulesVersion() != h.RulesVersion || snapshotFormat(s.RulesVersion()) != h.Format {
		return nil, h, fmt.Errorf("%w: its header (index %d, store version %d, format %d) does not describe its state (index %d, store version %d)",
			api.ErrNotSnapshot, h.Index, h.RulesVersion, h.Format, s.index, s.RulesVersion())
	}
	if err := checkBackupState(s); err != nil {
		return nil, h, fmt.Errorf("%w: its state holds what allot never stores: %v", api.ErrNotSnapshot, err)
	}
	return s, h, nil
}

// Clone returns a copy of s that later changes to s do not affect. It is
// cheap: the maps are copied, the objects they hold are shared (they are
// never modified in place).
func (s *State) Clone() *State { return s.clone() }
