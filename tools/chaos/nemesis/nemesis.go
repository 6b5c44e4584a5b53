// Package nemesis holds the faults the chaos program injects into a running
// masterd cluster: each Nemesis injects one kind and returns a Fault that
// heals it. Kill and pause live here; partitions (netns.go) and disk faults
// (disk.go) add their own files.
package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"

	"github.com/allot/allot/masterd/testcluster"
)

// A Nemesis injects one kind of fault into a running cluster and heals it.
type Nemesis interface {
	Name() string // e.g. "kill-leader", "partition-majority"
	Inject(ctx context.Context, c *testcluster.Cluster, rng *rand.Rand) (Fault, error)
}

// Fault is one injected fault; Heal ends it (restarts, resumes, reconnects, frees space).
type Fault interface {
	String() string // what was done, for the log and the report
	Heal(ctx context.Context) error
}

// registry maps a name to its Nemesis; files of this package add theirs in
// init through Register, so the program's -nemesis flag knows every kind.
var registry = map[string]Nemesis{}

// Register makes n selectable by its name. A second registration of a name
// is a programming error.
func Register(n Nemesis) {
	if _, dup := registry[n.Name()]; dup {
		panic("nemesis: registered twice: " + n.Name())
	}
	registry[n.Name()] = n
}

// Names lists the registered nemeses, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the nemeses named in a comma-separated list; "combined"
// stands for every registered one.
func Lookup(list string) ([]Nemesis, error) {
	var out []Nemesis
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if name == "combined" {
			for _, n := range Names() {
				out = append(out, registry[n])
			}
			continue
		}
		n, ok := registry[name]
		if !ok {
			return nil, fmt.Errorf("unknown nemesis %q (known: %s, combined)", name, strings.Join(Names(), ", "))
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nemesis in %q (known: %s, combined)", list, strings.Join(Names(), ", "))
	}
	return out, nil
}

// target picks the leader (asking the cluster, so a stale answer is not
// used; the server a majority follows, so that it is found while another
// fault is in place) or a random running server.
func target(ctx context.Context, c *testcluster.Cluster, rng *rand.Rand, leader bool) (int, error) {
	if leader {
		return majorityLeader(ctx, c)
	}
	live := c.Live()
	if len(live) == 0 {
		return -1, fmt.Errorf("no server is running")
	}
	return live[rng.Intn(len(live))], nil
}
