package api

import (
	"context"
	"net/http"
)

// ACLPolicyList is the answer of GET /v1/acl/policies.
type ACLPolicyList struct {
	Policies []ACLPolicy `json:"policies"`
}

// ACLTokenList is the answer of GET /v1/acl/tokens: the tokens without
// their secrets.
type ACLTokenList struct {
	Tokens []ACLToken `json:"tokens"`
}

// ACL list paths.
const (
	ACLPoliciesPath = "/v1/acl/policies"
	ACLTokensPath   = "/v1/acl/tokens"
)

// ACLBootstrap makes the cluster's first management token, once: the answer
// carries its secret, which the cluster never shows again. A cluster that was
// bootstrapped already, or a server without -acl, answers a conflict. It
// needs no token.
func (c *Client) ACLBootstrap(ctx context.Context) (*ACLToken, error) {
	var out ACLToken
	if _, err := c.Do(ctx, Request{Method: http.MethodPost, Path: ACLBootstrapPath}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ACLPolicies lists every policy.
func (c *Client) ACLPolicies(ctx context.Context, opts ReadOptions) ([]ACLPolicy, error) {
	var out ACLPolicyList
	return out.Policies, c.get(ctx, ACLPoliciesPath, opts, &out)
}

// ACLPolicy returns one policy.
func (c *Client) ACLPolicy(ctx context.Context, name string, opts ReadOptions) (*ACLPolicy, error) {
	var out ACLPolicy
	if err := c.get(ctx, ACLPolicyPath(name), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutACLPolicy creates or replaces a policy.
func (c *Client) PutACLPolicy(ctx context.Context, name string, req ACLPolicyRequest, opts WriteOptions) (*ACLPolicy, error) {
	var out ACLPolicy
	if err := c.write(ctx, http.MethodPut, ACLPolicyPath(name), req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteACLPolicy removes a policy, and its name from every token that
// names it.
func (c *Client) DeleteACLPolicy(ctx context.Context, name string, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, ACLPolicyPath(name), nil, opts, nil)
}

// ACLTokens lists every token, without secrets.
func (c *Client) ACLTokens(ctx context.Context, opts ReadOptions) ([]ACLToken, error) {
	var out ACLTokenList
	return out.Tokens, c.get(ctx, ACLTokensPath, opts, &out)
}

// ACLToken returns one token by accessor, without its secret.
func (c *Client) ACLToken(ctx context.Context, accessor string, opts ReadOptions) (*ACLToken, error) {
	var out ACLToken
	if err := c.get(ctx, ACLTokenPath(accessor), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutACLToken creates the token of a new accessor, whose answer carries the
// secret (the only time the cluster shows it), or updates an existing token,
// whose secret stays as it was and is not in the answer.
func (c *Client) PutACLToken(ctx context.Context, accessor string, req ACLTokenRequest, opts WriteOptions) (*ACLToken, error) {
	var out ACLToken
	if err := c.write(ctx, http.MethodPut, ACLTokenPath(accessor), req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteACLToken revokes a token.
func (c *Client) DeleteACLToken(ctx context.Context, accessor string, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, ACLTokenPath(accessor), nil, opts, nil)
}

// ACLTokenSelf returns the token the client calls with, without its secret.
// The -operator-token answers as accessor and principal "operator", a
// management token.
func (c *Client) ACLTokenSelf(ctx context.Context) (*ACLToken, error) {
	var out ACLToken
	if err := c.get(ctx, ACLTokenSelfPath, ReadOptions{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LabeledRateLimit returns the limit of principal's frameworks with label.
func (c *Client) LabeledRateLimit(ctx context.Context, principal, label string, opts ReadOptions) (*RateLimit, error) {
	var out RateLimit
	if err := c.get(ctx, LabeledRateLimitPath(principal, label), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutLabeledRateLimit sets the limit of principal's frameworks with label;
// they stay under the principal's own limit as well.
func (c *Client) PutLabeledRateLimit(ctx context.Context, principal, label string, req RateLimitRequest, opts WriteOptions) (*RateLimit, error) {
	var out RateLimit
	if err := c.write(ctx, http.MethodPut, LabeledRateLimitPath(principal, label), req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteLabeledRateLimit removes the limit of principal's frameworks with
// label.
func (c *Client) DeleteLabeledRateLimit(ctx context.Context, principal, label string, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, LabeledRateLimitPath(principal, label), nil, opts, nil)
}
