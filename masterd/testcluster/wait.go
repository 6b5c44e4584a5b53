package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
)

// ErrServerExited means a server exited without being asked to: waiting on
// the cluster cannot succeed, so the wait stops at once.
var ErrServerExited = errors.New("server exited unexpectedly")

const pollInterval = 50 * time.Millisecond

// ClusterInfo asks server i for GET /v1/cluster.
func (c *Cluster) ClusterInfo(ctx context.Context, i int) (*api.Cluster, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Address(i)+"/v1/cluster", nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.ID(i), err)
	}
	if token := c.Token(); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.ID(i), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: read /v1/cluster: %w", c.ID(i), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: GET /v1/cluster: %s: %s", c.ID(i), resp.Status, strings.TrimSpace(string(body)))
	}
	var info api.Cluster
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("%s: decode /v1/cluster: %w", c.ID(i), err)
	}
	return &info, nil
}

// WaitLeader polls GET /v1/cluster on every running server until all of them
// name the same running leader and list all N servers as voters, and returns
// the leader's index. It fails at once if a server exits unexpectedly.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		leader, err := c.agreedLeader(ctx)
		if err == nil {
			c.mu.Lock()
			if c.servers[leader].alive() {
				c.leader = leader
			}
			c.mu.Unlock()
			return leader, nil
		}
		if errors.Is(err, ErrServerExited) {
			return -1, err
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("wait for leader: %w (last: %v)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

func (c *Cluster) agreedLeader(ctx context.Context) (int, error) {
	if err := c.crashed(); err != nil {
		return -1, err
	}
	live := c.Live()
	if len(live) == 0 {
		return -1, errors.New("no server is running")
	}
	leader := -1
	for _, i := range live {
		info, err := c.ClusterInfo(ctx, i)
		if err != nil {
			return -1, err
		}
		if info.Leader == nil || info.Leader.ID == "" {
			return -1, fmt.Errorf("%s knows no leader", c.ID(i))
		}
		idx := c.indexOf(info.Leader.ID)
		if idx < 0 {
			return -1, fmt.Errorf("%s names unknown leader %q", c.ID(i), info.Leader.ID)
		}
		if leader >= 0 && idx != leader {
			return -1, fmt.Errorf("%s names leader %s, %s names %s", c.ID(live[0]), c.ID(leader), c.ID(i), info.Leader.ID)
		}
		leader = idx
		if err := c.allVoters(info.Servers); err != nil {
			return -1, fmt.Errorf("%s: %w", c.ID(i), err)
		}
	}
	if !c.Alive(leader) {
		return -1, fmt.Errorf("leader %s is not running", c.ID(leader))
	}
	return leader, nil
}

func (c *Cluster) allVoters(servers []api.Server) error {
	voters := map[string]bool{}
	for _, s := range servers {
		if strings.EqualFold(s.Suffrage, "voter") {
			voters[s.ID] = true
		}
	}
	for i := range c.servers {
		if !voters[c.ID(i)] {
			return fmt.Errorf("%s is not a voter yet (servers %+v)", c.ID(i), servers)
		}
	}
	return nil
}

func (c *Cluster) indexOf(id string) int {
	for i, s := range c.servers {
		if s.id == id {
			return i
		}
	}
	return -1
}

// crashed reports the first server that exited without Kill or Stop.
func (c *Cluster) crashed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.servers {
		if s.done != nil && !s.alive() && !s.expectExit {
			return fmt.Errorf("%s (%v): %w; last lines of %s:\n%s",
				s.id, s.cmd.ProcessState, ErrServerExited, s.logPath, c.LogTail(i, 30))
		}
	}
	return nil
}
