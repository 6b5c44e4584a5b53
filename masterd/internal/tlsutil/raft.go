package tlsutil

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// handshakeTimeout bounds a Raft peer's TLS handshake: a peer that connects
// and says nothing is dropped rather than held.
const handshakeTimeout = 10 * time.Second

// StreamLayer is Raft's network under mutual TLS (a raft.StreamLayer for
// raft.NewNetworkTransportWithConfig). Accept hands Raft only connections
// whose handshake succeeded: a peer without a certificate from the CA naming
// ServerName — plaintext, another CA, a client certificate — is logged with
// its address and why, and closed before Raft reads a byte of it. Handshakes
// run each on its own goroutine, so a silent peer delays nobody.
type StreamLayer struct {
	listener  net.Listener
	advertise net.Addr
	incoming  *tls.Config
	outgoing  *tls.Config
	logger    hclog.Logger

	accepted  chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	done      sync.WaitGroup
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer listens on bind (host:port) and advertises that address,
// which must be one peers can dial (not 0.0.0.0, as raft's TCP transport
// requires too).
func NewStreamLayer(bind string, m *Material, logger hclog.Logger) (*StreamLayer, error) {
	if m.pool == nil {
		return nil, errors.New("raft over TLS needs -tls-ca: peers are verified against it")
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("listen on raft address %s: %w", bind, err)
	}
	advertise := ln.Addr()
	if tcp, ok := advertise.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %s is not one peers can dial: give a specific IP", bind)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &StreamLayer{
		listener:  ln,
		advertise: advertise,
		incoming:  m.RaftIncoming(),
		outgoing:  m.RaftOutgoing(),
		logger:    logger,
		accepted:  make(chan net.Conn),
		closed:    make(chan struct{}),
	}
	s.done.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *StreamLayer) acceptLoop() {
	defer s.done.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			// Out of file descriptors and the like: wait, as net/http does.
			s.logger.Warn("accept raft connection", "error", err)
			select {
			case <-s.closed:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.done.Add(1)
		go s.handshake(conn)
	}
}

func (s *StreamLayer) handshake(conn net.Conn) {
	defer s.done.Done()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	tc := tls.Server(conn, s.incoming)
	if err := tc.HandshakeContext(ctx); err != nil {
		s.logger.Warn("refused a raft peer", "remote", conn.RemoteAddr().String(), "reason", err.Error())
		conn.Close()
		return
	}
	select {
	case s.accepted <- tc:
	case <-s.closed:
		tc.Close()
	}
}

// Accept returns the next peer that passed the handshake.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already handed to Raft stay Raft's.
func (s *StreamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.listener.Close()
		s.done.Wait()
	})
	return err
}

// Addr is the advertised address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and completes the handshake within timeout,
// verifying the peer as ServerName.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: timeout}
	conn, err := tls.DialWithDialer(dialer, "tcp", string(address), s.outgoing)
	if err != nil {
		return nil, fmt.Errorf("raft peer %s: %w", address, err)
	}
	return conn, nil
}
