package master

import (
	"context"
	"errors"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

func invalid(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidArgument, format, args...)
}

func noLeader() *api.Error {
	return api.Errorf(api.CodeNoLeader, "this server is no longer the leader; retry")
}

// apply replicates cmd; the answer is the error a caller should see.
func (m *Master) apply(ctx context.Context, cmd raftstore.Command) *api.Error {
	res, err := m.store.Apply(ctx, cmd)
	switch {
	case errors.Is(err, raftstore.ErrNotLeader):
		return noLeader()
	case err != nil:
		return api.Errorf(api.CodeNoLeader, "the write could not be replicated: %v; retry", err)
	case res.Err != nil:
		return res.Err
	}
	return nil
}
