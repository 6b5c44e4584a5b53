package nemesis

import (
	"context"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

func TestDiskFullFillsAndHeals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts masterd processes")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs per server (data dirs that fill up)")
	}
	c := testcluster.Start(t, 3, testcluster.WithTmpfsDataDirs(8<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	for _, n := range []Nemesis{diskFull{leader: false}, diskFull{leader: true}} {
		fault, err := n.Inject(ctx, c, rng)
		if err != nil {
			t.Fatal(err)
		}
		f := fault.(*filledDisk)
		if n.(diskFull).leader != (f.i == leader) {
			t.Fatalf("%s filled %s; the leader is %s", n.Name(), c.ID(f.i), c.ID(leader))
		}
		if free, err := c.DataDirFree(f.i); err != nil || free != 0 {
			t.Fatalf("%s: %d bytes free (%v), want none", fault, free, err)
		}
		if err := fault.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if free, err := c.DataDirFree(f.i); err != nil || free < 4<<20 {
			t.Fatalf("healed %s: %d bytes free (%v)", fault, free, err)
		}
	}
}

func TestDiskFullRefusesAClusterWithoutTmpfs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a masterd process")
	}
	c := testcluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := (diskFull{leader: true}).Inject(ctx, c, rand.New(rand.NewSource(1))); err == nil {
		t.Fatal("filled a data dir that is not a tmpfs")
	}
}
