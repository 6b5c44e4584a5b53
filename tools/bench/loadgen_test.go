package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	tests := map[string]struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		"empty":           {nil, 0.5, 0},
		"single":          {ms(7), 0.99, 7 * time.Millisecond},
		"median of four":  {ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		"p99 of twenty":   {ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 0.99, 20 * time.Millisecond},
		"p50 of twenty":   {ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 0.5, 10 * time.Millisecond},
		"p99 of hundred":  {hundred(), 0.99, 99 * time.Millisecond},
		"p100 is the max": {ms(1, 5, 9), 1, 9 * time.Millisecond},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v) = %s, want %s", tt.p, got, tt.want)
			}
		})
	}
}

func hundred() []time.Duration {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(i+1) * time.Millisecond
	}
	return d
}

// TestLoadCountsEveryRequest runs a request-bounded step against a server
// that refuses every third call, so success and error counts are exact.
func TestLoadCountsEveryRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		if i%3 == 0 {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	const requests = 300
	load := Load{
		Clients:  8,
		Duration: time.Minute, // the count ends the step, not the clock
		Requests: requests,
		NewRequest: func(i int) (*http.Request, error) {
			return http.NewRequest(http.MethodPut, fmt.Sprintf("%s/?i=%d", srv.URL, i), nil)
		},
	}
	result := load.Run(context.Background(), NewHTTPClient(8, 5*time.Second))
	if result.OK != 200 || result.Errors != 100 || result.ErrorKind["HTTP 503"] != 100 {
		t.Fatalf("ok %d, errors %d (%v), want 200 ok and 100 HTTP 503", result.OK, result.Errors, result.ErrorKind)
	}
	if len(result.Latencies) != result.OK {
		t.Errorf("%d latencies for %d successes", len(result.Latencies), result.OK)
	}
	for i := 1; i < len(result.Latencies); i++ {
		if result.Latencies[i] < result.Latencies[i-1] {
			t.Fatal("latencies are not sorted")
		}
	}
}

func TestLoadCountsRefusedConnections(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	load := Load{
		Clients:  2,
		Duration: time.Minute,
		Requests: 10,
		NewRequest: func(int) (*http.Request, error) {
			return http.NewRequest(http.MethodGet, url, nil)
		},
	}
	result := load.Run(context.Background(), NewHTTPClient(2, 5*time.Second))
	if result.OK != 0 || result.ErrorKind["connection refused"] != 10 {
		t.Fatalf("ok %d, errors %v, want 10 connection refused", result.OK, result.ErrorKind)
	}
}
