package auth

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

const headerTestSecret = "0123456789abcdef0123456789abcdef"

// Every form of reference-api.md 2.1 authenticates, with the key's scope;
// a revoked or unknown key, a bare key and other schemes do not.
func TestAuthenticateHeader_FormsOfTheReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	if _, err := d.Exec(`INSERT INTO import_suppliers (code) VALUES ('ALPHA'), ('BETA')`); err != nil {
		t.Fatal(err)
	}
	newKey := func(name string, suppliers ...string) string {
		scope := OnlySuppliers(suppliers...)
		if len(suppliers) == 0 {
			scope = AllSuppliers()
		}
		key, err := CreateKey(ctx, d, name, "", scope)
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	all, alpha, revoked := newKey("all"), newKey("alpha", "ALPHA"), newKey("revoked")
	s := New(d, []byte(headerTestSecret))
	pair, err := s.TokenFromKey(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	revokedPair, err := s.TokenFromKey(ctx, revoked)
	if err != nil {
		t.Fatal(err)
	}
	if err := RevokeKey(ctx, d, "revoked"); err != nil {
		t.Fatal(err)
	}

	type result struct {
		KeyName   string
		Suppliers []string
		Code      string
	}
	ok := func(name string, suppliers ...string) result { return result{KeyName: name, Suppliers: suppliers} }
	failed := result{Code: CodeAuthenticationFailed}
	missing := result{Code: CodeNotAuthenticated}
	cases := []struct {
		name, header string
		want         result
	}{
		{"Token and access token", "Token " + pair.Token, ok("all")},
		{"access token alone", pair.Token, ok("all")},
		{"scheme in lower case", "token " + pair.Token, ok("all")},
		{"Token and API key", "Token " + all, ok("all")},
		{"Token and scoped API key", "Token " + alpha, ok("alpha", "ALPHA")},
		{"spaces around the credential", "  Token   " + alpha + " ", ok("alpha", "ALPHA")},
		{"revoked API key", "Token " + revoked, failed},
		{"token of a revoked key", "Token " + revokedPair.Token, failed},
		{"unknown API key", "Token " + keyPrefix + strings.Repeat("x", 43), failed},
		{"API key with a wrong last character", "Token " + all[:len(all)-1] + "!", failed},
		{"API key alone", all, failed},
		{"garbage alone", "abc.def.ghi", failed},
		{"refresh token", "Token " + pair.RefreshToken, failed},
		{"no header", "", missing},
		{"Token alone", "Token", missing},
		{"Token and spaces", "Token   ", missing},
		{"another scheme", "Bearer " + pair.Token, missing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := s.AuthenticateHeader(ctx, tc.header)
			var got result
			if err != nil {
				e, isProblem := problem.As(err)
				if !isProblem || e.Kind != problem.Unauthenticated {
					t.Fatalf("error %v, want an Unauthenticated problem", err)
				}
				got.Code = e.Code
			} else {
				got = result{KeyName: p.KeyName, Suppliers: p.Suppliers}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Whatever the header holds, the answer is a principal or an
// Unauthenticated problem: never a panic, never another error.
func FuzzAuthenticateHeader(f *testing.F) {
	d := dbtest.New(f)
	key, err := CreateKey(context.Background(), d, "fuzz", "", AllSuppliers())
	if err != nil {
		f.Fatal(err)
	}
	s := New(d, []byte(headerTestSecret))
	pair, err := s.TokenFromKey(context.Background(), key)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", "Token", "Token " + key, key, pair.Token, "Token " + pair.Token, "Bearer x", "Token bik_", "Token \x00", "  "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		_, err := s.AuthenticateHeader(context.Background(), header)
		if err == nil {
			return
		}
		if p, ok := problem.As(err); !ok || p.Kind != problem.Unauthenticated {
			t.Fatalf("header %q: %v, want an Unauthenticated problem", header, err)
		}
	})
}
