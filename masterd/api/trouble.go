package api

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Trouble is what kept a client from the masters when the client's own
// configuration is at fault: a program that knows its flags turns it into
// a hint (which flag to pass), while the masters' messages stay generic.
type Trouble int

const (
	TroubleNone Trouble = iota
	// TroubleUnauthenticated: no token, or one the masters do not know
	// (never made, or revoked): 401.
	TroubleUnauthenticated
	// TroublePermissionDenied: the token's policies lack a capability
	// (NeededRule says which): 403.
	TroublePermissionDenied
	// TroubleUnknownAuthority: the master's certificate does not chain to
	// a CA the client trusts.
	TroubleUnknownAuthority
	// TroubleCertificateRequired: the master verifies its clients
	// (masterd -tls-verify-incoming) and the client presented no
	// certificate, or one of another CA.
	TroubleCertificateRequired
	// TroubleSpeaksHTTPS: an http:// address of a master that serves HTTPS.
	TroubleSpeaksHTTPS
	// TroubleSpeaksHTTP: an https:// address of a master that serves
	// plaintext HTTP.
	TroubleSpeaksHTTP
)

// Diagnose says which Trouble err is, TroubleNone when it is none of them
// (a master down, an election: retrying helps). It looks at the text too:
// an error that only reports the last of several attempts keeps the cause's
// words but not its type.
func Diagnose(err error) Trouble {
	if err == nil {
		return TroubleNone
	}
	switch ErrorCode(err) {
	case CodeUnauthenticated:
		return TroubleUnauthenticated
	case CodePermissionDenied:
		return TroublePermissionDenied
	}
	var unknown x509.UnknownAuthorityError
	msg := err.Error()
	switch {
	case errors.As(err, &unknown) || strings.Contains(msg, "certificate signed by unknown authority"):
		return TroubleUnknownAuthority
	case strings.Contains(msg, "tls: certificate required") || strings.Contains(msg, "tls: bad certificate") ||
		strings.Contains(msg, "tls: unknown certificate authority"):
		// TLS 1.3 says certificate required for none; a certificate of
		// another CA is a bad certificate (or unknown authority) to the
		// master.
		return TroubleCertificateRequired
	case strings.Contains(msg, "this server speaks HTTPS") || strings.Contains(msg, "HTTP request to an HTTPS server"):
		return TroubleSpeaksHTTPS
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return TroubleSpeaksHTTP
	}
	return TroubleNone
}

// NeededRule is the ACL rule a permission_denied error says the token
// lacks, as "object framework, access register, roles eng/ml" (no quotes:
// log lines stay readable); "" when err names none.
func NeededRule(err error) string {
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Code != CodePermissionDenied {
		return ""
	}
	object, _ := apiErr.Details["object"].(string)
	access, _ := apiErr.Details["access"].(string)
	if object == "" || access == "" {
		return ""
	}
	rule := ACLRule{Object: object, Access: access}
	if role, _ := apiErr.Details["role"].(string); role != "" {
		rule.Roles = []string{role}
	}
	if roles, ok := apiErr.Details["roles"].([]any); ok {
		for _, r := range roles {
			if s, ok := r.(string); ok {
				rule.Roles = append(rule.Roles, s)
			}
		}
	}
	out := "object " + rule.Object + ", access " + rule.Access
	if len(rule.Roles) > 0 {
		out += ", roles " + strings.Join(rule.Roles, " ")
	}
	return out
}

// Hint says which flag of a client program (agentd, a framework) would get
// it past err, or "" when the program's configuration is not at fault (a
// master down, an election). The program names itself and says how it takes
// a token; the TLS flags (-tls-ca, -tls-cert, -tls-key) and -master are
// the same in every program.
func Hint(err error, program, tokenAdvice string) string {
	switch Diagnose(err) {
	case TroubleUnauthenticated:
		return "pass a token with " + tokenAdvice
	case TroublePermissionDenied:
		if rule := NeededRule(err); rule != "" {
			return "the token's policies need the rule " + rule
		}
		return "the token's policies need what the master's message names"
	case TroubleUnknownAuthority:
		return "the master's certificate is not from a CA " + program + " trusts: pass the cluster's CA with -tls-ca"
	case TroubleCertificateRequired:
		return "the master requires a client certificate of its CA: pass -tls-cert and -tls-key"
	case TroubleSpeaksHTTPS:
		return "the master speaks HTTPS: use an https:// -master address (and -tls-ca)"
	case TroubleSpeaksHTTP:
		return "the master speaks plaintext HTTP: use an http:// -master address"
	}
	return ""
}

// ReadTokenFile reads a bearer token from a file given as -token-file,
// surrounding whitespace trimmed; an empty file is an error.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("-token-file %s is empty", path)
	}
	return token, nil
}
