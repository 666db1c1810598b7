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
