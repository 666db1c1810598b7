package auth

import (
	"context"
	"strings"
	"testing"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// A Bearer header is refused with a detail that says to send the same
// credential with the Token scheme; it never reaches the database.
func TestAuthenticateHeader_BearerSaysToSendToken(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"Bearer abc.def.ghi", "bearer " + keyPrefix + "x"} {
		_, err := (&Service{}).AuthenticateHeader(context.Background(), h)
		p, ok := problem.As(err)
		if !ok || p.Code != CodeNotAuthenticated || !strings.Contains(p.Detail, "'Authorization: Token <token>'") {
			t.Errorf("%q: error %v, want %s with a detail naming the Token scheme", h, err, CodeNotAuthenticated)
		}
	}
}

// An API key sent alone, in the place of the bare token, is refused with a
// detail that says to exchange it for a token first and names the endpoint;
// it never reaches the database.
func TestAuthenticateHeader_KeyAloneSaysToExchangeItForAToken(t *testing.T) {
	t.Parallel()
	for _, h := range []string{keyPrefix + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", " " + keyPrefix + "x "} {
		_, err := (&Service{}).AuthenticateHeader(context.Background(), h)
		p, ok := problem.As(err)
		if !ok || p.Kind != problem.Unauthenticated || p.Code != CodeAuthenticationFailed || p.Detail != DetailKeyAsToken {
			t.Errorf("%q: error %v, want %s %q", h, err, CodeAuthenticationFailed, DetailKeyAsToken)
		}
	}
	for _, want := range []string{"obtainServiceToken", "POST /v1/graphql/", "'Authorization: Token <token>'"} {
		if !strings.Contains(DetailKeyAsToken, want) {
			t.Errorf("detail %q does not name %q", DetailKeyAsToken, want)
		}
	}
}
