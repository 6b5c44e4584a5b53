package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

// Needs is what a nemesis needs of the cluster it runs against, so that the
// runner builds the cluster the chosen nemeses can work on.
type Needs struct {
	// Netns: servers in network namespaces of their own
	// (testcluster.WithNetns), for the partition nemeses.
	Netns bool
	// Tmpfs: a tmpfs data dir per server (testcluster.WithTmpfsDataDirs),
	// for the disk-full nemeses.
	Tmpfs bool
}

// Needer is a Nemesis that needs more than a plain cluster of processes.
type Needer interface {
	Needs() Needs
}

func (partition) Needs() Needs { return Needs{Netns: true} }
func (diskFull) Needs() Needs  { return Needs{Tmpfs: true} }

// NeedsOf is what the nemeses need together.
func NeedsOf(nemeses []Nemesis) Needs {
	var all Needs
	for _, n := range nemeses {
		if nd, ok := n.(Needer); ok {
			need := nd.Needs()
			all.Netns = all.Netns || need.Netns
			all.Tmpfs = all.Tmpfs || need.Tmpfs
		}
	}
	return all
}

// Kind is the family of a nemesis: kill, pause, partition or disk. The
// combined schedule overlaps two faults only of different kinds: two cuts
// would replace each other (a cluster has one set of cuts), two fills of
// one disk would be freed by either heal.
func Kind(n Nemesis) string {
	kind, _, _ := strings.Cut(n.Name(), "-")
	return kind
}

// leaderLookup bounds one GET /v1/cluster while looking for the leader: a
// paused server answers nothing, and must not hold the others' answers up.
const leaderLookup = time.Second

// majorityLeader finds the server that names itself leader and that more
// than half of all servers name. Unlike testcluster's WaitLeader it does
// not need every running server to answer or to agree, so it finds the
// leader while another fault is in place: a paused server that answers
// nothing, a cut-off one that names no leader or an old one.
func majorityLeader(ctx context.Context, c *testcluster.Cluster) (int, error) {
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		i, err := followedByMajority(ctx, c)
		if err == nil {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("find leader: %w (last: %v)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

func followedByMajority(ctx context.Context, c *testcluster.Cluster) (int, error) {
	named := make([]string, c.N()) // the leader each server names, "" if none or no answer
	var wg sync.WaitGroup
	for _, i := range c.Live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, leaderLookup)
			defer cancel()
			if info, err := c.ClusterInfo(ctx, i); err == nil && info.Leader != nil {
				named[i] = info.Leader.ID
			}
		}()
	}
	wg.Wait()
	votes := map[string]int{}
	for _, id := range named {
		if id != "" {
			votes[id]++
		}
	}
	for i := range c.N() {
		if named[i] == c.ID(i) && votes[c.ID(i)] > c.N()/2 && c.Alive(i) {
			return i, nil
		}
	}
	return -1, errors.New("no running server is followed by a majority")
}
