package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"syscall"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

// PauseFor is how long a paused server stays stopped: well past the Raft
// election and heartbeat timeouts (500 ms each; see raftstore/node.go) so the
// others elect a new leader while it sleeps, and it wakes up as a stale one.
const PauseFor = 3 * time.Second

func init() {
	Register(pause{leader: true})
	Register(pause{leader: false})
}

// pause stops one server with SIGSTOP, the way a long GC pause, a VM
// migration or a swapped-out process stops it; healing sends SIGCONT.
type pause struct{ leader bool }

func (p pause) Name() string {
	if p.leader {
		return "pause"
	}
	return "pause-random"
}

func (p pause) Inject(ctx context.Context, c *testcluster.Cluster, rng *rand.Rand) (Fault, error) {
	i, err := target(ctx, c, rng, p.leader)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name(), err)
	}
	if err := c.Signal(i, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name(), err)
	}
	return &paused{c: c, i: i, name: p.Name(), until: time.Now().Add(PauseFor)}, nil
}

type paused struct {
	c     *testcluster.Cluster
	i     int
	name  string
	until time.Time
}

func (f *paused) String() string {
	return fmt.Sprintf("%s: SIGSTOP %s for %s", f.name, f.c.ID(f.i), PauseFor)
}

// Heal waits out the rest of the pause (so a short interval still outlasts
// the election timeout), then resumes the process.
func (f *paused) Heal(ctx context.Context) error {
	select {
	case <-time.After(time.Until(f.until)):
	case <-ctx.Done():
	}
	// A server killed while it was stopped (the combined nemesis overlaps
	// a kill with a pause) has nothing left to resume; a restarted one
	// runs and takes the SIGCONT as a no-op.
	if !f.c.Alive(f.i) {
		return nil
	}
	// Resume even when ctx is done: a server left stopped would hang the
	// cluster's shutdown and every later run on this machine.
	if err := f.c.Signal(f.i, syscall.SIGCONT); err != nil {
		return fmt.Errorf("heal %s: %w", f, err)
	}
	return nil
}
