// Package testcluster runs real masterd clusters on loopback for tests and
// benchmarks: one process per server, free ports, the command lines an
// operator would type, and helpers that wait on the cluster's own answers.
package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/tools/freeaddr"
)

// Config describes a cluster for New.
type Config struct {
	// Binary is the masterd binary; "" builds ./masterd of the module that
	// contains the working directory (see Build).
	Binary string
	// N is the number of servers (at least 1).
	N int
	// BaseDir holds one directory per server (data, log); "" makes a temporary
	// directory that Stop removes.
	BaseDir string
	// OperatorToken is passed as -operator-token to every server and sent as a
	// bearer token by the cluster's own calls.
	OperatorToken string
	// ExtraArgs are appended to every server's command line.
	ExtraArgs []string
	// Env is added to every server's environment.
	Env []string
	// Logf receives the harness's own messages; nil discards them.
	Logf func(format string, args ...any)
	// TLS runs the servers with certificates from a CA of the cluster's
	// own (see WithTLS).
	TLS bool
	// TmpfsDataDir, when above 0, mounts a tmpfs of that many bytes as each
	// server's data dir, so that a test can fill it (see tmpfs.go).
	TmpfsDataDir int64
	// Netns runs every server in a network namespace of its own, so that
	// the network between servers can be cut (see WithNetns, netns.go).
	Netns bool
}

// Option adjusts the Config of Start.
type Option func(*Config)

// WithOperatorToken runs every server with -operator-token token.
func WithOperatorToken(token string) Option {
	return func(c *Config) { c.OperatorToken = token }
}

// WithArgs appends args to every server's command line.
func WithArgs(args ...string) Option {
	return func(c *Config) { c.ExtraArgs = append(c.ExtraArgs, args...) }
}

// WithBinary uses a prebuilt masterd binary.
func WithBinary(path string) Option {
	return func(c *Config) { c.Binary = path }
}

// WithEnv adds environment variables (KEY=value) to every server.
func WithEnv(env ...string) Option {
	return func(c *Config) { c.Env = append(c.Env, env...) }
}

// Cluster is a running set of masterd processes. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg        Config
	removeBase bool
	client     *http.Client

	mu      sync.Mutex
	servers []*server
	leader  int // index found by the last WaitLeader, -1 when unknown or killed
	stopped bool
	netns   *network // the servers' namespaces, nil unless Config.Netns (netns.go)
	mounts  []string // tmpfs data dirs to unmount on Stop (tmpfs.go)
}

type server struct {
	id       string
	dir      string
	logPath  string
	httpAddr string
	raftAddr string
	args     []string // kept so that Restart runs exactly what a service manager would
	binary   string   // set by SetBinary; "" runs the cluster's Binary

	cmd        *exec.Cmd
	done       chan struct{} // closed once cmd has exited
	expectExit bool          // set before we kill it, so an exit is not a crash
}

func (s *server) alive() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Start starts an n-server cluster for a test or benchmark and stops it when
// tb finishes; if tb failed, the tail of every server's log is logged first.
// It does not wait for a leader: call WaitLeader.
func Start(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	cfg := Config{N: n, BaseDir: tb.TempDir(), Logf: tb.Logf}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.Binary == "" {
		bin, err := Build("")
		if err != nil {
			tb.Fatalf("testcluster: %v", err)
		}
		cfg.Binary = bin
	}
	c, err := New(cfg)
	if err != nil {
		tb.Fatalf("testcluster: %v", err)
	}
	tb.Cleanup(func() {
		c.Stop()
		if tb.Failed() {
			for i := range c.N() {
				tb.Logf("testcluster: last lines of %s (%s):\n%s", c.ID(i), c.LogPath(i), c.LogTail(i, 60))
			}
		}
	})
	return c
}

// New starts the servers of cfg: the first with -bootstrap, the others with
// -join to the first. Each server's stdout and stderr go to DIR/mN/masterd.log.
// Call Stop when done.
func New(cfg Config) (*Cluster, error) {
	if cfg.N < 1 {
		return nil, fmt.Errorf("testcluster: need at least 1 server, got %d", cfg.N)
	}
	if cfg.Binary == "" {
		bin, err := Build("")
		if err != nil {
			return nil, err
		}
		cfg.Binary = bin
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Cluster{
		cfg:    cfg,
		leader: -1,
		client: &http.Client{Timeout: 2 * time.Second},
	}
	if cfg.BaseDir == "" {
		dir, err := os.MkdirTemp("", "allot-cluster-")
		if err != nil {
			return nil, fmt.Errorf("testcluster: %w", err)
		}
		c.cfg.BaseDir, c.removeBase = dir, true
	}
	if cfg.TLS {
		if err := c.setupTLS(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	addrs, err := freeaddr.Loopbacks(2 * cfg.N)
	if err != nil {
		c.Stop()
		return nil, err
	}
	if cfg.Netns {
		if err := c.setupNetns(addrs); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for i := range cfg.N {
		s := &server{
			id:       fmt.Sprintf("m%d", i+1),
			httpAddr: addrs[2*i],
			raftAddr: addrs[2*i+1],
		}
		s.dir = filepath.Join(c.cfg.BaseDir, s.id)
		s.logPath = filepath.Join(s.dir, "masterd.log")
		s.args = []string{
			"-id", s.id,
			"-data-dir", filepath.Join(s.dir, "data"),
			"-http", s.httpAddr,
			"-raft", s.raftAddr,
		}
		if i == 0 {
			s.args = append(s.args, "-bootstrap")
		} else {
			s.args = append(s.args, "-join", c.scheme()+addrs[0])
		}
		if cfg.TLS {
			tlsArgs, err := c.serverTLSArgs(s)
			if err != nil {
				c.Stop()
				return nil, err
			}
			s.args = append(s.args, tlsArgs...)
		}
		if cfg.OperatorToken != "" {
			s.args = append(s.args, "-operator-token", cfg.OperatorToken)
		}
		s.args = append(s.args, cfg.ExtraArgs...)
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			c.Stop()
			return nil, fmt.Errorf("testcluster: %w", err)
		}
		c.servers = append(c.servers, s)
		if err := c.mountDataDir(s); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for i := range c.servers {
		if err := c.start(i); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("testcluster: cluster is stopped")
	}
	s := c.servers[i]
	if s.alive() {
		return fmt.Errorf("testcluster: %s is running", s.id)
	}
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testcluster: %s: %w", s.id, err)
	}
	binary := c.cfg.Binary
	if s.binary != "" {
		binary = s.binary
	}
	cmd := c.serverCommand(i, binary, s.args)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), c.cfg.Env...)
	cmd.SysProcAttr = serverProcAttr()
	fmt.Fprintf(log, "=== testcluster %s: %s %s\n", time.Now().Format(time.RFC3339Nano), binary, strings.Join(s.args, " "))
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("testcluster: start %s: %w", s.id, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(done)
	}()
	s.cmd, s.done, s.expectExit = cmd, done, false
	c.cfg.Logf("testcluster: started %s pid %d http %s raft %s", s.id, cmd.Process.Pid, s.httpAddr, s.raftAddr)
	return nil
}

// Kill sends SIGKILL to server i and waits until it has exited.
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	s := c.servers[i]
	if !s.alive() {
		c.mu.Unlock()
		return fmt.Errorf("testcluster: %s is not running", s.id)
	}
	s.expectExit = true
	if c.leader == i {
		c.leader = -1
	}
	err := s.cmd.Process.Signal(syscall.SIGKILL)
	done := s.done
	c.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testcluster: kill %s: %w", s.id, err)
	}
	<-done
	c.cfg.Logf("testcluster: killed %s", s.id)
	return nil
}

// Terminate sends SIGTERM to server i, as a service manager stops a service,
// and waits until it has exited. masterd gives its shutdown 10 s; one that
// still runs after 30 s is killed and reported.
func (c *Cluster) Terminate(i int) error {
	c.mu.Lock()
	s := c.servers[i]
	if !s.alive() {
		c.mu.Unlock()
		return fmt.Errorf("testcluster: %s is not running", s.id)
	}
	s.expectExit = true
	if c.leader == i {
		c.leader = -1
	}
	err := s.cmd.Process.Signal(syscall.SIGTERM)
	proc, done := s.cmd.Process, s.done
	c.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testcluster: terminate %s: %w", s.id, err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		proc.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("testcluster: %s did not exit within 30 s of SIGTERM; killed", s.id)
	}
	c.cfg.Logf("testcluster: terminated %s", s.id)
	return nil
}

// Restart starts server i again, after Kill or Terminate, with exactly its
// first command line, as a service manager would.
func (c *Cluster) Restart(i int) error {
	return c.start(i)
}

// SetBinary makes the next Restart of server i run binary, with the same
// command line and data dir: an upgrade (or downgrade) of that one server.
func (c *Cluster) SetBinary(i int, binary string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.servers[i].binary = binary
}

// Stop terminates every server (SIGTERM, then SIGKILL after 10 s) and waits
// for them. It is idempotent.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	var running []*server
	for _, s := range c.servers {
		if s.alive() {
			s.expectExit = true
			s.cmd.Process.Signal(syscall.SIGTERM)
			running = append(running, s)
		}
	}
	c.leader = -1
	c.mu.Unlock()
	// One deadline for all: each server still running past it is killed
	// (a channel from time.After would fire for the first one only).
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range running {
		select {
		case <-s.done:
		case <-time.After(time.Until(deadline)):
			s.cmd.Process.Signal(syscall.SIGKILL)
			<-s.done
		}
	}
	c.unmountDataDirs()
	if err := c.netns.close(); err != nil {
		c.cfg.Logf("%v", err)
	}
	if c.removeBase {
		os.RemoveAll(c.cfg.BaseDir)
	}
}

// N is the number of servers, live or not.
func (c *Cluster) N() int { return len(c.servers) }

// ID is server i's Raft id ("m1" for i = 0).
func (c *Cluster) ID(i int) string { return c.servers[i].id }

// Address is server i's API URL (http://127.0.0.1:PORT, https:// WithTLS).
func (c *Cluster) Address(i int) string { return c.scheme() + c.servers[i].httpAddr }

// RaftAddress is server i's Raft address (127.0.0.1:PORT).
func (c *Cluster) RaftAddress(i int) string { return c.servers[i].raftAddr }

// Addresses are the API URLs of all servers, live or not, by index.
func (c *Cluster) Addresses() []string {
	addrs := make([]string, len(c.servers))
	for i := range c.servers {
		addrs[i] = c.Address(i)
	}
	return addrs
}

// Args is server i's command line, without the binary.
func (c *Cluster) Args(i int) []string { return append([]string(nil), c.servers[i].args...) }

// Dir is server i's directory (its data dir and log live inside).
func (c *Cluster) Dir(i int) string { return c.servers[i].dir }

// LogPath is the file that holds server i's stdout and stderr.
func (c *Cluster) LogPath(i int) string { return c.servers[i].logPath }

// Token is the operator token the servers run with ("" for none).
func (c *Cluster) Token() string { return c.cfg.OperatorToken }

// Alive reports whether server i's process is running.
func (c *Cluster) Alive(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i].alive()
}

// Live lists the indexes of the running servers.
func (c *Cluster) Live() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var live []int
	for i, s := range c.servers {
		if s.alive() {
			live = append(live, i)
		}
	}
	return live
}

// Leader is the index of the leader found by the last successful WaitLeader,
// or -1 if there was none or it has been killed since.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Followers are the running servers other than Leader().
func (c *Cluster) Followers() []int {
	leader := c.Leader()
	var followers []int
	for _, i := range c.Live() {
		if i != leader {
			followers = append(followers, i)
		}
	}
	return followers
}

// LogTail returns the last lines of server i's log.
func (c *Cluster) LogTail(i, lines int) string {
	data, err := os.ReadFile(c.servers[i].logPath)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	all := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}
