package main

import (
	"fmt"
	"io"

	"github.com/allot/allot/masterd/api"
)

// hint says which of the framework's flags would get it past err ("" when
// it is nothing the framework's configuration can fix). The masters'
// messages stay generic; the framework knows its flags.
func hint(err error) string {
	switch api.Diagnose(err) {
	case api.TroubleUnauthenticated:
		return "pass a token with -token-file (or ALLOT_TOKEN) whose policy grants framework register on the framework's roles"
	case api.TroublePermissionDenied:
		if rule := api.NeededRule(err); rule != "" {
			return "the token's policies need the rule " + rule
		}
		return "the token's policies need what the master's message names"
	case api.TroubleUnknownAuthority:
		return "the master's certificate is not from a CA the framework trusts: pass the cluster's CA with -tls-ca"
	case api.TroubleCertificateRequired:
		return "the master requires a client certificate of its CA: pass -tls-cert and -tls-key"
	case api.TroubleSpeaksHTTPS:
		return "the master speaks HTTPS: use an https:// -master address (and -tls-ca)"
	case api.TroubleSpeaksHTTP:
		return "the master speaks plaintext HTTP: use an http:// -master address"
	}
	return ""
}

// report prints err, and what to do about it when the framework knows.
func report(w io.Writer, err error) {
	fmt.Fprintln(w, "framework: ERROR:", err)
	if h := hint(err); h != "" {
		fmt.Fprintln(w, "framework: hint:", h)
	}
}

// retrying tells, while SUBSCRIBE is retried, why no master took it when
// the cause is the framework's own configuration (a TLS handshake the
// master refuses, a CA the framework does not trust); elections and masters
// down pass by themselves and are not worth a line.
func retrying(w io.Writer) func(rounds int, err error) {
	return func(rounds int, err error) {
		if h := hint(err); h != "" {
			fmt.Fprintf(w, "framework: ERROR: no master takes the SUBSCRIBE yet (%d rounds): %v; still trying\nframework: hint: %s\n", rounds, err, h)
		}
	}
}
