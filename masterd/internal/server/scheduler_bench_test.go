package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/ratelimit"
)

// benchParallelism is how many calling goroutines run per CPU: a call spends
// most of its time on the wire, so two CPUs need more than two callers to
// keep the leader busy.
const benchParallelism = 4

// BenchmarkSchedulerCalls measures scheduler calls per second through the
// leader's whole HTTP path: loopback TCP, JSON decoding, the middleware, the
// rate limiter (the framework's principal is counted, not throttled) and the
// master's lock. Calls alternate between REVIVE, which wakes the allocator,
// and RECONCILE of one task, which answers with an UPDATE on the framework's
// stream.
func BenchmarkSchedulerCalls(b *testing.B) {
	s := startDev(b)
	agent, _ := benchOpenStream(b, s, api.AgentProtocolPath, api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "node-1", Hostname: "node-1.example",
			Resources: api.Resources{"cpus": 4, "mem": 4096}}}},
		func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered })
	subscribed, streamID := benchOpenStream(b, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: "bench", Principal: "bench", Roles: []string{"*"}}}},
		func(e api.Event) bool { return e.Type == api.EventSubscribed })
	fwID := subscribed.Subscribed.FrameworkID

	revive, _ := json.Marshal(api.Call{FrameworkID: fwID, Type: api.CallRevive})
	reconcile, _ := json.Marshal(api.Call{FrameworkID: fwID, Type: api.CallReconcile, Reconcile: &api.Reconcile{
		Tasks: []api.ReconcileTask{{TaskID: "unknown", AgentID: agent.Registered.AgentID}}}})
	transport := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}
	b.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport}
	url := s.APIAddress() + api.SchedulerPath

	var sent atomic.Uint64
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := revive
			if sent.Add(1)%2 == 0 {
				body = reconcile
			}
			if err := benchSchedulerCall(client, url, streamID, body); err != nil {
				// Not b.Fatal: this is not the benchmark's goroutine.
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")

	// Every call met the limiter, counted under the framework's principal,
	// besides the SUBSCRIBE.
	var counted ratelimit.Stats
	for _, st := range s.limiter.Stats() {
		if st.Principal == "bench" {
			counted = st
		}
	}
	if counted.Processed != uint64(b.N)+1 || counted.Rejected != 0 {
		b.Fatalf("limiter counted %+v for bench, want %d calls processed and none rejected", counted, b.N+1)
	}
}

// benchSchedulerCall posts one scheduler call and expects 202.
func benchSchedulerCall(client *http.Client, url, streamID string, body []byte) error {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(api.HeaderStreamID, streamID)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		var e api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return &benchCallError{status: resp.StatusCode, body: e}
	}
	// Read to the end, so that the connection goes back to the pool.
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

type benchCallError struct {
	status int
	body   api.ErrorBody
}

func (e *benchCallError) Error() string {
	if e.body.Error == nil {
		return http.StatusText(e.status)
	}
	return http.StatusText(e.status) + ": " + e.body.Error.Error()
}

// benchOpenStream opens an NDJSON stream, returns the first event that first
// accepts and the stream's id, and then discards the rest of the stream as
// fast as it comes, so that the master never drops a slow reader.
func benchOpenStream[E any](b *testing.B, s *Server, path string, call any, first func(E) bool) (E, string) {
	b.Helper()
	var event E
	body, _ := json.Marshal(call)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.APIAddress()+path, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		b.Fatalf("open %s: %d", path, resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		if err := dec.Decode(&event); err != nil {
			resp.Body.Close()
			b.Fatalf("open %s: no first event: %v", path, err)
		}
		if first(event) {
			break
		}
	}
	go func() {
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return event, resp.Header.Get(api.HeaderStreamID)
}
