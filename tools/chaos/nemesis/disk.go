package nemesis

import (
	"context"
	"fmt"
	"math/rand"

	"github.com/allot/allot/masterd/testcluster"
)

func init() {
	Register(diskFull{leader: true})
	Register(diskFull{leader: false})
}

// diskFull fills one server's data dir until its file system has no byte
// left; healing frees the space. The server keeps running: a full leader
// steps down and stands for no election until it has room, a full
// follower only fails its appends and catches up afterwards. The cluster
// must run with a tmpfs data dir per server (testcluster.WithTmpfsDataDirs):
// filling the machine's own disk is not the program's to do.
type diskFull struct{ leader bool }

func (d diskFull) Name() string {
	if d.leader {
		return "disk-full-leader"
	}
	return "disk-full-follower"
}

func (d diskFull) Inject(ctx context.Context, c *testcluster.Cluster, rng *rand.Rand) (Fault, error) {
	i, err := d.target(ctx, c, rng)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	filled, err := c.FillDataDir(i)
	if err != nil {
		// A partial fill is freed, so no space stays taken by a fault
		// that was never reported.
		c.FreeDataDir(i)
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	return &filledDisk{c: c, i: i, name: d.Name(), bytes: filled}, nil
}

// target is the leader, or a random running server other than the leader.
func (d diskFull) target(ctx context.Context, c *testcluster.Cluster, rng *rand.Rand) (int, error) {
	leader, err := target(ctx, c, rng, true)
	if err != nil || d.leader {
		return leader, err
	}
	var followers []int
	for _, i := range c.Live() {
		if i != leader {
			followers = append(followers, i)
		}
	}
	if len(followers) == 0 {
		return -1, fmt.Errorf("no running follower")
	}
	return followers[rng.Intn(len(followers))], nil
}

type filledDisk struct {
	c     *testcluster.Cluster
	i     int
	name  string
	bytes int64
}

func (f *filledDisk) String() string {
	return fmt.Sprintf("%s: filled %s's data dir (%d bytes)", f.name, f.c.ID(f.i), f.bytes)
}

func (f *filledDisk) Heal(ctx context.Context) error {
	if err := f.c.FreeDataDir(f.i); err != nil {
		return fmt.Errorf("heal %s: %w", f, err)
	}
	return nil
}
