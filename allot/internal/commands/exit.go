package commands

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/masterd/api"
)

// Exit codes scripts can rely on; docs/guides/cli.md lists them. They only
// ever gain members.
const (
	ExitOK = 0
	// ExitFailed: the server refused the call for a reason not below
	// (invalid_argument, rate_limited, internal, …), or the tool itself
	// failed (a file it could not write).
	ExitFailed = 1
	// ExitUsage: a bad flag, a missing or extra argument, a value the tool
	// checks itself (resources, a file to read) — nothing was sent.
	ExitUsage = 2
	// ExitNotFound: the object does not exist (404).
	ExitNotFound = 3
	// ExitConflict: the write conflicts with the cluster's state: a
	// conflict or capacity_exceeded (409) or a failed -if-match (412).
	ExitConflict = 4
	// ExitDenied: the servers refused who the caller is: no or an unknown
	// token (401), a token without the needed rule (403), or TLS
	// credentials they do not accept (or the caller does not trust theirs).
	ExitDenied = 5
	// ExitUnavailable: no server answered, none had a leader (503), or an
	// address speaks the other protocol (http:// vs https://).
	ExitUnavailable = 6
)

// usageError is a mistake on the command line, found before any call.
type usageError struct {
	msg     string
	command string // the full name of the command, for "-h"
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(cmd *cli.Command, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), command: cmd.FullName()}
}

// exitCode maps an error to the exit code above.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var usage *usageError
	if errors.As(err, &usage) {
		return ExitUsage
	}
	switch api.Diagnose(err) {
	case api.TroubleUnauthenticated, api.TroublePermissionDenied,
		api.TroubleUnknownAuthority, api.TroubleCertificateRequired:
		return ExitDenied
	case api.TroubleSpeaksHTTP, api.TroubleSpeaksHTTPS:
		return ExitUnavailable
	}
	switch api.ErrorCode(err) {
	case api.CodeNotFound:
		return ExitNotFound
	case api.CodeConflict, api.CodeCapacityExceeded, api.CodePreconditionFailed:
		return ExitConflict
	case api.CodeNoLeader:
		return ExitUnavailable
	case "":
		if unreachable(err) {
			return ExitUnavailable
		}
	}
	return ExitFailed
}

// unreachable reports whether err is the network's: no server answered.
func unreachable(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "connection reset")
}

// report prints err as the one line scripts and people read, "Error: …",
// with a hint when the tool's configuration is at fault, and returns the
// exit code.
func (a *app) report(err error) int {
	code := exitCode(err)
	if err == nil {
		return code
	}
	var apiErr *api.Error
	msg := err.Error()
	if errors.As(err, &apiErr) {
		// The server's message names the object; its code is in the exit
		// code already.
		msg = apiErr.Message
	}
	fmt.Fprintf(a.stderr, "Error: %s\n", msg)
	if hint := hint(err); hint != "" {
		fmt.Fprintf(a.stderr, "Hint: %s\n", hint)
	}
	return code
}

// hint says what would fix err, or "" when nothing the caller passed is at
// fault (a server error, an election).
func hint(err error) string {
	var usage *usageError
	if errors.As(err, &usage) {
		return fmt.Sprintf("run '%s -h' for usage", usage.command)
	}
	switch api.Diagnose(err) {
	case api.TroubleUnauthenticated, api.TroublePermissionDenied:
		// api.Hint words the token's trouble as agentd and the example
		// framework do; its TLS hints name their flags, not allot's.
		return api.Hint(err, "allot", "$"+EnvToken+" or -token-file (or $"+EnvTokenFile+")")
	case api.TroubleUnknownAuthority:
		return "the server's certificate is not from a CA allot trusts: pass the cluster's CA with -ca-file (or $" + EnvCACert + ")"
	case api.TroubleCertificateRequired:
		return "the server requires a client certificate of its CA: pass -client-cert and -client-key (or $" +
			EnvClientCert + " and $" + EnvClientKey + ")"
	case api.TroubleSpeaksHTTPS:
		return "the server speaks HTTPS: use an https:// -address (and -ca-file)"
	case api.TroubleSpeaksHTTP:
		return "the server speaks plaintext HTTP: use an http:// -address"
	}
	switch code := api.ErrorCode(err); {
	case exitCode(err) == ExitUnavailable:
		return "check that -address (or $" + EnvAddress + ") names running masterd servers; -retry-for waits longer through an election"
	case (code == api.CodeCapacityExceeded || code == api.CodeConflict) && strings.Contains(err.Error(), "force"):
		// The server speaks of its request's "force" field.
		return "pass -force to do it anyway"
	}
	return ""
}
