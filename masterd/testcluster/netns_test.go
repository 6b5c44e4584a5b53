package testcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

const netnsToken = "operator-secret"

// requestBound keeps one request from hanging the test; a request that hits
// it counts as unacknowledged, never as a success.
const requestBound = 30 * time.Second

var netnsClient = &http.Client{}

// putQPS writes qps for principal through one server only (no retry on
// another): 200 is an acknowledged write; anything else, or an error, is not.
func putQPS(ctx context.Context, addr, principal string, qps int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, requestBound)
	defer cancel()
	body := fmt.Sprintf(`{"qps": %d}`, qps)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, addr+"/v1/ratelimits/"+principal, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+netnsToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := netnsClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// getQPS reads principal's qps from one server: linearizable, or its local
// state when stale.
func getQPS(ctx context.Context, addr, principal string, stale bool) (status, qps int, err error) {
	ctx, cancel := context.WithTimeout(ctx, requestBound)
	defer cancel()
	u := addr + "/v1/ratelimits/" + principal
	if stale {
		u += "?stale=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+netnsToken)
	resp, err := netnsClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, 0, nil
	}
	var rl struct {
		QPS *float64 `json:"qps"`
	}
	if err := json.Unmarshal(data, &rl); err != nil || rl.QPS == nil {
		return resp.StatusCode, 0, fmt.Errorf("GET %s: %q: %v", u, data, err)
	}
	return resp.StatusCode, int(*rl.QPS), nil
}

func startNetns(t *testing.T, n int) (*testcluster.Cluster, context.Context) {
	t.Helper()
	c := testcluster.Start(t, n, testcluster.WithNetns(), testcluster.WithOperatorToken(netnsToken))
	ctx, cancel := context.WithTimeout(context.Background(), 5*startupBound)
	t.Cleanup(cancel)
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

func mustPut(t *testing.T, ctx context.Context, c *testcluster.Cluster, i int, principal string, qps int) {
	t.Helper()
	status, err := putQPS(ctx, c.Address(i), principal, qps)
	if err != nil || status != http.StatusOK {
		t.Fatalf("PUT qps=%d through %s: status %d, %v", qps, c.ID(i), status, err)
	}
}

// subnetOf is 10.200.X of server i's address.
func subnetOf(t *testing.T, c *testcluster.Cluster, i int) string {
	t.Helper()
	u, err := url.Parse(c.Address(i))
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || ip.IsLoopback() || !strings.HasPrefix(ip.String(), "10.200.") {
		t.Fatalf("%s listens on %s, want an address of 10.200.0.0/16", c.ID(i), u.Host)
	}
	return ip.String()[:strings.LastIndex(ip.String(), ".")]
}

func ipOutput(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestNetnsServersRunInTheirOwnNamespaces(t *testing.T) {
	testcluster.RequireNetns(t)
	c, ctx := startNetns(t, 3)
	subnet := subnetOf(t, c, 0)
	for i := range c.N() {
		if got := subnetOf(t, c, i); got != subnet {
			t.Errorf("%s is on %s, %s on %s: one cluster, one subnet", c.ID(i), got, c.ID(0), subnet)
		}
		// The pid the cluster signals is masterd itself, inside its namespace.
		pid := c.Pid(i)
		waitMasterd(t, ctx, pid)
		if ns := strings.TrimSpace(ipOutput(t, "netns", "identify", strconv.Itoa(pid))); ns != c.Namespace(i) || ns == "" {
			t.Errorf("%s (pid %d) runs in namespace %q, want %q", c.ID(i), pid, ns, c.Namespace(i))
		}
	}
	// Clients reach every server, and the servers reach each other: a write
	// through one is read, linearizably, through all.
	mustPut(t, ctx, c, c.Followers()[0], "netns", 7)
	for i := range c.N() {
		if status, qps, err := getQPS(ctx, c.Address(i), "netns", false); err != nil || status != http.StatusOK || qps != 7 {
			t.Errorf("GET through %s: status %d qps %d %v, want 200 qps 7", c.ID(i), status, qps, err)
		}
	}

	// A killed server restarts in its namespace.
	victim := c.Followers()[0]
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	waitMasterd(t, ctx, c.Pid(victim))
	if ns := strings.TrimSpace(ipOutput(t, "netns", "identify", strconv.Itoa(c.Pid(victim)))); ns != c.Namespace(victim) {
		t.Errorf("restarted %s runs in namespace %q, want %q", c.ID(victim), ns, c.Namespace(victim))
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}

	namespaces := []string{c.Namespace(0), c.Namespace(1), c.Namespace(2)}
	c.Stop()
	listed := ipOutput(t, "netns", "list")
	for _, ns := range namespaces {
		if strings.Contains(listed, ns+" ") || strings.Contains(listed, ns+"\n") {
			t.Errorf("namespace %s outlived Stop:\n%s", ns, listed)
		}
	}
	if addrs := strings.TrimSpace(ipOutput(t, "-o", "addr", "show", "to", subnet+".0/24")); addrs != "" {
		t.Errorf("the subnet %s.0/24 outlived Stop:\n%s", subnet, addrs)
	}
}

// waitMasterd waits until pid runs masterd: a server starts as `ip netns
// exec`, which enters the namespace and then execs masterd in place.
func waitMasterd(t *testing.T, ctx context.Context, pid int) {
	t.Helper()
	for {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && filepath.Base(exe) == "masterd" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pid %d never became masterd (last: %q, %v)", pid, exe, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// deadPid is the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.Pid()
}

func TestSweepStaleNetnsRemovesOnlyWhatDeadOwnersLeft(t *testing.T) {
	testcluster.RequireNetns(t)
	dead := deadPid(t)
	// Subnet 0 and bridge 255 lie outside the 1..254 that clusters claim, so
	// this test cannot touch a live cluster's.
	staleNS := fmt.Sprintf("allot-%d-0-m1", dead)
	liveNS := "allot-1-0-m1" // pid 1 always runs
	staleBridge := "allotbr255"
	ipOutput(t, "netns", "add", staleNS)
	ipOutput(t, "netns", "add", liveNS)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "delete", liveNS).Run()
		exec.Command("ip", "netns", "delete", staleNS).Run()
		exec.Command("ip", "link", "delete", "dev", staleBridge).Run()
	})
	ipOutput(t, "link", "add", "name", staleBridge, "type", "bridge")
	ipOutput(t, "link", "set", "dev", staleBridge, "alias", fmt.Sprintf("allot-testcluster pid %d", dead))

	testcluster.SweepStaleNetns()

	listed := ipOutput(t, "netns", "list")
	if strings.Contains(listed, staleNS) {
		t.Errorf("namespace %s of dead pid %d survived the sweep:\n%s", staleNS, dead, listed)
	}
	if !strings.Contains(listed, liveNS) {
		t.Errorf("namespace %s of running pid 1 was swept:\n%s", liveNS, listed)
	}
	if err := exec.Command("ip", "link", "show", "dev", staleBridge).Run(); err == nil {
		t.Errorf("bridge %s of dead pid %d survived the sweep", staleBridge, dead)
	}
}

// canDial reports whether server from can open a TCP connection to server
// to's Raft port, trying from inside from's namespace.
func canDial(c *testcluster.Cluster, from, to int) bool {
	host, port, _ := net.SplitHostPort(c.RaftAddress(to))
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port)
	return exec.Command("ip", "netns", "exec", c.Namespace(from), "bash", "-c", script).Run() == nil
}

// checkCuts compares the real network with want (pairs that must be cut) and
// with Connected, and checks that the test process reaches every server.
func checkCuts(t *testing.T, ctx context.Context, c *testcluster.Cluster, want [][2]int) {
	t.Helper()
	cut := map[[2]int]bool{}
	for _, p := range want {
		cut[[2]int{min(p[0], p[1]), max(p[0], p[1])}] = true
	}
	for i := range c.N() {
		for j := range c.N() {
			if i == j {
				continue
			}
			wantConnected := !cut[[2]int{min(i, j), max(i, j)}]
			if got := c.Connected(i, j); got != wantConnected {
				t.Errorf("Connected(%s, %s) = %v, want %v", c.ID(i), c.ID(j), got, wantConnected)
			}
			if got := canDial(c, i, j); got != wantConnected {
				t.Errorf("%s dials %s: %v, want %v", c.ID(i), c.ID(j), got, wantConnected)
			}
		}
		// A TCP connection, not an API call: a server cut off from the
		// leader may take long to answer even GET /v1/cluster (a
		// linearizable read), yet the network to it is whole.
		u, _ := url.Parse(c.Address(i))
		conn, err := net.DialTimeout("tcp", u.Host, requestBound)
		if err != nil {
			t.Errorf("the client cannot reach %s: %v", c.ID(i), err)
		} else {
			conn.Close()
		}
	}
}

func TestPartitionPrimitivesCutOnlyBetweenServers(t *testing.T) {
	testcluster.RequireNetns(t)
	c, ctx := startNetns(t, 3)
	checkCuts(t, ctx, c, nil)

	if err := c.Isolate(1); err != nil {
		t.Fatal(err)
	}
	checkCuts(t, ctx, c, [][2]int{{1, 0}, {1, 2}})

	if err := c.Partition([]int{0, 1}, []int{2}); err != nil {
		t.Fatal(err)
	}
	checkCuts(t, ctx, c, [][2]int{{0, 2}, {1, 2}})

	if err := c.Bridge([]int{0}, []int{2}); err != nil {
		t.Fatal(err)
	}
	checkCuts(t, ctx, c, [][2]int{{0, 2}})

	// Bad requests are refused and change nothing.
	for name, bad := range map[string]func() error{
		"server in no group":   func() error { return c.Partition([]int{0}, []int{1}) },
		"server named twice":   func() error { return c.Partition([]int{0, 1}, []int{1, 2}) },
		"unknown server":       func() error { return c.Partition([]int{0, 1, 2}, []int{3}) },
		"negative server":      func() error { return c.Isolate(-1) },
		"bridge without a hub": func() error { return c.Bridge([]int{0, 1}, []int{2}) },
		"empty bridge side":    func() error { return c.Bridge(nil, []int{2}) },
	} {
		if err := bad(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	checkCuts(t, ctx, c, [][2]int{{0, 2}})

	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	checkCuts(t, ctx, c, nil)
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPartitionNeedsNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a masterd process")
	}
	c := testcluster.Start(t, 1)
	if c.Partitionable() {
		t.Fatal("a cluster without WithNetns claims it can be partitioned")
	}
	for name, op := range map[string]func() error{
		"Partition": func() error { return c.Partition([]int{0}) },
		"Isolate":   func() error { return c.Isolate(0) },
		"Bridge":    func() error { return c.Bridge([]int{0}, []int{0}) },
		"Heal":      c.Heal,
	} {
		if err := op(); err == nil || !strings.Contains(err.Error(), "WithNetns") {
			t.Errorf("%s on a cluster without namespaces: %v, want an error naming WithNetns", name, err)
		}
	}
}

// checkMinorityServesNothing checks that no server of minority acknowledges a
// write or answers a linearizable read: cut off from the majority, it cannot
// know the latest acknowledged value (latest, written by the majority), so
// any answer but an error would be stale.
func checkMinorityServesNothing(t *testing.T, ctx context.Context, c *testcluster.Cluster, minority []int, principal string, latest, attempt int) {
	t.Helper()
	for _, i := range minority {
		start := time.Now()
		if status, err := putQPS(ctx, c.Address(i), principal, attempt); err == nil && status == http.StatusOK {
			t.Errorf("%s, cut off from the majority, acknowledged qps=%d", c.ID(i), attempt)
		} else {
			t.Logf("%s refused the write after %v: status %d, %v", c.ID(i), time.Since(start).Round(time.Millisecond), status, err)
		}
		start = time.Now()
		status, qps, err := getQPS(ctx, c.Address(i), principal, false)
		if err == nil && status == http.StatusOK {
			t.Errorf("%s, cut off from the majority, answered a linearizable read: qps=%d (latest acknowledged %d)", c.ID(i), qps, latest)
		} else {
			t.Logf("%s refused the linearizable read after %v: status %d, %v", c.ID(i), time.Since(start).Round(time.Millisecond), status, err)
		}
	}
}

// checkConverges heals the network and waits until every server holds want,
// in its local state and through a linearizable read.
func checkConverges(t *testing.T, ctx context.Context, c *testcluster.Cluster, principal string, want int) {
	t.Helper()
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range c.N() {
		for {
			status, qps, err := getQPS(ctx, c.Address(i), principal, true)
			if err == nil && status == http.StatusOK && qps == want {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never converged: stale read status %d qps %d %v, want qps %d", c.ID(i), status, qps, err, want)
			case <-time.After(50 * time.Millisecond):
			}
		}
		if status, qps, err := getQPS(ctx, c.Address(i), principal, false); err != nil || status != http.StatusOK || qps != want {
			t.Errorf("after healing, %s reads status %d qps %d %v, want 200 qps %d", c.ID(i), status, qps, err, want)
		}
	}
}

func without(all []int, drop ...int) []int {
	var out []int
	for _, i := range all {
		if !slices.Contains(drop, i) {
			out = append(out, i)
		}
	}
	return out
}

func servers(c *testcluster.Cluster) []int {
	all := make([]int, c.N())
	for i := range all {
		all[i] = i
	}
	return all
}

func TestIsolatedLeaderServesNothingAndTheMajorityGoesOn(t *testing.T) {
	testcluster.RequireNetns(t)
	c, ctx := startNetns(t, 3)
	old := c.Leader()
	mustPut(t, ctx, c, old, "isolated", 1)

	if err := c.Isolate(old); err != nil {
		t.Fatal(err)
	}
	majority := without(servers(c), old)
	cut := time.Now()
	leader, err := c.WaitLeaderAmong(ctx, majority)
	if err != nil {
		t.Fatal(err)
	}
	// A figure, not an assertion: the machine is shared.
	t.Logf("the majority %v agreed on leader %s within %v of the cut (an upper bound: the polls themselves can wait on the old leader)", majority, c.ID(leader), time.Since(cut).Round(time.Millisecond))
	// The majority acknowledges writes through its leader and its follower.
	mustPut(t, ctx, c, leader, "isolated", 2)
	mustPut(t, ctx, c, without(majority, leader)[0], "isolated", 3)

	checkMinorityServesNothing(t, ctx, c, []int{old}, "isolated", 3, 100)
	checkConverges(t, ctx, c, "isolated", 3)
}

func TestMajorityMinoritySplit(t *testing.T) {
	testcluster.RequireNetns(t)
	c, ctx := startNetns(t, 5)
	old := c.Leader()
	mustPut(t, ctx, c, old, "split", 1)

	// The old leader and one follower on the minority side.
	minority := []int{old, c.Followers()[0]}
	majority := without(servers(c), minority...)
	if err := c.Partition(minority, majority); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	leader, err := c.WaitLeaderAmong(ctx, majority)
	if err != nil {
		t.Fatal(err)
	}
	// A figure, not an assertion: the machine is shared.
	t.Logf("the majority %v agreed on leader %s within %v of the cut (an upper bound: the polls themselves can wait on the old leader)", majority, c.ID(leader), time.Since(cut).Round(time.Millisecond))
	mustPut(t, ctx, c, leader, "split", 2)
	mustPut(t, ctx, c, without(majority, leader)[0], "split", 3)

	checkMinorityServesNothing(t, ctx, c, minority, "split", 3, 100)
	checkConverges(t, ctx, c, "split", 3)
}

func TestBridgePartition(t *testing.T) {
	testcluster.RequireNetns(t)
	c, ctx := startNetns(t, 3)
	leader := c.Leader()
	mustPut(t, ctx, c, leader, "bridge", 1)

	// The leader at one end: it still reaches a majority (itself and the
	// bridge), the far end reaches only the bridge.
	followers := c.Followers()
	hub, far := followers[0], followers[1]
	if err := c.Bridge([]int{leader}, []int{far}); err != nil {
		t.Fatal(err)
	}
	// Some server of the cluster must keep acknowledging writes: a majority
	// is connected through the bridge. Whoever leads, the write goes there.
	latest := 1
	for qps := 2; qps <= 4; qps++ {
		acked := false
		for !acked {
			for i := range c.N() {
				if status, err := putQPS(ctx, c.Address(i), "bridge", qps); err == nil && status == http.StatusOK {
					acked = true
					break
				}
			}
			if acked {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no server acknowledged qps=%d during the bridge partition", qps)
			case <-time.After(50 * time.Millisecond):
			}
		}
		latest = qps
	}
	// Every linearizable read that succeeds, anywhere, returns the latest
	// acknowledged value, and every server answers: the far end, cut off
	// from the leader, gives up a read it forwarded there once it stops
	// following that leader (a 503), rather than waiting on a connection
	// whose packets are dropped.
	var wg sync.WaitGroup
	for i := range c.N() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			status, got, err := getQPS(ctx, c.Address(i), "bridge", false)
			if err != nil {
				t.Errorf("a linearizable read through %s got no answer: %v", c.ID(i), err)
			}
			if err == nil && status == http.StatusOK && got != latest {
				t.Errorf("%s served a stale linearizable read: qps=%d, latest acknowledged %d", c.ID(i), got, latest)
			}
			t.Logf("linearizable read through %s: status %d qps %d %v after %v", c.ID(i), status, got, err, time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	t.Logf("bridge %s between %s and %s", c.ID(hub), c.ID(leader), c.ID(far))
	checkConverges(t, ctx, c, "bridge", latest)
}
