package testcluster_test

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

// startupBound only guards against a hang; it is not a performance claim.
const startupBound = 2 * time.Minute

func TestClusterElectsLeaderAndSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three masterd processes")
	}
	c := testcluster.Start(t, 3, testcluster.WithOperatorToken("operator-secret"))
	ctx, cancel := context.WithTimeout(context.Background(), startupBound)
	defer cancel()

	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Leader(); got != leader {
		t.Fatalf("Leader() = %d, WaitLeader returned %d", got, leader)
	}
	if got := len(c.Followers()); got != 2 {
		t.Fatalf("got %d followers, want 2", got)
	}
	for i := range c.N() {
		info, err := c.ClusterInfo(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if info.Leader.ID != c.ID(leader) || info.Leader.RaftAddress != c.RaftAddress(leader) {
			t.Errorf("%s reports leader %+v, want %s at %s", c.ID(i), info.Leader, c.ID(leader), c.RaftAddress(leader))
		}
		if len(info.Servers) != 3 {
			t.Errorf("%s lists %d servers, want 3: %+v", c.ID(i), len(info.Servers), info.Servers)
		}
	}

	// The token must be what lets the harness in: the same call without it is
	// refused, so WaitLeader above really ran with -operator-token.
	resp, err := http.Get(c.Address(leader) + "/v1/quotas")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/quotas without a token: %s, want 401", resp.Status)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if c.Alive(leader) || c.Leader() != -1 {
		t.Fatalf("after Kill: Alive = %v, Leader() = %d", c.Alive(leader), c.Leader())
	}
	next, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("killed leader %s is still the leader", c.ID(leader))
	}

	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(c.Live()); got != 3 {
		t.Fatalf("%d servers running after Restart, want 3", got)
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := testcluster.ModuleRoot(root + "/masterd/testcluster")
	if err != nil {
		t.Fatal(err)
	}
	if sub != root {
		t.Errorf("ModuleRoot from a subdirectory = %s, want %s", sub, root)
	}
	if _, err := testcluster.ModuleRoot(t.TempDir()); err == nil {
		t.Error("ModuleRoot outside any module: want an error")
	}
}

// TestStopKillsEveryServerThatIgnoresSIGTERM: two stopped servers (SIGSTOP,
// so SIGTERM waits) are both killed once the deadline passes; Stop used to
// wait forever on the second.
func TestStopKillsEveryServerThatIgnoresSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three masterd processes")
	}
	c := testcluster.Start(t, 3)
	for _, i := range []int{1, 2} {
		if err := c.Signal(i, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(startupBound):
		t.Fatal("Stop did not return: a server that ignored SIGTERM was not killed")
	}
	for i := range c.N() {
		if c.Alive(i) {
			t.Errorf("%s still runs after Stop", c.ID(i))
		}
	}
}
