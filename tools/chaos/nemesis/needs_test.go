package nemesis

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

func TestKindGroupsTheNemeses(t *testing.T) {
	want := map[string]string{
		"kill-leader": "kill", "kill-random": "kill",
		"pause": "pause", "pause-random": "pause",
		"partition-leader": "partition", "partition-majority": "partition", "partition-bridge": "partition",
		"disk-full-leader": "disk", "disk-full-follower": "disk",
	}
	for _, name := range Names() {
		n, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := Kind(n[0]); got != want[name] {
			t.Errorf("Kind(%s) = %q, want %q", name, got, want[name])
		}
	}
	if len(Names()) != len(want) {
		t.Errorf("nemeses %v: a new one needs its kind checked here", Names())
	}
}

// TestLeaderIsFoundWhileAnotherFaultIsInPlace pauses the leader, as the
// combined nemesis does before a second fault: the paused server answers
// nothing, so WaitLeader (every running server must agree) cannot finish,
// but a nemesis aimed at the leader must find the one the others elected.
func TestLeaderIsFoundWhileAnotherFaultIsInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts masterd processes")
	}
	c := testcluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fault, err := pause{leader: true}.Inject(ctx, c, rand.New(rand.NewSource(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer fault.Heal(context.Background())
	if p := fault.(*paused); p.i != old {
		t.Fatalf("%s paused %s, the leader is %s", fault, c.ID(p.i), c.ID(old))
	}
	found, err := target(ctx, c, rand.New(rand.NewSource(1)), true)
	if err != nil {
		t.Fatal(err)
	}
	if found == old {
		t.Fatalf("found the paused %s as the leader", c.ID(old))
	}
	info, err := c.ClusterInfo(ctx, found)
	if err != nil || info.Leader == nil || info.Leader.ID != c.ID(found) {
		t.Fatalf("%s was found as the leader, but names %+v (%v)", c.ID(found), info, err)
	}
}
