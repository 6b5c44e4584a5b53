package api

import (
	"context"
	"errors"
	"io"
)

// SnapshotPath saves (GET) and restores (PUT) a backup of the whole
// replicated state, as `consul snapshot` and `etcdctl snapshot` do.
const SnapshotPath = "/v1/snapshot"

// SnapshotRestored answers PUT /v1/snapshot.
type SnapshotRestored struct {
	// Index is the Raft index of the state the backup holds: every
	// object's version is at most this.
	Index uint64 `json:"index"`
}

// SaveSnapshot streams a backup of the whole replicated state to w and
// returns the Raft index it reflects.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error) {
	return 0, errors.New("SaveSnapshot: not implemented yet")
}

// RestoreSnapshot replaces the cluster's replicated state with the backup
// read from r.
func (c *Client) RestoreSnapshot(ctx context.Context, r io.Reader) (*SnapshotRestored, error) {
	return nil, errors.New("RestoreSnapshot: not implemented yet")
}
