package agent

import (
	"github.com/allot/allot/masterd/api"
)

// registrationHint says which of agentd's flags would let a refused
// registration through ("" when the refusal is none the agent can fix, such
// as a master down). The masters' messages stay generic; agentd knows its
// flags.
func registrationHint(err error) string {
	switch api.Diagnose(err) {
	case api.TroubleUnauthenticated:
		return "pass a token with -token-file (a file holding the secret of a token whose policy grants agent register)"
	case api.TroublePermissionDenied:
		if rule := api.NeededRule(err); rule != "" {
			return "the token's policies need the rule " + rule
		}
		return "the token's policies need what the master's message names"
	case api.TroubleUnknownAuthority:
		return "the master's certificate is not from a CA agentd trusts: pass the cluster's CA with -tls-ca"
	case api.TroubleCertificateRequired:
		return "the master requires a client certificate of its CA: pass -tls-cert and -tls-key"
	case api.TroubleSpeaksHTTPS:
		return "the master speaks HTTPS: use an https:// -master address (and -tls-ca)"
	case api.TroubleSpeaksHTTP:
		return "the master speaks plaintext HTTP: use an http:// -master address"
	}
	return ""
}

// registrationFailed logs what keeps the agent from registering: at ERROR
// with a hint when the agent's own configuration is at fault, at INFO
// otherwise (a master down or an election passes by itself). The client
// keeps trying either way.
func (a *Agent) registrationFailed(err error) {
	log := a.log.Named("client")
	if hint := registrationHint(err); hint != "" {
		log.Error("registration refused; still trying", "error", err, "hint", hint)
		return
	}
	log.Info("registration failed; still trying", "error", err)
}
