package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestShutdownClosesConnectionsThatNeverSentARequest: a client holds a
// connection it opened but never used (an HTTP transport's pool keeps
// those). net/http's Shutdown would count it busy for 5 s; masterd's
// closes it and returns within a context shorter than that. A connection
// that is serving a request when Shutdown starts still gets its answer.
func TestShutdownClosesConnectionsThatNeverSentARequest(t *testing.T) {
	s, err := New(Config{Dev: true, HTTPAddr: "127.0.0.1:0",
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})})
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 16)
	track := s.http.ConnState
	s.http.ConnState = func(c net.Conn, state http.ConnState) {
		track(c, state)
		if state == http.StateNew {
			accepted <- struct{}{}
		}
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	for deadline := time.Now().Add(10 * time.Second); !s.node.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dev server did not become leader")
		}
	}
	addr := strings.TrimPrefix(s.APIAddress(), "http://")
	unused, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer unused.Close()
	<-accepted // the server waits for its request

	// Below net/http's 5 s for a connection with no request.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a connection that never sent a request: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	unused.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := unused.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the unused connection is still open (read %d bytes)", n)
	}
}
