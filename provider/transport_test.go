package provider

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/allot/allot/masterd/api"
)

func TestKeepAliveTransportSettings(t *testing.T) {
	plain, ok := keepAliveTransport(nil).(*http.Transport)
	if !ok || plain.MaxIdleConnsPerHost != maxIdleConnsPerServer {
		t.Fatalf("for Go's default transport: %#v, want an *http.Transport with %d idle connections per host", plain, maxIdleConnsPerServer)
	}
	if http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost == maxIdleConnsPerServer {
		t.Error("keepAliveTransport changed http.DefaultTransport instead of a copy")
	}
	withTLS := api.NewTLSTransport(&tls.Config{MinVersion: tls.VersionTLS12})
	if got := keepAliveTransport(withTLS); got != withTLS || withTLS.MaxIdleConnsPerHost != maxIdleConnsPerServer {
		t.Errorf("the TLS transport: got %v with %d idle connections per host, want the same transport with %d",
			got, withTLS.MaxIdleConnsPerHost, maxIdleConnsPerServer)
	}
}

// TestKeepAliveTransportReusesConnections sends rounds of calls, as many at
// a time as Terraform's default parallelism, and counts the connections the
// server saw: with keep-alives each worker keeps its connection, where Go's
// default of 2 idle connections per host opens new ones every round.
func TestKeepAliveTransportReusesConnections(t *testing.T) {
	const parallel, rounds = 10, 20
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "{}")
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	client := &http.Client{Transport: keepAliveTransport(nil)}
	for range rounds {
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	// A dial started for a waiting call may finish after another call's
	// connection freed up and join the pool: allow one spare per worker.
	if n := opened.Load(); n > 2*parallel {
		t.Errorf("%d calls in rounds of %d opened %d connections, want at most %d", parallel*rounds, parallel, n, 2*parallel)
	}
}
