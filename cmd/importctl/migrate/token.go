package migrate

import (
	"context"
	"errors"
)

// Tokens obtains and renews access tokens with an API key as the runner
// does (the GraphQL mutation, refresh before expiry, retries), for the
// other commands that talk to the service over HTTP (importctl reconcile).
type Tokens struct{ c *client }

// NewTokens returns the token source of cfg, of which BaseURL, APIKey,
// Retries, RequestTimeout, the backoffs and HTTPClient are used (defaults as
// for Run). Errors: a usage error when the URL or the key is missing.
func NewTokens(cfg Config) (*Tokens, error) {
	if cfg.BaseURL == "" || cfg.APIKey == "" {
		return nil, errors.New("the service URL and the API key are required")
	}
	// check wants the fields of a run; give it placeholders for them.
	cfg.Cohort, cfg.ReportDir, cfg.ValidateOnly, cfg.DryRun = "-", "-", true, false
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Tokens{c: newClient(cfg)}, nil
}

// Token returns an access token with at least a fifth of its life left;
// renew obtains a new one whatever its age (after a 401).
func (t *Tokens) Token(ctx context.Context, renew bool) (string, error) {
	return t.c.accessToken(ctx, renew)
}
