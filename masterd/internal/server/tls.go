package server

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/tlsutil"
)

// httpsListener serves the API over TLS. Its connections are handshaken by
// their first read, under the read deadline net/http sets for the request's
// headers, so a client that never finishes its handshake holds nothing for
// longer than one that never sends its headers.
type httpsListener struct {
	net.Listener
	config *tls.Config
}

func (l httpsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &httpsConn{Conn: tls.Server(c, l.config)}, nil
}

// httpsConn answers a plaintext HTTP request with a JSON 400 saying the
// server speaks HTTPS, as net/http does for its own TLS listeners (which
// this one, wrapped for jsonErrorListener, is not to net/http), instead of
// closing the connection on the client without a word.
type httpsConn struct {
	*tls.Conn
}

func (c *httpsConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		_ = re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = re.Conn.Write(plaintextAnswer)
		re.Conn.Close()
	}
	return n, err
}

// looksLikeHTTP is net/http's tlsRecordHeaderLooksLikeHTTP.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		return true
	}
	return false
}

var plaintextAnswer = func() []byte {
	body, _ := json.Marshal(api.ErrorBody{Error: api.Errorf(api.CodeInvalidArgument,
		"this server speaks HTTPS: use an https:// address")})
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.0 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		http.StatusBadRequest, http.StatusText(http.StatusBadRequest), len(body), body)
	return b.Bytes()
}()

// internalTransport is what a server's own calls to other servers (forwarding,
// version polling) go through: over TLS to servers of the same CA, presenting
// this server's certificate, when TLS is on.
func (s *Server) internalTransport() *http.Transport {
	t := &http.Transport{
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}
	if s.clientTLS != nil {
		t.TLSClientConfig = s.clientTLS.Clone()
		t.TLSHandshakeTimeout = 10 * time.Second
	}
	return t
}

// streamLayer keeps a nil *StreamLayer from becoming a non-nil interface.
func streamLayer(s *tlsutil.StreamLayer) raft.StreamLayer {
	if s == nil {
		return nil
	}
	return s
}
