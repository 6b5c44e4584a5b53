// Package acl decides who may call what: it turns the replicated ACL
// policies and tokens into identities that answer "may this caller do this
// access to this object (of this role)?" on every request, without
// allocating.
//
// A token's secret is never kept: the cluster stores its SHA-256, and a
// presented bearer token is hashed and looked up. Secrets are 32 random
// bytes, so a plain hash is as strong as a slow one would be and costs well
// under a microsecond.
package acl

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/allot/allot/masterd/api"
)

// SecretPrefix starts every secret, so that a leaked one is recognisable
// (secret scanners, log greps).
const SecretPrefix = "allot_"

// NewSecret returns a new bearer secret: the prefix and 32 random bytes.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate a token secret: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewAccessor returns a new random accessor id (32 hex characters).
func NewAccessor() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate a token accessor: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// HashSecret is what the cluster stores of a secret.
func HashSecret(secret string) [32]byte {
	// A secret that fits is copied to the stack: converting it to a slice
	// would put a copy on the heap on every request.
	var buf [128]byte
	if len(secret) <= len(buf) {
		return sha256.Sum256(buf[:copy(buf[:], secret)])
	}
	return sha256.Sum256([]byte(secret))
}

// grant is one rule, compiled: the access it gives and the role globs that
// narrow it (nil: every role).
type grant struct {
	write bool // write, or register; read is implied by either
	roles []string
}

// Identity is an authenticated caller.
type Identity struct {
	// Accessor names the token ("operator" for the -operator-token).
	Accessor string
	// Principal is who the caller is to rate limits, counters and the audit
	// trail.
	Principal string
	// Management may do everything.
	Management bool
	// grants by object; an object absent has no rule.
	grants map[string][]grant
}

// Management returns an identity that may do everything.
func Management(accessor, principal string) *Identity {
	return &Identity{Accessor: accessor, Principal: principal, Management: true}
}

// Allow reports whether the identity may do access (read, write or
// register) on object; role is the object's role for role-scoped objects
// and is ignored for the others.
func (id *Identity) Allow(object, access, role string) bool {
	if id.Management {
		return true
	}
	needWrite := access != api.ACLRead
	for _, g := range id.grants[object] {
		if needWrite && !g.write {
			continue
		}
		if g.roles == nil || !api.ACLRoleScoped(object) {
			return true
		}
		for _, glob := range g.roles {
			if api.MatchRoleGlob(glob, role) {
				return true
			}
		}
	}
	return false
}

// AllowSome reports whether the identity has access to object for at least
// one role: what a list needs before it is filtered role by role.
func (id *Identity) AllowSome(object, access string) bool {
	if id.Management {
		return true
	}
	needWrite := access != api.ACLRead
	for _, g := range id.grants[object] {
		if !needWrite || g.write {
			return true
		}
	}
	return false
}

// TokenEntry is a replicated token and the hash of its secret.
type TokenEntry struct {
	Token api.ACLToken
	Hash  [32]byte
}

// Resolver finds the identity of a bearer secret. It is immutable: the
// server builds a new one whenever the ACL state changes and swaps it in.
type Resolver struct {
	byHash map[[32]byte]*Identity
	// byAccessor finds the identity a session was opened with again when
	// the ACL state changes (the server ends the sessions it no longer
	// grants).
	byAccessor map[string]*Identity
}

// NewResolver compiles every token against the policies it names; a policy
// that does not exist grants nothing.
func NewResolver(policies []api.ACLPolicy, tokens []TokenEntry) *Resolver {
	byName := make(map[string]api.ACLPolicy, len(policies))
	for _, p := range policies {
		byName[p.Name] = p
	}
	r := &Resolver{byHash: make(map[[32]byte]*Identity, len(tokens)), byAccessor: make(map[string]*Identity, len(tokens))}
	for _, t := range tokens {
		id := &Identity{Accessor: t.Token.Accessor, Principal: t.Token.Principal, Management: t.Token.Management,
			grants: map[string][]grant{}}
		if id.Principal == "" {
			id.Principal = id.Accessor
		}
		for _, name := range t.Token.Policies {
			for _, rule := range byName[name].Rules {
				g := grant{write: rule.Access != api.ACLRead}
				if len(rule.Roles) > 0 {
					g.roles = rule.Roles
				}
				id.grants[rule.Object] = append(id.grants[rule.Object], g)
			}
		}
		r.byHash[t.Hash] = id
		r.byAccessor[id.Accessor] = id
	}
	return r
}

// ByAccessor returns the identity of the token with this accessor, false
// when no such token exists (deleted).
func (r *Resolver) ByAccessor(accessor string) (*Identity, bool) {
	if r == nil {
		return nil, false
	}
	id, ok := r.byAccessor[accessor]
	return id, ok
}

// Resolve returns the identity whose secret this is.
func (r *Resolver) Resolve(secret string) (*Identity, bool) {
	if r == nil {
		return nil, false
	}
	id, ok := r.byHash[HashSecret(secret)]
	return id, ok
}

// Len is the number of tokens the resolver knows.
func (r *Resolver) Len() int {
	if r == nil {
		return 0
	}
	return len(r.byHash)
}
