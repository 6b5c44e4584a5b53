package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/api"
)

// httpTimeouts bound how long a client may hold a connection without doing
// its part. None bounds a whole request: a call may wait its turn in a
// rate-limit queue for longer than any of them, and streams last as long as
// their session.
type httpTimeouts struct {
	// header: from the first byte of a request to the end of its headers.
	header time.Duration
	// body: from the handler's start to the last byte of the request body,
	// for every request (a stream's opening call too); and for draining
	// what a handler left unread.
	body time.Duration
	// idle: between requests on a kept-alive connection.
	idle time.Duration
	// write: to hand one answer to a client that does not read it (a
	// stream bounds each event instead, streamWriteTimeout).
	write time.Duration
}

var defaultHTTPTimeouts = httpTimeouts{
	header: 10 * time.Second,
	body:   30 * time.Second,
	idle:   2 * time.Minute,
	write:  30 * time.Second,
}

// maxHeaderBytes bounds a request's headers; beyond it the answer is a 431.
const maxHeaderBytes = 64 << 10

func (s *Server) timeouts() httpTimeouts {
	t := s.cfg.httpTimeouts
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.header, defaultHTTPTimeouts.header)
	def(&t.body, defaultHTTPTimeouts.body)
	def(&t.idle, defaultHTTPTimeouts.idle)
	def(&t.write, defaultHTTPTimeouts.write)
	return t
}

// newHTTPServer is the HTTP server in front of handler, with its timeouts.
func (s *Server) newHTTPServer(handler http.Handler) *http.Server {
	t := s.timeouts()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: t.header,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          s.logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	closeUnusedConns(srv)
	return srv
}

// startRequest lifts the write deadline the previous answer on this
// connection left (writeJSON sets one per answer): net/http only resets
// deadlines it sets itself.
func (s *Server) startRequest(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

// timedBody gives r's body the body timeout, counted from now — after the
// rate-limit queue, which a body must not be charged for. net/http lifts
// the deadline itself once the body has been read to its end (it then reads
// the connection in the background to notice a client that goes away), so
// a stream's answer or a write waiting on Raft is not bounded by it.
func (s *Server) timedBody(w *statusRecorder, r *http.Request) *http.Request {
	if r.Body == nil || r.Body == http.NoBody {
		return r
	}
	if http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.timeouts().body)) != nil {
		return r // not a network connection (tests through the handler)
	}
	body := &trackedBody{ReadCloser: r.Body}
	w.body = body
	r = r.WithContext(r.Context()) // a copy: the caller's request stays as it was
	r.Body = body
	return r
}

// endRequest bounds what net/http does after the handler: it drains a body
// the handler left unread, so that the connection can serve another
// request, and that drain must not wait forever on a client that stalls.
func (s *Server) endRequest(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.timeouts().body))
	}
}

// trackedBody knows whether it was read to its end.
type trackedBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.read.Store(true)
	}
	return n, err
}

// jsonErrorListener makes the few answers net/http writes by itself, before
// any handler runs — 431 for headers over MaxHeaderBytes, 400 for a
// malformed request line or header, 501 and 505 — come in the API's JSON
// error format like every other answer. net/http writes them straight to
// the connection in one Write, in a form nothing else here uses (see
// plainErrorHeaders); the connection rewrites that Write.
type jsonErrorListener struct {
	net.Listener
	index func() uint64
}

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c, index: l.index}, nil
}

type jsonErrorConn struct {
	net.Conn
	index func() uint64
}

// plainErrorHeaders ends the status line of net/http's own error answers
// (conn.serve in net/http/server.go). The handlers' answers are JSON, and
// net/http writes their headers in sorted order, Connection before
// Content-Type: none of them can start this way.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if answer, ok := c.rewrite(p); ok {
		if _, err := c.Conn.Write(answer); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rewrite turns "HTTP/1.1 431 Request Header Fields Too Large" + headers +
// text into the same status with a JSON error body.
func (c *jsonErrorConn) rewrite(p []byte) ([]byte, bool) {
	if !bytes.HasPrefix(p, []byte("HTTP/1.")) {
		return nil, false
	}
	statusLine, text, ok := bytes.Cut(p, []byte(plainErrorHeaders))
	if !ok || bytes.Contains(statusLine, []byte("\r\n")) {
		return nil, false
	}
	_, rest, _ := bytes.Cut(statusLine, []byte(" "))
	codeText, _, _ := bytes.Cut(rest, []byte(" "))
	status, err := strconv.Atoi(string(codeText))
	if err != nil || status < 400 {
		return nil, false
	}
	var e *api.Error
	if status == http.StatusRequestHeaderFieldsTooLarge {
		e = api.Errorf(api.CodePayloadTooLarge, "the request headers are larger than the %d bytes allowed", maxHeaderBytes)
	} else {
		// "400 Bad Request: missing required Host header" → the reason.
		reason := string(text)
		if _, after, ok := bytes.Cut(text, []byte(": ")); ok {
			reason = string(after)
		}
		e = api.Errorf(api.CodeInvalidArgument, "malformed HTTP request: %s", reason)
	}
	e.Status = status
	body, _ := json.Marshal(api.ErrorBody{Error: e})
	body = append(body, '\n')
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	b.WriteString("Connection: close\r\nContent-Type: application/json\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	b.WriteString(api.HeaderIndex + ": " + strconv.FormatUint(c.index(), 10) + "\r\n\r\n")
	b.Write(body)
	return b.Bytes(), true
}
