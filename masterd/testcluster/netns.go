package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A cluster started WithNetns runs every server in a network namespace of its
// own, so that the network between servers can be cut (Partition, Isolate,
// Bridge) while the test process, the clients, still reach every server:
//
//	root namespace: bridge allotbrX with 10.200.X.1/24 (the clients' side)
//	  ├─ veth alvXm1 ── eth0 10.200.X.2 in namespace allot-PID-X-m1 (server m1)
//	  ├─ veth alvXm2 ── eth0 10.200.X.3 in namespace allot-PID-X-m2 (server m2)
//	  └─ ...
//
// X is claimed per cluster by creating its bridge (the kernel refuses a
// second bridge of that name), so clusters of parallel tests and processes
// get different subnets. A cut is a pair of blackhole routes, one in each
// server's namespace: packets between the two are dropped at the sender,
// packets to and from 10.200.X.1 are not.
//
// Names carry the owner's pid (namespaces in their name, the bridge in its
// alias), so that a later run removes what a crashed one left.

const (
	netnsPrefix  = "allot-"  // namespaces: allot-PID-X-mI
	bridgePrefix = "allotbr" // bridges: allotbrX
	bridgeAlias  = "allot-testcluster pid "
	subnetBase   = "10.200." // 10.200.X.0/24
	maxSubnet    = 254       // X in 1..254
	serverHost   = 2         // server i is 10.200.X.(i+2); .1 is the bridge
)

// WithNetns runs every server in its own network namespace (root and
// iproute2 are needed: see NetnsSupported), on 10.200.X.0/24 with a subnet X
// of the cluster's own, so that Partition, Isolate and Bridge can cut the
// network between servers. Clients in the test process reach every server.
func WithNetns() Option {
	return func(c *Config) { c.Netns = true }
}

// RequireNetns skips a test that runs servers in network namespaces when
// this machine cannot (not root, no iproute2), or in -short mode, saying
// which.
func RequireNetns(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts masterd processes in network namespaces")
	}
	if err := NetnsSupported(); err != nil {
		tb.Skipf("servers in network namespaces: %v", err)
	}
}

// NetnsSupported reports why servers cannot run in network namespaces here
// (not root, no ip command), or nil when they can.
func NetnsSupported() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root (ip netns add)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("network namespaces need the ip command of iproute2: %w", err)
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns list: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// network is one cluster's private network (see the comment above).
type network struct {
	subnet     int
	bridge     string
	namespaces []string // by server index
	veths      []string // host ends, by server index

	mu   sync.Mutex
	cuts map[[2]int]bool // pairs (i < j) that cannot talk
}

// ip runs the ip command with args and, when stdin is not empty, feeds it
// (for -batch -). Its output is part of the error.
func ip(stdin string, args ...string) error {
	cmd := exec.Command("ip", args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newNetwork sweeps what dead owners left, claims a free subnet and makes one
// namespace per server, joined to the subnet's bridge.
func newNetwork(n int) (*network, error) {
	if err := NetnsSupported(); err != nil {
		return nil, fmt.Errorf("testcluster: netns: %w", err)
	}
	SweepStaleNetns()
	nw := &network{cuts: map[[2]int]bool{}}
	if err := nw.claimSubnet(); err != nil {
		return nil, err
	}
	for i := range n {
		if err := nw.addServer(i); err != nil {
			nw.close()
			return nil, err
		}
	}
	return nw, nil
}

var fileExists = regexp.MustCompile(`(?i)file exists`)

// claimSubnet creates the bridge of the first free X, starting at a random
// one so that parallel clusters rarely try the same.
func (nw *network) claimSubnet() error {
	start := rand.Intn(maxSubnet)
	for k := range maxSubnet {
		x := (start+k)%maxSubnet + 1
		bridge := bridgePrefix + strconv.Itoa(x)
		err := ip("", "link", "add", "name", bridge, "type", "bridge")
		if err != nil {
			if fileExists.MatchString(err.Error()) {
				continue // another cluster's
			}
			return fmt.Errorf("testcluster: netns: %w", err)
		}
		nw.subnet, nw.bridge = x, bridge
		setup := fmt.Sprintf("link set dev %s alias %q\naddr add %s/24 dev %s\nlink set dev %s up\n",
			bridge, bridgeAlias+strconv.Itoa(os.Getpid()), nw.hostIP(-1), bridge, bridge)
		if err := ip(setup, "-batch", "-"); err != nil {
			nw.close()
			return fmt.Errorf("testcluster: netns: bridge %s: %w", bridge, err)
		}
		return nil
	}
	return fmt.Errorf("testcluster: netns: every subnet %s1..%d.0/24 is taken", subnetBase, maxSubnet)
}

// hostIP is server i's address; -1 is the bridge, the clients' side.
func (nw *network) hostIP(i int) string {
	return fmt.Sprintf("%s%d.%d", subnetBase, nw.subnet, i+serverHost)
}

func (nw *network) addServer(i int) error {
	ns := fmt.Sprintf("%s%d-%d-m%d", netnsPrefix, os.Getpid(), nw.subnet, i+1)
	veth := fmt.Sprintf("alv%dm%d", nw.subnet, i+1)
	if err := ip("", "netns", "add", ns); err != nil {
		return fmt.Errorf("testcluster: netns: %w", err)
	}
	nw.namespaces = append(nw.namespaces, ns)
	// The server's end is created inside its namespace, so it never shows
	// in the root namespace under a name that could clash.
	if err := ip("", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
		return fmt.Errorf("testcluster: netns: %w", err)
	}
	nw.veths = append(nw.veths, veth)
	if err := ip("", "link", "set", "dev", veth, "master", nw.bridge, "up"); err != nil {
		return fmt.Errorf("testcluster: netns: %w", err)
	}
	inside := fmt.Sprintf("link set dev lo up\naddr add %s/24 dev eth0\nlink set dev eth0 up\n", nw.hostIP(i))
	if err := ip(inside, "-n", ns, "-batch", "-"); err != nil {
		return fmt.Errorf("testcluster: netns %s: %w", ns, err)
	}
	return nil
}

// close deletes the namespaces (their veths go with them) and the bridge.
// The servers must have exited: a namespace outlives its name while a
// process runs in it.
func (nw *network) close() error {
	if nw == nil {
		return nil
	}
	var errs []error
	for _, ns := range nw.namespaces {
		if err := ip("", "netns", "delete", ns); err != nil {
			errs = append(errs, err)
		}
	}
	nw.namespaces = nil
	if nw.bridge != "" {
		if err := ip("", "link", "delete", "dev", nw.bridge); err != nil {
			errs = append(errs, err)
		}
		nw.bridge = ""
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("testcluster: netns cleanup: %w", err)
	}
	return nil
}

// SweepStaleNetns removes the namespaces and bridges of processes that no
// longer run (a test binary killed before its cleanup). New calls it before
// every cluster WithNetns.
func SweepStaleNetns() {
	self := os.Getpid()
	stale := func(pid int) bool { return pid != self && !pidAlive(pid) }
	var namespaces []struct {
		Name string `json:"name"`
	}
	if out, err := exec.Command("ip", "-j", "netns", "list").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		json.Unmarshal(out, &namespaces)
	}
	for _, ns := range namespaces {
		if pid, ok := netnsOwner(ns.Name); ok && stale(pid) {
			ip("", "netns", "delete", ns.Name)
		}
	}
	var links []struct {
		Name  string `json:"ifname"`
		Alias string `json:"ifalias"`
	}
	if out, err := exec.Command("ip", "-j", "link", "show", "type", "bridge").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		json.Unmarshal(out, &links)
	}
	for _, l := range links {
		if !strings.HasPrefix(l.Name, bridgePrefix) || !strings.HasPrefix(l.Alias, bridgeAlias) {
			continue // not ours, or its owner is still between add and alias
		}
		if pid, err := strconv.Atoi(strings.TrimPrefix(l.Alias, bridgeAlias)); err == nil && stale(pid) {
			ip("", "link", "delete", "dev", l.Name)
		}
	}
}

// netnsOwner parses the pid out of allot-PID-X-mI.
func netnsOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, netnsPrefix)
	if !ok {
		return 0, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) != 3 || !strings.HasPrefix(fields[2], "m") {
		return 0, false
	}
	pid, err := strconv.Atoi(fields[0])
	return pid, err == nil
}

// setupNetns makes the cluster's network and moves every address of addrs
// (two per server: HTTP, Raft) onto its server's own IP, keeping the ports.
func (c *Cluster) setupNetns(addrs []string) error {
	if c.cfg.TLS {
		// The certificates name 127.0.0.1; a namespaced server has another address.
		return errors.New("testcluster: WithNetns and WithTLS together are not supported")
	}
	nw, err := newNetwork(c.cfg.N)
	if err != nil {
		return err
	}
	c.netns = nw
	for k, addr := range addrs {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("testcluster: netns: %w", err)
		}
		addrs[k] = net.JoinHostPort(nw.hostIP(k/2), port)
	}
	c.cfg.Logf("testcluster: servers in namespaces %s on %s%d.0/24 (bridge %s)",
		strings.Join(nw.namespaces, " "), subnetBase, nw.subnet, nw.bridge)
	return nil
}

// serverCommand runs binary with args as server i: directly, or through
// `ip netns exec`, which execs the binary in place, so that the pid the
// cluster signals is masterd's own.
func (c *Cluster) serverCommand(i int, binary string, args []string) *exec.Cmd {
	if c.netns == nil {
		return exec.Command(binary, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", c.netns.namespaces[i], binary}, args...)...)
}

// Namespace is the network namespace server i runs in ("" without WithNetns).
func (c *Cluster) Namespace(i int) string {
	if c.netns == nil {
		return ""
	}
	return c.netns.namespaces[i]
}

// Partitionable reports whether the cluster's network can be cut (WithNetns).
func (c *Cluster) Partitionable() bool { return c.netns != nil }

func (c *Cluster) network(op string) (*network, error) {
	if c.netns == nil {
		return nil, fmt.Errorf("testcluster: %s needs a cluster started WithNetns", op)
	}
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("testcluster: %s: cluster is stopped", op)
	}
	return c.netns, nil
}

// Partition cuts the network between groups of servers: servers in different
// groups cannot talk; servers of one group can; clients reach all. Every
// server must be in exactly one group. It replaces any earlier cut.
func (c *Cluster) Partition(groups ...[]int) error {
	nw, err := c.network("partition")
	if err != nil {
		return err
	}
	group, err := c.groupOf("partition", groups...)
	if err != nil {
		return err
	}
	for i := range group {
		if group[i] < 0 {
			return fmt.Errorf("testcluster: partition %v: %s is in no group", groups, c.ID(i))
		}
	}
	cuts := map[[2]int]bool{}
	for i := range group {
		for j := i + 1; j < len(group); j++ {
			if group[i] != group[j] {
				cuts[[2]int{i, j}] = true
			}
		}
	}
	return nw.apply(cuts)
}

// Isolate cuts server i from every other server; clients still reach it.
func (c *Cluster) Isolate(i int) error {
	if i < 0 || i >= c.N() {
		return fmt.Errorf("testcluster: isolate: no server %d (have %d)", i, c.N())
	}
	var rest []int
	for j := range c.N() {
		if j != i {
			rest = append(rest, j)
		}
	}
	return c.Partition([]int{i}, rest)
}

// Bridge cuts every server of left from every server of right; the servers
// in neither group (at least one) are the bridge and still reach both sides,
// as in Jepsen's bridge partition. With three servers, Bridge([]int{0},
// []int{2}) leaves m1–m2 and m2–m3 connected and cuts m1–m3.
func (c *Cluster) Bridge(left, right []int) error {
	nw, err := c.network("bridge")
	if err != nil {
		return err
	}
	if len(left) == 0 || len(right) == 0 {
		return fmt.Errorf("testcluster: bridge %v %v: both sides need a server", left, right)
	}
	group, err := c.groupOf("bridge", left, right)
	if err != nil {
		return err
	}
	bridged := false
	for i := range group {
		bridged = bridged || group[i] < 0
	}
	if !bridged {
		return fmt.Errorf("testcluster: bridge %v %v: no server is left to be the bridge", left, right)
	}
	cuts := map[[2]int]bool{}
	for _, i := range left {
		for _, j := range right {
			cuts[[2]int{min(i, j), max(i, j)}] = true
		}
	}
	return nw.apply(cuts)
}

// groupOf maps each server to the index of its group (-1 for none),
// refusing unknown servers and servers named twice.
func (c *Cluster) groupOf(op string, groups ...[]int) ([]int, error) {
	group := make([]int, c.N())
	for i := range group {
		group[i] = -1
	}
	for g, members := range groups {
		for _, i := range members {
			if i < 0 || i >= c.N() {
				return nil, fmt.Errorf("testcluster: %s %v: no server %d (have %d)", op, groups, i, c.N())
			}
			if group[i] >= 0 {
				return nil, fmt.Errorf("testcluster: %s %v: %s is named twice", op, groups, c.ID(i))
			}
			group[i] = g
		}
	}
	return group, nil
}

// Heal removes every cut: all servers can talk again.
func (c *Cluster) Heal() error {
	nw, err := c.network("heal")
	if err != nil {
		return err
	}
	return nw.apply(map[[2]int]bool{})
}

// Connected reports whether servers i and j can talk (true without WithNetns).
func (c *Cluster) Connected(i, j int) bool {
	if c.netns == nil {
		return true
	}
	c.netns.mu.Lock()
	defer c.netns.mu.Unlock()
	return !c.netns.cuts[[2]int{min(i, j), max(i, j)}]
}

// apply makes cuts the network's whole set of cuts: in each namespace, in one
// ip process, it flushes the blackhole routes and adds those cuts needs, so a
// change from one partition to another never passes through a healed state
// in one server, and a failed earlier step leaves nothing behind.
func (nw *network) apply(cuts map[[2]int]bool) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var errs []error
	for i, ns := range nw.namespaces {
		batch := "route flush type blackhole\n"
		for j := range nw.namespaces {
			if cuts[[2]int{min(i, j), max(i, j)}] {
				batch += fmt.Sprintf("route add blackhole %s/32\n", nw.hostIP(j))
			}
		}
		if err := ip(batch, "-n", ns, "-batch", "-"); err != nil {
			errs = append(errs, fmt.Errorf("netns %s: %w", ns, err))
		}
	}
	nw.cuts = cuts
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("testcluster: cut network: %w", err)
	}
	return nil
}

// WaitLeaderAmong polls GET /v1/cluster on the running servers of group until
// all of them name the same leader, one of the group, and returns its index:
// the side of a partition that can elect one. Servers outside the group are
// not asked (during a partition they may name another, or none).
func (c *Cluster) WaitLeaderAmong(ctx context.Context, group []int) (int, error) {
	if len(group) == 0 {
		return -1, errors.New("testcluster: wait for leader among no server")
	}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		leader, err := c.leaderAmong(ctx, group)
		if err == nil {
			return leader, nil
		}
		if errors.Is(err, ErrServerExited) {
			return -1, err
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("wait for leader among %v: %w (last: %v)", group, ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

func (c *Cluster) leaderAmong(ctx context.Context, group []int) (int, error) {
	if err := c.crashed(); err != nil {
		return -1, err
	}
	leader := -1
	for _, i := range group {
		if i < 0 || i >= c.N() {
			return -1, fmt.Errorf("testcluster: no server %d (have %d)", i, c.N())
		}
		if !c.Alive(i) {
			continue
		}
		info, err := c.ClusterInfo(ctx, i)
		if err != nil {
			return -1, err
		}
		if info.Leader == nil || info.Leader.ID == "" {
			return -1, fmt.Errorf("%s knows no leader", c.ID(i))
		}
		idx := c.indexOf(info.Leader.ID)
		if !slices.Contains(group, idx) {
			return -1, fmt.Errorf("%s names leader %q, outside %v", c.ID(i), info.Leader.ID, group)
		}
		if leader >= 0 && idx != leader {
			return -1, fmt.Errorf("%s names leader %s, another names %s", c.ID(i), info.Leader.ID, c.ID(leader))
		}
		leader = idx
	}
	if leader < 0 || !c.Alive(leader) {
		return -1, fmt.Errorf("no running leader among %v", group)
	}
	return leader, nil
}
