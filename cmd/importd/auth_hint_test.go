package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/bulkimport/bulkimport/jobs/auth"
)

// An API key sent where a token goes gets an answer that says to exchange
// it for a token first: alone in the Authorization header (the bare-token
// form) a 401 naming obtainServiceToken and its endpoint, and as the
// refreshToken of the token mutation an error that says to pass it as
// APIKey. The key itself keeps working in 'Authorization: Token <API key>'.
func TestAuth_APIKeyInTheTokensPlaceSaysToExchangeIt(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "hint")

	req, _ := http.NewRequest("GET", s.base+"/v1/data-import/whoami/", nil)
	req.Header.Set("Authorization", key)
	r := doReq(t, req)
	if r.Status != 401 || r.Body["code"] != auth.CodeAuthenticationFailed || r.Body["detail"] != auth.DetailKeyAsToken {
		t.Errorf("key alone: got %d %s, want 401 %s %q", r.Status, r.Raw, auth.CodeAuthenticationFailed, auth.DetailKeyAsToken)
	}
	for _, want := range []string{"exchange it for a token first", "obtainServiceToken", "POST /v1/graphql/"} {
		if d, _ := r.Body["detail"].(string); !strings.Contains(d, want) {
			t.Errorf("key alone: detail %q does not say %q", d, want)
		}
	}

	_, errs := s.token(t, fmt.Sprintf(`{"refreshToken": %q}`, key))
	if code := errorCode(t, errs); code != auth.CodeInvalidRefreshToken {
		t.Errorf("key as refreshToken: code %q, want %q", code, auth.CodeInvalidRefreshToken)
	}
	if msg, _ := errs[0].(map[string]any)["message"].(string); !strings.Contains(msg, "pass it as APIKey") {
		t.Errorf("key as refreshToken: message %q does not say to pass it as APIKey", msg)
	}

	req, _ = http.NewRequest("GET", s.base+"/v1/data-import/whoami/", nil)
	req.Header.Set("Authorization", "Token "+key)
	if r := doReq(t, req); r.Status != 200 {
		t.Errorf("Token <API key>: got %d %s, want 200", r.Status, r.Raw)
	}
}
