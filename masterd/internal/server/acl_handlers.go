package server

import (
	"net/http"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/acl"
	"github.com/allot/allot/raftstore"
)

// The ACL endpoints. A secret is made on the leader, shown once in the
// answer that created its token, and never stored, logged or replicated:
// the Raft command carries its SHA-256 only.

// aclBootstrap makes the cluster's first management token, once.
func (s *Server) aclBootstrap(w http.ResponseWriter, r *http.Request) {
	// Every server on the way judges by its own -acl: X-Allot-Forwarded-By
	// is a header any client can send, so a leader without -acl never takes
	// a follower's word for it (a forged one would otherwise bootstrap, and
	// so lock, a cluster that runs without ACLs).
	if !s.cfg.ACL {
		msg := "this server runs without -acl: restart it with -acl to bootstrap ACLs"
		if r.Header.Get(forwardedHeader) != "" {
			msg = "the leader runs without -acl: restart it with -acl to bootstrap ACLs"
		}
		s.writeError(w, api.Errorf(api.CodeConflict, "%s", msg))
		return
	}
	if !s.node.IsLeader() {
		s.forward(w, r)
		return
	}
	if e := decodeOptionalBody(w, r); e != nil {
		s.writeError(w, e)
		return
	}
	accessor, err := acl.NewAccessor()
	if err != nil {
		s.writeError(w, api.Errorf(api.CodeInternal, "%v", err))
		return
	}
	secret, err := acl.NewSecret()
	if err != nil {
		s.writeError(w, api.Errorf(api.CodeInternal, "%v", err))
		return
	}
	s.commitWith(w, r, &raftstore.ACLBootstrap{Accessor: accessor, SecretHash: raftstore.SecretHash(acl.HashSecret(secret))}, commitOptions{
		principal: "bootstrap",
		answer:    withSecret(secret),
	})
}

// withSecret shows a token's secret in the answer that created it.
func withSecret(secret string) func(any) any {
	return func(obj any) any {
		if t, ok := obj.(api.ACLToken); ok {
			t.Secret = secret
			return t
		}
		return obj
	}
}

// decodeOptionalBody accepts no body or an empty JSON object.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request) *api.Error {
	if r.ContentLength == 0 {
		return nil
	}
	var empty struct{}
	return decodeBody(w, r, &empty)
}

// --- policies ---

func (s *Server) listACLPolicies(w http.ResponseWriter, r *http.Request) {
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		out := api.ACLPolicyList{Policies: st.ACLPolicies()}
		if out.Policies == nil {
			out.Policies = []api.ACLPolicy{}
		}
		return out, nil
	})
}

func (s *Server) getACLPolicy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if e := validName("policy", name); e != nil {
		s.writeError(w, e)
		return
	}
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		p, ok := st.ACLPolicy(name)
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "ACL policy %s does not exist", name)
		}
		return p, nil
	})
}

func (s *Server) putACLPolicy(w http.ResponseWriter, r *http.Request) {
	var req api.ACLPolicyRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.ACLPolicySet{Name: r.PathValue("name"), Description: req.Description, Rules: req.Rules})
}

func (s *Server) deleteACLPolicy(w http.ResponseWriter, r *http.Request) {
	if e := validName("policy", r.PathValue("name")); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.ACLPolicyDelete{Name: r.PathValue("name")})
}

// --- tokens ---

func (s *Server) listACLTokens(w http.ResponseWriter, r *http.Request) {
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		out := api.ACLTokenList{Tokens: st.ACLTokens()}
		if out.Tokens == nil {
			out.Tokens = []api.ACLToken{}
		}
		return out, nil
	})
}

func (s *Server) getACLToken(w http.ResponseWriter, r *http.Request) {
	accessor := r.PathValue("accessor")
	if e := validName("accessor", accessor); e != nil {
		s.writeError(w, e)
		return
	}
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		t, ok := st.ACLToken(accessor)
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "ACL token %s does not exist", accessor)
		}
		return t, nil
	})
}

// putACLToken creates the token of a new accessor, with a secret made here
// and shown once, or updates an existing one, whose secret stays.
func (s *Server) putACLToken(w http.ResponseWriter, r *http.Request) {
	var req api.ACLTokenRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	accessor := r.PathValue("accessor")
	if e := validName("accessor", accessor); e != nil {
		s.writeError(w, e)
		return
	}
	cmd := &raftstore.ACLTokenSet{Accessor: accessor, Description: req.Description, Policies: req.Policies,
		Principal: req.Principal, Management: req.Management}
	var exists bool
	s.fsm.Read(func(st *raftstore.State) { _, exists = st.ACLToken(accessor) })
	if exists {
		s.commit(w, r, cmd)
		return
	}
	secret, err := acl.NewSecret()
	if err != nil {
		s.writeError(w, api.Errorf(api.CodeInternal, "%v", err))
		return
	}
	cmd.SecretHash = raftstore.SecretHash(acl.HashSecret(secret))
	opts := commitOptions{
		// Two creations of one accessor at once: the second would update
		// the first and answer a secret that is not the stored one.
		ifNoneMatch: true,
		answer:      withSecret(secret),
	}
	if flag(r, paramDryRun) {
		opts.answer = nil // a secret that will never work is no answer
	}
	s.commitWith(w, r, cmd, opts)
}

func (s *Server) deleteACLToken(w http.ResponseWriter, r *http.Request) {
	if e := validName("accessor", r.PathValue("accessor")); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.ACLTokenDelete{Accessor: r.PathValue("accessor")})
}

// aclTokenSelf answers the caller's own token.
func (s *Server) aclTokenSelf(w http.ResponseWriter, r *http.Request) {
	id := callerOf(r.Context()).id
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		if id == operatorIdentity || id == anonymousIdentity {
			return api.ACLToken{Accessor: id.Accessor, Principal: id.Principal, Management: true, Policies: []string{}}, nil
		}
		t, ok := st.ACLToken(id.Accessor)
		if !ok {
			return nil, revoked()
		}
		return t, nil
	})
}
