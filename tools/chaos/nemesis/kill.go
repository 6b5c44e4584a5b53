package nemesis

import (
	"context"
	"fmt"
	"math/rand"

	"github.com/allot/allot/masterd/testcluster"
)

func init() {
	Register(kill{leader: true})
	Register(kill{leader: false})
}

// kill is `kill -9` of one server; healing restarts it from its data dir
// with its first command line, as a service manager would.
type kill struct{ leader bool }

func (k kill) Name() string {
	if k.leader {
		return "kill-leader"
	}
	return "kill-random"
}

func (k kill) Inject(ctx context.Context, c *testcluster.Cluster, rng *rand.Rand) (Fault, error) {
	i, err := target(ctx, c, rng, k.leader)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.Name(), err)
	}
	if err := c.Kill(i); err != nil {
		return nil, fmt.Errorf("%s: %w", k.Name(), err)
	}
	return &killed{c: c, i: i, name: k.Name()}, nil
}

type killed struct {
	c    *testcluster.Cluster
	i    int
	name string
}

func (f *killed) String() string { return fmt.Sprintf("%s: kill -9 %s", f.name, f.c.ID(f.i)) }

func (f *killed) Heal(ctx context.Context) error {
	if err := f.c.Restart(f.i); err != nil {
		return fmt.Errorf("heal %s: %w", f, err)
	}
	return nil
}
