package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// Config is masterd's -tls-* flags.
type Config struct {
	CertFile string
	KeyFile  string
	CAFile   string
	// VerifyIncoming makes the HTTPS API require a client certificate from
	// the CA.
	VerifyIncoming bool
}

// Enabled reports whether TLS is on: a certificate and key are given.
func (c Config) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// Check reports what is wrong with the flags, flag name → problem, before
// any file is read. raft says whether Raft runs between servers (not -dev):
// its mutual TLS needs the CA.
func (c Config) Check(raft bool) map[string]string {
	problems := map[string]string{}
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		problems["tls-cert"] = "needs -tls-key (the certificate's private key)"
	case c.KeyFile != "" && c.CertFile == "":
		problems["tls-key"] = "needs -tls-cert (the certificate the key belongs to)"
	}
	switch {
	case c.CAFile != "" && !c.Enabled():
		problems["tls-ca"] = "needs -tls-cert and -tls-key: the CA only serves a server that speaks TLS"
	case c.Enabled() && c.CAFile == "" && raft:
		problems["tls-ca"] = "is required with -tls-cert: Raft between servers is mutual TLS, and a peer is verified against this CA"
	}
	if c.VerifyIncoming && c.CAFile == "" {
		problems["tls-verify-incoming"] = "needs -tls-ca: client certificates are verified against it"
	}
	return problems
}

// Material is the loaded TLS configuration of one server.
type Material struct {
	cert           tls.Certificate
	leaf           *x509.Certificate
	pool           *x509.CertPool // nil without a CA
	verifyIncoming bool
}

// Load reads and checks the files: the key belongs to the certificate, which
// chains to the CA and is valid now.
func Load(c Config) (*Material, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s / -tls-key %s: %w", c.CertFile, c.KeyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s: %w", c.CertFile, err)
	}
	cert.Leaf = leaf
	m := &Material{cert: cert, leaf: leaf, verifyIncoming: c.VerifyIncoming}
	if c.CAFile != "" {
		data, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("-tls-ca %s holds no PEM certificate", c.CAFile)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return nil, fmt.Errorf("-tls-cert %s does not verify against -tls-ca %s: %w", c.CertFile, c.CAFile, err)
		}
	} else if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("-tls-cert %s is valid from %s to %s, not now", c.CertFile, leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
	}
	return m, nil
}

// CheckServer reports whether the certificate may carry Raft: a server's
// peers refuse one without ServerName.
func (m *Material) CheckServer() error {
	if err := m.leaf.VerifyHostname(ServerName); err != nil {
		return fmt.Errorf("the -tls-cert certificate %q does not name %s, so the other servers would refuse it on Raft (make one with `masterd tls cert -server`)", m.leaf.Subject.CommonName, ServerName)
	}
	return nil
}

// HTTPSServer is the API's listener configuration: TLS 1.2 or later, client
// certificates required and verified against the CA with -tls-verify-incoming,
// not asked for otherwise.
func (m *Material) HTTPSServer() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{m.cert}}
	if m.verifyIncoming {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = m.pool
	}
	return cfg
}

// Client is the configuration of a server's own calls to other servers'
// APIs (join, forwarding, version polling): it verifies them against the CA
// and presents this server's certificate, which -tls-verify-incoming asks for.
// With a CA, the peer must also be a server (its certificate names
// ServerName): these calls carry the operator token and callers' bearer
// tokens, which another holder of a certificate from the CA for that address
// (a client's, an agent's) must never get.
func (m *Material) Client() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.pool, GetClientCertificate: m.alwaysPresent}
	if m.pool != nil {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return requireServerName(cs.PeerCertificates)
		}
	}
	return cfg
}

// alwaysPresent sends this server's certificate even when the peer asks for
// one from other CAs (Go's client would then send none): the peer's refusal
// then says "unknown authority", which tells an operator who mixed up CAs
// what is wrong, rather than "no certificate".
func (m *Material) alwaysPresent(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return &m.cert, nil
}

// RaftIncoming accepts a Raft peer only with a certificate from the CA that
// names ServerName.
func (m *Material) RaftIncoming() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return requireServerName(cs.PeerCertificates)
		},
	}
}

// RaftOutgoing dials a Raft peer verified as ServerName against the CA,
// presenting this server's certificate.
func (m *Material) RaftOutgoing() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: m.alwaysPresent,
		RootCAs:              m.pool,
		ServerName:           ServerName,
	}
}

var errNotServer = errors.New("peer certificate does not name " + ServerName + " (not a server certificate)")

func requireServerName(chain []*x509.Certificate) error {
	if len(chain) == 0 {
		return errors.New("peer presented no certificate")
	}
	if chain[0].VerifyHostname(ServerName) != nil {
		return fmt.Errorf("%w: %q", errNotServer, chain[0].Subject.CommonName)
	}
	return nil
}
