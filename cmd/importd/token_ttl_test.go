package main

import (
	"fmt"
	"testing"
	"time"
)

// TOKEN_TTL sets the access token's lifetime, and a token past it is
// refused, so clients must refresh by its exp.
func TestAuth_TokenTTLSetsTheAccessTokenLifetime(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"TOKEN_TTL": "2s"})
	out, errs := s.token(t, fmt.Sprintf(`{"APIKey": %q}`, s.newKey(t, "short")))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	payload, _ := out["payload"].(map[string]any)
	iat, _ := payload["iat"].(float64)
	exp, _ := payload["exp"].(float64)
	if d := exp - iat; d != 2 {
		t.Errorf("exp - iat = %vs, want 2s", d)
	}
	tok := out["token"].(string)
	if r := s.do(t, "GET", "/v1/data-import/whoami/", tok, nil); r.Status != 200 {
		t.Fatalf("fresh token: %d %s", r.Status, r.Raw)
	}
	time.Sleep(time.Until(time.Unix(int64(exp), 0)) + 1100*time.Millisecond)
	if r := s.do(t, "GET", "/v1/data-import/whoami/", tok, nil); r.Status != 401 || r.Body["code"] != "authentication_failed" {
		t.Errorf("expired token: %d %s, want 401 authentication_failed", r.Status, r.Raw)
	}
}
