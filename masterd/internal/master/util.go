package master

import (
	"context"
	"errors"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

func invalid(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidArgument, format, args...)
}

func noLeader() *api.Error {
	return api.Errorf(api.CodeNoLeader, "this server is no longer the leader; retry")
}

// applyTimeout bounds one Raft write of the master.
const applyTimeout = 10 * time.Second

// apply replicates cmd and waits until the live state follows it (Applied);
// the answer is the error a caller should see. A caller that goes away does
// not cut the write short: it may commit anyway, and the follower then
// brings the live state in step.
func (m *Master) apply(ctx context.Context, cmd raftstore.Command) *api.Error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
	defer cancel()
	res, err := m.store.Apply(ctx, cmd)
	switch {
	case errors.Is(err, raftstore.ErrNotLeader):
		return noLeader()
	case err != nil:
		return api.Errorf(api.CodeNoLeader, "the write could not be replicated: %v; retry", err)
	case res.Err != nil:
		return res.Err
	case !m.caughtUp(res.Index):
		return noLeader()
	}
	return nil
}
