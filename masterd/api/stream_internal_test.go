package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A server that takes the connection and never answers (a paused process)
// must not hold the session up: the client moves on to the next address.
func TestOpenMovesOnFromAServerThatNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", StreamContentType+"; charset=utf-8")
		w.Header().Set(HeaderStreamID, "s1")
		_ = json.NewEncoder(w).Encode(Event{Type: EventSubscribed, Subscribed: &Subscribed{FrameworkID: "fw-1"}})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer good.Close()

	c, err := NewSchedulerClient([]string{hung.URL, good.URL}, "")
	if err != nil {
		t.Fatal(err)
	}
	c.streams.openTimeout = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := c.Subscribe(ctx, FrameworkInfo{Name: "x"})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sess.Close()
	if sess.ServerURL() != good.URL || sess.FrameworkID() != "fw-1" || sess.StreamID() != "s1" {
		t.Fatalf("session on %s as %s (%s)", sess.ServerURL(), sess.FrameworkID(), sess.StreamID())
	}
}

// An answer that is not a stream is refused at once, not retried.
func TestOpenRefusesAnAnswerThatIsNotAStream(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"json": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(HeaderStreamID, "s1")
			_, _ = w.Write([]byte("{}"))
		},
		"no stream id": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", StreamContentType)
			_, _ = w.Write([]byte("{}\n"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			c, err := NewSchedulerClient([]string{srv.URL}, "")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := c.Subscribe(ctx, FrameworkInfo{Name: "x"}); err == nil || ctx.Err() != nil {
				t.Fatalf("Subscribe: %v (context: %v), want an immediate refusal", err, ctx.Err())
			}
		})
	}
}
