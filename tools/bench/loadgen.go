package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Load is one closed-loop load step: Clients goroutines each send a request,
// wait for the answer, and send the next, until Duration has passed or
// Requests have been sent.
type Load struct {
	Clients  int
	Duration time.Duration
	// Requests caps the number of requests sent (0: only Duration bounds the step).
	Requests int
	// Timeout bounds each request.
	Timeout time.Duration
	// NewRequest builds the i-th request of the step (i counts from 0 across
	// all clients).
	NewRequest func(i int) (*http.Request, error)
}

// LoadResult holds what a step measured. Latencies are those of the
// successful (2xx) requests, sorted.
type LoadResult struct {
	Clients   int
	Elapsed   time.Duration
	OK        int
	Errors    int
	ErrorKind map[string]int
	Latencies []time.Duration
}

// PerSecond is the rate of successful requests.
func (r LoadResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Percentile returns the nearest-rank percentile (0 < p ≤ 1) of the latencies.
func (r LoadResult) Percentile(p float64) time.Duration {
	return percentile(r.Latencies, p)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// NewHTTPClient is a keep-alive client that holds a connection per client
// goroutine, so a step measures the server and not connection setup.
func NewHTTPClient(clients int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
			MaxIdleConns:        clients * 2,
			MaxIdleConnsPerHost: clients * 2,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

// Run runs the step. It stops early, with what it has, when ctx ends.
func (l Load) Run(ctx context.Context, client *http.Client) LoadResult {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		wg       sync.WaitGroup
		result   = LoadResult{Clients: l.Clients, ErrorKind: map[string]int{}}
		start    = time.Now()
		deadline = start.Add(l.Duration)
	)
	for range l.Clients {
		wg.Go(func() {
			var (
				latencies []time.Duration
				errs      = map[string]int{}
			)
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1) - 1)
				if l.Requests > 0 && i >= l.Requests {
					break
				}
				latency, err := l.do(ctx, client, i)
				if err != nil {
					if ctx.Err() == nil {
						errs[errorKind(err)]++
					}
					continue
				}
				latencies = append(latencies, latency)
			}
			mu.Lock()
			defer mu.Unlock()
			result.Latencies = append(result.Latencies, latencies...)
			for kind, n := range errs {
				result.ErrorKind[kind] += n
				result.Errors += n
			}
		})
	}
	wg.Wait()
	result.Elapsed = time.Since(start)
	result.OK = len(result.Latencies)
	slices.Sort(result.Latencies)
	return result
}

func (l Load) do(ctx context.Context, client *http.Client, i int) (time.Duration, error) {
	req, err := l.NewRequest(i)
	if err != nil {
		return 0, err
	}
	req = req.WithContext(ctx)
	began := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	// Draining the body lets the connection go back to the pool.
	_, copyErr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	latency := time.Since(began)
	if resp.StatusCode/100 != 2 {
		return 0, statusError(resp.StatusCode)
	}
	if copyErr != nil {
		return 0, copyErr
	}
	return latency, nil
}

type statusError int

func (s statusError) Error() string { return fmt.Sprintf("HTTP %d", int(s)) }

// errorKind folds errors into a few kinds that can be counted in a table.
func errorKind(err error) string {
	var status statusError
	var netErr net.Error
	switch {
	case errors.As(err, &status):
		return status.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	default:
		return "other"
	}
}
