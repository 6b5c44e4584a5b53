package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"

	"github.com/allot/allot/masterd/testcluster"
)

func init() {
	Register(partition{kind: "leader"})
	Register(partition{kind: "majority"})
	Register(partition{kind: "bridge"})
}

// partition cuts the network between servers while clients still reach
// every one (servers in network namespaces: testcluster.WithNetns); healing
// reconnects them all.
//   - partition-leader isolates the leader;
//   - partition-majority splits the cluster into a random minority and the
//     majority;
//   - partition-bridge splits the others into two halves that reach one
//     server in the middle but not each other (Jepsen's bridge).
type partition struct{ kind string }

func (p partition) Name() string { return "partition-" + p.kind }

// errNeedsNetns is what a partition nemesis answers on a cluster whose
// servers share the test process's network.
var errNeedsNetns = errors.New("needs a cluster started with testcluster.WithNetns (servers in network namespaces)")

func (p partition) Inject(ctx context.Context, c *testcluster.Cluster, rng *rand.Rand) (Fault, error) {
	if !c.Partitionable() {
		return nil, fmt.Errorf("%s: %w", p.Name(), errNeedsNetns)
	}
	if p.kind != "leader" && c.N() < 3 {
		return nil, fmt.Errorf("%s: needs at least 3 servers, the cluster has %d", p.Name(), c.N())
	}
	f := &partitioned{c: c, name: p.Name()}
	var err error
	switch p.kind {
	case "leader":
		var leader int
		if leader, err = target(ctx, c, rng, true); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name(), err)
		}
		f.groups = [][]int{{leader}, others(c.N(), leader)}
		err = c.Isolate(leader)
	case "majority":
		perm := rng.Perm(c.N())
		minority := 1 + rng.Intn((c.N()-1)/2) // 1 .. the largest minority
		f.groups = [][]int{perm[:minority], perm[minority:]}
		err = c.Partition(f.groups...)
	case "bridge":
		perm := rng.Perm(c.N())
		hub, rest := perm[0], perm[1:]
		half := len(rest) / 2
		f.groups = [][]int{rest[:half], {hub}, rest[half:]}
		err = c.Bridge(rest[:half], rest[half:])
	default:
		return nil, fmt.Errorf("nemesis: unknown partition %q", p.kind)
	}
	if err != nil {
		// A half-applied cut must not outlive the failed injection.
		err = errors.Join(err, c.Heal())
		return nil, fmt.Errorf("%s: %w", p.Name(), err)
	}
	return f, nil
}

func others(n, i int) []int {
	var out []int
	for j := range n {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// partitioned is one cut; groups are the sides as injected (for a bridge:
// one half, the hub, the other half).
type partitioned struct {
	c      *testcluster.Cluster
	name   string
	groups [][]int
}

func (f *partitioned) String() string {
	sides := make([]string, len(f.groups))
	for k, g := range f.groups {
		ids := make([]string, len(g))
		for j, i := range g {
			ids[j] = f.c.ID(i)
		}
		sides[k] = "{" + strings.Join(ids, " ") + "}"
	}
	sep := " | "
	if f.name == "partition-bridge" {
		sep = " ~ " // the hub in the middle reaches both ends
	}
	return fmt.Sprintf("%s: %s", f.name, strings.Join(sides, sep))
}

// CutOff lists the servers that, while the fault lasts, reach no server
// that reaches a majority: they can neither lead nor reach a leader, so a
// write they acknowledge or a linearizable read they answer is a bug.
func (f *partitioned) CutOff() []int {
	n := f.c.N()
	reach := func(i int) []int { // i's neighbours, itself included
		var out []int
		for j := range n {
			if f.c.Connected(i, j) {
				out = append(out, j)
			}
		}
		return out
	}
	var cut []int
	for i := range n {
		served := false
		for _, j := range reach(i) {
			served = served || len(reach(j)) > n/2
		}
		if !served {
			cut = append(cut, i)
		}
	}
	return cut
}

// Heal reconnects every server, even when ctx is done: a cut left in place
// would outlive the run in the servers' namespaces.
func (f *partitioned) Heal(ctx context.Context) error {
	if err := f.c.Heal(); err != nil {
		return fmt.Errorf("heal %s: %w", f, err)
	}
	return nil
}

// CutOffer is a Fault that knows which servers it cut off from any
// majority (the partition nemeses); the checker can hold those servers to
// "no acknowledged write, no linearizable read" while the fault lasts.
type CutOffer interface {
	Fault
	CutOff() []int
}
