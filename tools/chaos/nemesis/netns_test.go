package nemesis

import (
	"context"
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

// side maps each server to the group it was put in by the fault.
func side(t *testing.T, f *partitioned, n int) []int {
	t.Helper()
	at := make([]int, n)
	for i := range at {
		at[i] = -1
	}
	for g, members := range f.groups {
		for _, i := range members {
			if at[i] >= 0 {
				t.Fatalf("%s: %s is in two groups", f, f.c.ID(i))
			}
			at[i] = g
		}
	}
	for i, g := range at {
		if g < 0 {
			t.Fatalf("%s: %s is in no group", f, f.c.ID(i))
		}
	}
	return at
}

// checkShape checks that the network the fault left is the one its name
// promises, and that CutOff names the servers no majority can serve.
func checkShape(t *testing.T, c *testcluster.Cluster, f *partitioned, leader int) {
	t.Helper()
	n := c.N()
	at := side(t, f, n)
	var wantCutOff []int
	switch f.name {
	case "partition-leader", "partition-majority":
		if len(f.groups) != 2 {
			t.Fatalf("%s: %d groups, want 2", f, len(f.groups))
		}
		minority, majority := f.groups[0], f.groups[1]
		if len(minority) == 0 || len(minority) > (n-1)/2 || len(majority) <= n/2 {
			t.Errorf("%s: sides of %d and %d servers of %d, want a minority and a majority", f, len(minority), len(majority), n)
		}
		if f.name == "partition-leader" && !slices.Equal(minority, []int{leader}) {
			t.Errorf("%s: isolated %v, want the leader %s alone", f, minority, c.ID(leader))
		}
		for i := range n {
			for j := range n {
				if want := at[i] == at[j]; c.Connected(i, j) != want {
					t.Errorf("%s: Connected(%s, %s) = %v, want %v", f, c.ID(i), c.ID(j), !want, want)
				}
			}
		}
		wantCutOff = slices.Sorted(slices.Values(minority))
	case "partition-bridge":
		if len(f.groups) != 3 || len(f.groups[1]) != 1 || len(f.groups[0]) == 0 || len(f.groups[2]) == 0 {
			t.Fatalf("%s: want two non-empty halves and one hub", f)
		}
		for i := range n {
			for j := range n {
				// Only the two ends are cut from each other.
				want := !(at[i] == 0 && at[j] == 2 || at[i] == 2 && at[j] == 0)
				if c.Connected(i, j) != want {
					t.Errorf("%s: Connected(%s, %s) = %v, want %v", f, c.ID(i), c.ID(j), !want, want)
				}
			}
		}
		// Every end reaches the hub, which reaches everyone: none is cut off.
	default:
		t.Fatalf("unexpected fault %s", f)
	}
	if got := f.CutOff(); !slices.Equal(got, wantCutOff) {
		t.Errorf("%s: CutOff() = %v, want %v", f, got, wantCutOff)
	}
}

func TestPartitionNemesesCutAndHeal(t *testing.T) {
	testcluster.RequireNetns(t)
	c := testcluster.Start(t, 5, testcluster.WithNetns())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewSource(13))

	for _, name := range []string{"partition-leader", "partition-majority", "partition-bridge"} {
		nems, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 2 {
			if _, err := c.WaitLeader(ctx); err != nil {
				t.Fatalf("%s round %d: %v", name, round, err)
			}
			fault, err := nems[0].Inject(ctx, c, rng)
			if err != nil {
				t.Fatalf("%s round %d: %v", name, round, err)
			}
			t.Logf("injected %s", fault)
			f, ok := fault.(*partitioned)
			if !ok {
				t.Fatalf("%s returned %T", name, fault)
			}
			if _, ok := fault.(CutOffer); !ok {
				t.Errorf("%s's fault does not tell which servers it cut off", name)
			}
			if !strings.HasPrefix(fault.String(), name+": {") {
				t.Errorf("fault reads %q, want it to start with %q and the groups", fault, name)
			}
			// Leader() is the one the nemesis found when it injected.
			checkShape(t, c, f, c.Leader())
			if err := fault.Heal(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range c.N() {
				for j := range c.N() {
					if !c.Connected(i, j) {
						t.Errorf("after healing %s, %s and %s are still cut", fault, c.ID(i), c.ID(j))
					}
				}
			}
			if got := f.CutOff(); len(got) != 0 {
				t.Errorf("after healing %s, CutOff() = %v", fault, got)
			}
		}
	}
	// Healed, the cluster agrees on one leader again.
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPartitionNemesesRefuseAClusterWithoutNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a masterd process")
	}
	c := testcluster.Start(t, 1)
	for _, name := range []string{"partition-leader", "partition-majority", "partition-bridge"} {
		nems, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nems[0].Inject(context.Background(), c, rand.New(rand.NewSource(1))); !errors.Is(err, errNeedsNetns) {
			t.Errorf("%s on a cluster without namespaces: %v, want %v", name, err, errNeedsNetns)
		}
	}
}
