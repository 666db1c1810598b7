package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// Weak secrets were accepted as long as they were long enough: a
// TOKEN_SECRET of 32 × "a" or "changeme" × 4 signed tokens, and the
// dashboard's password could be "x", "password" or "Admin". importd now
// refuses a secret with too little estimated entropy, naming the variable
// and how to generate one.
func TestConfig_WeakSecretsAreRefused(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret}
	tests := []struct {
		name, variable, value string
	}{
		{"token secret of one letter", "TOKEN_SECRET", strings.Repeat("a", 32)},
		{"token secret of a repeated word", "TOKEN_SECRET", strings.Repeat("changeme", 4)},
		{"token secret of a repeated pair", "TOKEN_SECRET", strings.Repeat("ab", 32)},
		{"token secret of a counted alphabet", "TOKEN_SECRET", "0123456789abcdef0123456789abcdef"},
		{"token secret of a repeated phrase", "TOKEN_SECRET", "test-secret-test-secret-test-secret-0123"},
		{"password of one letter", "MONITORING_PASSWORD", "x"},
		{"password", "MONITORING_PASSWORD", "password"},
		{"capitalised word", "MONITORING_PASSWORD", "Admin"},
		{"short phrase", "MONITORING_PASSWORD", "secret-pass"},
		{"repeated word", "MONITORING_PASSWORD", "changemechangeme"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword}
			for k, v := range base {
				env[k] = v
			}
			env[tc.variable] = tc.value
			_, err := loadConfig(func(k string) string { return env[k] }, needDB|needRedis|needToken)
			if err == nil || !strings.Contains(err.Error(), tc.variable+": too easy to guess") || !strings.Contains(err.Error(), "openssl rand -hex") {
				t.Errorf("%s=%q: %v, want it refused as too easy to guess, saying how to make one", tc.variable, tc.value, err)
			}
		})
	}
}

// Generated secrets, as the error message, the Makefile and the deployment
// docs make them, are accepted: the estimate's least value over many draws
// is far above each limit.
func TestConfig_GeneratedSecretsAreAccepted(t *testing.T) {
	t.Parallel()
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	for range 500 {
		for _, env := range []map[string]string{
			{"TOKEN_SECRET": hex.EncodeToString(random(32)), "MONITORING_PASSWORD": hex.EncodeToString(random(16))},
			{"TOKEN_SECRET": base64.StdEncoding.EncodeToString(random(32)), "MONITORING_PASSWORD": base64.StdEncoding.EncodeToString(random(18))},
		} {
			env["DATABASE_URL"], env["REDIS_URL"], env["MONITORING_USER"] = "postgres://x@127.0.0.1:1/x", "redis://127.0.0.1:1/0", "ops"
			if _, err := loadConfig(func(k string) string { return env[k] }, needDB|needRedis|needToken); err != nil {
				t.Fatalf("generated secrets %v refused: %v", env, err)
			}
		}
	}
}
