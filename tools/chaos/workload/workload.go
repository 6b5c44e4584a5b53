// Package workload is the chaos program's clients: each one reads, writes
// and compare-and-swaps a few rate limits' qps through random servers and
// records every request in a history.Recorder.
package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/tools/chaos/history"
)

// RequestTimeout bounds one request. A write still unanswered then is
// indeterminate; it is short so that a client stuck on a paused server
// comes back to the others soon.
const RequestTimeout = 2 * time.Second

// Think and Backoff pace a client as a program using allot would: a pause
// between calls, and a longer one after a call that did not succeed, so that
// a client does not spin on a dead server (which would fill the history
// with thousands of indeterminate writes that make the check exponential).
const (
	Think   = 20 * time.Millisecond
	Backoff = 200 * time.Millisecond
)

// KeyPrefix names the principals the clients use, so that a run's keys
// cannot be mistaken for real ones.
const KeyPrefix = "chaos-"

// Keys are the principals of n keys.
func Keys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = KeyPrefix + strconv.Itoa(i)
	}
	return keys
}

// Values hands out the values written in a run: every write writes a value
// of its own, so that a read tells which write it saw.
type Values struct{ last atomic.Uint64 }

// Next is a fresh value (qps accepts whole numbers up to 1e9 exactly).
func (v *Values) Next() uint64 { return v.last.Add(1) }

// Client is one sequential client of the cluster.
type Client struct {
	ID     int
	Addrs  []string // the servers' API URLs
	Token  string   // operator token, "" for none
	Keys   []string
	Rec    *history.Recorder
	Values *Values
	Rng    *rand.Rand

	http     *http.Client
	versions map[string]uint64 // last version this client saw per key, for CAS
}

func (c *Client) init() {
	if c.http == nil {
		c.http = &http.Client{Timeout: RequestTimeout, Transport: &http.Transport{
			DialContext:     (&net.Dialer{Timeout: RequestTimeout}).DialContext,
			MaxIdleConns:    len(c.Addrs) * 2,
			IdleConnTimeout: 30 * time.Second,
		}}
		c.versions = map[string]uint64{}
	}
}

// Run issues operations one after the other until stop is closed; the
// operation in flight then finishes, so that nothing is cut short by the
// run's end rather than by a fault.
func (c *Client) Run(stop <-chan struct{}) {
	c.init()
	for {
		select {
		case <-stop:
			return
		default:
		}
		key := c.Keys[c.Rng.Intn(len(c.Keys))]
		server := c.Rng.Intn(len(c.Addrs))
		var op history.Op
		switch p := c.Rng.Intn(10); {
		case p < 4:
			op = c.Read(key, server, false)
		case p < 7 || c.versions[key] == 0:
			op = c.Write(key, server, 0)
		default:
			op = c.Write(key, server, c.versions[key])
		}
		pause := Think
		if op.Outcome != history.OK && !(op.Kind == history.CAS && op.Outcome == history.Fail) {
			pause = Backoff
		}
		// Jitter, so that clients do not move in lockstep.
		pause += time.Duration(c.Rng.Int63n(int64(pause)))
		select {
		case <-stop:
			return
		case <-time.After(pause):
		}
	}
}

// Read records a linearizable GET of key on server. final marks the reads
// made once every fault was healed.
func (c *Client) Read(key string, server int, final bool) history.Op {
	c.init()
	op := history.Op{Client: c.ID, Server: server, Key: key, Kind: history.Read, Final: final}
	req, _ := http.NewRequest(http.MethodGet, c.Addrs[server]+"/v1/ratelimits/"+key, nil)
	op = c.do(req, op)
	return op
}

// Write records a PUT of a fresh value to key on server: a CAS on
// ifVersion when it is not 0.
func (c *Client) Write(key string, server int, ifVersion uint64) history.Op {
	c.init()
	op := history.Op{Client: c.ID, Server: server, Key: key, Kind: history.Write, Value: c.Values.Next()}
	body, _ := json.Marshal(map[string]uint64{"qps": op.Value})
	req, _ := http.NewRequest(http.MethodPut, c.Addrs[server]+"/v1/ratelimits/"+key, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if ifVersion != 0 {
		op.Kind, op.IfVersion = history.CAS, ifVersion
		req.Header.Set("If-Match", strconv.FormatUint(ifVersion, 10))
	}
	return c.do(req, op)
}

func (c *Client) do(req *http.Request, op history.Op) history.Op {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	op.Invoke = c.Rec.Now()
	resp, err := c.http.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	op.Complete = c.Rec.Now()
	switch {
	case err != nil:
		op.Error = err.Error()
		op.Outcome = history.Unknown
		if refused(err) || op.Kind == history.Read {
			op.Outcome = history.Fail
		}
	case resp.StatusCode == http.StatusOK:
		op.Outcome, op.OutValue, op.OutVersion, err = decodeRateLimit(body)
		if err != nil { // a 200 we cannot read: the write may have happened
			op.Error = err.Error()
			if op.Kind != history.Read {
				op.Outcome = history.Unknown
			}
		}
	case resp.StatusCode == http.StatusNotFound && op.Kind == history.Read:
		op.Outcome = history.OK // absent: value 0
	default:
		op.Error = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		op.Outcome = history.Fail
		op.Mismatch = op.Kind == history.CAS && resp.StatusCode == http.StatusPreconditionFailed
		// A 503 (no_leader, a proxy that lost the leader) or another 5xx
		// may come after the command was proposed.
		if resp.StatusCode >= 500 && op.IsWrite() {
			op.Outcome = history.Unknown
		}
	}
	if op.Outcome == history.OK && op.OutVersion != 0 {
		c.versions[op.Key] = op.OutVersion
	}
	c.Rec.Add(op)
	return op
}

// refused reports an error that happened before the request was sent: the
// server never saw it, so the operation definitely did not happen.
func refused(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

func decodeRateLimit(body []byte) (history.Outcome, uint64, uint64, error) {
	var rl api.RateLimit
	if err := json.Unmarshal(body, &rl); err != nil {
		return history.Fail, 0, 0, fmt.Errorf("decode rate limit: %w", err)
	}
	if rl.QPS == nil || *rl.QPS < 1 || *rl.QPS != float64(uint64(*rl.QPS)) {
		return history.Fail, 0, 0, fmt.Errorf("rate limit %s: qps %v is not a value this run writes", rl.Principal, rl.QPS)
	}
	return history.OK, uint64(*rl.QPS), rl.Version, nil
}

// ErrNotReady is returned by Final when a key could not be read from a
// server within its attempts.
var ErrNotReady = errors.New("no successful read")

// Final reads key from server until one read succeeds (each attempt is
// recorded), within ctx.
func (c *Client) Final(ctx context.Context, key string, server int) (history.Op, error) {
	for {
		op := c.Read(key, server, true)
		if op.Outcome == history.OK {
			return op, nil
		}
		select {
		case <-ctx.Done():
			return op, fmt.Errorf("final read of %s from server %d: %w (last: %s)", key, server, ErrNotReady, op.Error)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
