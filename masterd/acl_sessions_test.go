package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// openSession is a scheduler or agent stream held open by a test.
type openSession struct {
	resp *http.Response
	dec  *json.Decoder
	id   string // the framework or agent id from the first event
}

// openStream POSTs a SUBSCRIBE or REGISTER with token and reads the first
// event (SUBSCRIBED or REGISTERED).
func openStream(t *testing.T, ctx context.Context, url, token, body string) *openSession {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	s := &openSession{resp: resp, dec: json.NewDecoder(bufio.NewReader(resp.Body))}
	var first struct {
		Type       string `json:"type"`
		Subscribed *struct {
			FrameworkID string `json:"framework_id"`
		} `json:"subscribed"`
		Registered *struct {
			AgentID string `json:"agent_id"`
		} `json:"registered"`
	}
	if err := s.dec.Decode(&first); err != nil {
		t.Fatalf("POST %s: first event: %v", url, err)
	}
	switch {
	case first.Subscribed != nil:
		s.id = first.Subscribed.FrameworkID
	case first.Registered != nil:
		s.id = first.Registered.AgentID
	default:
		t.Fatalf("POST %s: first event %q, want SUBSCRIBED or REGISTERED", url, first.Type)
	}
	return s
}

// ended reads the stream until it ends and returns the message of the
// ERROR event it ended with; the stream must close right after it.
func (s *openSession) ended(t *testing.T) string {
	t.Helper()
	for {
		var ev struct {
			Type  string          `json:"type"`
			Error *api.ErrorEvent `json:"error"`
		}
		if err := s.dec.Decode(&ev); err != nil {
			t.Fatalf("session %s ended without an ERROR event: %v", s.id, err)
		}
		if ev.Type != "ERROR" {
			continue // heartbeats, offers
		}
		if ev.Error == nil {
			t.Fatalf("session %s: ERROR event without a message", s.id)
		}
		var more json.RawMessage
		if err := s.dec.Decode(&more); !errors.Is(err, io.EOF) {
			t.Fatalf("session %s: after its ERROR event: %s (%v), want the stream closed", s.id, more, err)
		}
		return ev.Error.Message
	}
}

// TestACLRevocationEndsSessions: on a real masterd, deleting a framework's
// token ends its scheduler stream with an ERROR event saying so; a policy
// edit that takes away a framework's role does the same; an agent whose
// token no longer grants agent register is disconnected the same way; an
// unrelated token's deletion, and every change, leave the other sessions
// (the -operator-token's among them) open.
func TestACLRevocationEndsSessions(t *testing.T) {
	c, leader := startACLCluster(t, 1)
	addr := c.Address(leader)
	sched, agentURL := addr+api.SchedulerPath, addr+api.AgentProtocolPath
	fwRule := api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister, Roles: []string{"eng/*"}}
	revokedTok := newToken(t, addr, "fw-revoked", "team-r", fwRule)
	editedTok := newToken(t, addr, "fw-edited", "team-e", fwRule)
	keptTok := newToken(t, addr, "fw-kept", "team-k", api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister, Roles: []string{"ops"}})
	agentTok := newToken(t, addr, "agent", "agent-token", api.ACLRule{Object: api.ACLObjectAgent, Access: api.ACLRegister})
	newToken(t, addr, "unrelated", "", api.ACLRule{Object: api.ACLObjectQuota, Access: api.ACLRead})

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	revoked := openStream(t, ctx, sched, revokedTok, subscribeBody(t, api.FrameworkInfo{Name: "r", Roles: []string{"eng/ml"}, FailoverTimeoutSeconds: 600}))
	edited := openStream(t, ctx, sched, editedTok, subscribeBody(t, api.FrameworkInfo{Name: "e", Roles: []string{"eng/web"}, FailoverTimeoutSeconds: 600}))
	kept := openStream(t, ctx, sched, keptTok, subscribeBody(t, api.FrameworkInfo{Name: "k", Roles: []string{"ops"}, FailoverTimeoutSeconds: 600}))
	operator := openStream(t, ctx, sched, aclOperatorToken, subscribeBody(t, api.FrameworkInfo{Name: "o", Roles: []string{"*"}, FailoverTimeoutSeconds: 600}))
	agent := openStream(t, ctx, agentURL, agentTok, `{"type": "REGISTER", "register": {"agent_info": {"name": "node-1", "hostname": "h", "resources": {"cpus": 2}}}}`)

	// An unrelated token goes, then the framework's own: the ERROR that
	// ends the second session proves the first change was handled before.
	aclMust(t, "DELETE", addr+api.ACLTokenPath("unrelated"), aclOperatorToken, "", nil)
	aclMust(t, "DELETE", addr+api.ACLTokenPath("fw-revoked"), aclOperatorToken, "", nil)
	if msg := revoked.ended(t); !strings.Contains(msg, "fw-revoked") || !strings.Contains(msg, "revoked") {
		t.Errorf("the revoked token's session ended with %q, want it to name the token and say it was revoked", msg)
	}

	// The edited token's policy no longer names eng/*: register framework
	// for eng/web is gone.
	body, _ := json.Marshal(api.ACLPolicyRequest{Rules: []api.ACLRule{{Object: api.ACLObjectFramework, Access: api.ACLRegister, Roles: []string{"eng/ml"}}}})
	aclMust(t, "PUT", addr+api.ACLPolicyPath("p-fw-edited"), aclOperatorToken, string(body), nil)
	if msg := edited.ended(t); !strings.Contains(msg, "no longer grants register framework for role eng/web") {
		t.Errorf("the edited token's session ended with %q, want it to say the token no longer grants register framework for role eng/web", msg)
	}

	// The agent's policy loses agent register.
	body, _ = json.Marshal(api.ACLPolicyRequest{Rules: []api.ACLRule{{Object: api.ACLObjectQuota, Access: api.ACLRead}}})
	aclMust(t, "PUT", addr+api.ACLPolicyPath("p-agent"), aclOperatorToken, string(body), nil)
	if msg := agent.ended(t); !strings.Contains(msg, "no longer grants register agent") {
		t.Errorf("the agent's session ended with %q, want it to say the token no longer grants register agent", msg)
	}

	// Ended sessions are disconnections: the frameworks stay registered
	// (their failover timeout runs), the agent is disconnected. The others
	// are still connected.
	var fws api.FrameworkList
	aclMust(t, "GET", addr+"/v1/frameworks", aclOperatorToken, "", &fws)
	connected := map[string]bool{}
	for _, fw := range fws.Frameworks {
		connected[fw.ID] = fw.Connected
	}
	for _, want := range []struct {
		s         *openSession
		name      string
		connected bool
	}{{revoked, "revoked", false}, {edited, "edited", false}, {kept, "kept", true}, {operator, "operator's", true}} {
		got, known := connected[want.s.id]
		if !known || got != want.connected {
			t.Errorf("the %s framework %s: registered %v, connected %v; want registered, connected %v", want.name, want.s.id, known, got, want.connected)
		}
	}
	var agents api.AgentList
	aclMust(t, "GET", addr+"/v1/agents", aclOperatorToken, "", &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].Connected {
		t.Errorf("agents %+v, want node-1 disconnected", agents.Agents)
	}

	// The revoked framework cannot come back with its old token.
	if a := aclDo(t, "POST", sched, revokedTok, subscribeBody(t, api.FrameworkInfo{ID: revoked.id, Name: "r", Roles: []string{"eng/ml"}})); a.status != 401 {
		t.Errorf("SUBSCRIBE again with the revoked token: %d %s, want 401", a.status, a.body)
	}
}

// TestACLAgentAuditedByItsTokensPrincipal: with ACLs on, an agent's
// admission is audited under its token's principal, not agent/<name>.
func TestACLAgentAuditedByItsTokensPrincipal(t *testing.T) {
	c, leader := startACLCluster(t, 1)
	addr := c.Address(leader)
	agentTok := newToken(t, addr, "rack-7", "rack-7-agents", api.ACLRule{Object: api.ACLObjectAgent, Access: api.ACLRegister})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	openStream(t, ctx, addr+api.AgentProtocolPath, agentTok, `{"type": "REGISTER", "register": {"agent_info": {"name": "node-7", "hostname": "h7", "resources": {"cpus": 2}}}}`)

	var audit struct{ Entries []api.AuditEntry }
	aclMust(t, "GET", addr+"/v1/audit", aclOperatorToken, "", &audit)
	var authors []string
	for _, e := range audit.Entries {
		if e.Action == "agent.admit" {
			authors = append(authors, e.Principal)
		}
	}
	if len(authors) != 1 || authors[0] != "rack-7-agents" {
		t.Errorf("agent.admit audit entries by %q, want one by the agent token's principal rack-7-agents", authors)
	}
}

// TestACLSubscribeRefusalNamesRoles: a token without any framework rule is
// refused at the route, and the 403 names the roles the SUBSCRIBE asked for
// rather than "some role"; other scheduler calls keep the route's message.
func TestACLSubscribeRefusalNamesRoles(t *testing.T) {
	c, leader := startACLCluster(t, 1)
	addr := c.Address(leader)
	reader := newToken(t, addr, "quota-reader", "", api.ACLRule{Object: api.ACLObjectQuota, Access: api.ACLRead})
	sched := addr + api.SchedulerPath
	for _, tc := range []struct {
		roles []string
		want  string
	}{
		{[]string{"eng/ml"}, "lacks register framework for role eng/ml"},
		{[]string{"eng/ml", "finance"}, "lacks register framework for roles eng/ml, finance"},
	} {
		a := aclDo(t, "POST", sched, reader, subscribeBody(t, api.FrameworkInfo{Name: "f", Roles: tc.roles}))
		if a.status != 403 || !strings.Contains(string(a.body), tc.want) {
			t.Errorf("SUBSCRIBE as %v with a quota reader's token: %d %s, want 403 with %q", tc.roles, a.status, a.body, tc.want)
		}
	}
	revive, _ := json.Marshal(api.Call{FrameworkID: "fw-x", Type: api.CallRevive})
	if a := aclDo(t, "POST", sched, reader, string(revive)); a.status != 403 || !strings.Contains(string(a.body), "lacks register framework for some role") {
		t.Errorf("REVIVE with a quota reader's token: %d %s, want 403 for some role", a.status, a.body)
	}
}

// TestACLRevocationThroughAFollowerEndsSessions: on 3 servers, a token
// deleted through a follower (which passes the DELETE on to the leader)
// ends the session it opened on the leader.
func TestACLRevocationThroughAFollowerEndsSessions(t *testing.T) {
	c, leader := startACLCluster(t, 3)
	addr := c.Address(leader)
	tok := newToken(t, addr, "fw", "team", api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	s := openStream(t, ctx, addr+api.SchedulerPath, tok, subscribeBody(t, api.FrameworkInfo{Name: "f", Roles: []string{"*"}, FailoverTimeoutSeconds: 600}))
	follower := c.Address(c.Followers()[0])
	aclMust(t, "DELETE", follower+api.ACLTokenPath("fw"), aclOperatorToken, "", nil)
	if msg := s.ended(t); !strings.Contains(msg, "token fw was revoked") {
		t.Errorf("the session ended with %q, want it to say token fw was revoked", msg)
	}
}
