package migrate

import (
	"context"
	"errors"
	"net/http"
	"net/url"
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

// Get reads path (from the service's base URL) with an access token, as
// the runner sends its requests: a 401 renews the token, a 429 waits, a
// 5xx or a failed connection is tried again up to Retries times, and the
// last answer is returned, its status and body, whatever it is.
func (t *Tokens) Get(ctx context.Context, path string) (status int, body []byte, err error) {
	a, err := t.c.do(ctx, http.MethodGet, path, nil, &counts{})
	return a.Status, a.Body, err
}

// AccountPath is the path of the API's account detail of one account
// (what importctl account show prints); each part is escaped, so that an
// account number's "/" stays inside its segment.
func AccountPath(supplier, number string) string {
	return "/v1/data-import/account/" + url.PathEscape(supplier) + "/" + url.PathEscape(number) + "/"
}

// Token returns an access token with at least a fifth of its life left;
// renew obtains a new one whatever its age (after a 401).
func (t *Tokens) Token(ctx context.Context, renew bool) (string, error) {
	return t.c.accessToken(ctx, renew)
}
