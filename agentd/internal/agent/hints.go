package agent

import (
	"github.com/allot/allot/masterd/api"
)

// registrationHint says which of agentd's flags would let a refused
// registration through ("" when the refusal is none the agent can fix).
func registrationHint(err error) string {
	return api.Hint(err, "agentd", "-token-file (a file holding the secret of a token whose policy grants agent register)")
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
