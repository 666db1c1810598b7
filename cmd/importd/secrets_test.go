package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

// Weak secrets were accepted as long as they were long enough: a
// TOKEN_SECRET of 32 × "a" or "changeme" × 4 signed tokens, and the
// dashboard's password could be "x", "password" or "Admin". Phrases of
// words then passed the estimate of entropy by the frequencies of their
// letters ("thequickbrownfoxjumpsoverthelazydog", "correcthorsebatterystaple").
// importd now refuses a secret of which too little is left once zxcvbn's
// words, names and patterns are taken out, naming the variable and how to
// generate one.
func TestConfig_WeakSecretsAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, variable, value string
	}{
		{"token secret of one letter", "TOKEN_SECRET", strings.Repeat("a", 32)},
		{"token secret of a repeated word", "TOKEN_SECRET", strings.Repeat("changeme", 4)},
		{"token secret of a repeated pair", "TOKEN_SECRET", strings.Repeat("ab", 32)},
		{"token secret of a counted alphabet", "TOKEN_SECRET", "0123456789abcdef0123456789abcdef"},
		{"token secret of a repeated phrase", "TOKEN_SECRET", "test-secret-test-secret-test-secret-0123"},
		{"token secret of a pangram", "TOKEN_SECRET", "thequickbrownfoxjumpsoverthelazydog"},
		{"token secret of a capitalised pangram", "TOKEN_SECRET", "The quick brown fox jumps over the lazy dog!"},
		{"token secret of four words", "TOKEN_SECRET", "correct-horse-battery-staple-2024"},
		{"token secret of a keyboard walk", "TOKEN_SECRET", "qwertyuiopasdfghjklzxcvbnm1234567890"},
		{"password of one letter", "MONITORING_PASSWORD", "x"},
		{"password", "MONITORING_PASSWORD", "password"},
		{"capitalised word", "MONITORING_PASSWORD", "Admin"},
		{"short phrase", "MONITORING_PASSWORD", "secret-pass"},
		{"repeated word", "MONITORING_PASSWORD", "changemechangeme"},
		{"password of a pangram", "MONITORING_PASSWORD", "thequickbrownfoxjumpsoverthelazydog"},
		{"password of four words", "MONITORING_PASSWORD", "correcthorsebatterystaple"},
		{"password of a leet word and a date", "MONITORING_PASSWORD", "Tr0ub4dor&3-1987-06-21"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := secretsEnv(map[string]string{tc.variable: tc.value})
			_, err := loadConfig(func(k string) string { return env[k] }, needDB|needRedis|needToken)
			if err == nil || !strings.Contains(err.Error(), tc.variable+": too easy to guess") || !strings.Contains(err.Error(), "openssl rand -hex") {
				t.Errorf("%s=%q: %v, want it refused as too easy to guess, saying how to make one", tc.variable, tc.value, err)
			}
		})
	}
}

// secretsEnv is an environment with generated secrets and a login, and
// over on top.
func secretsEnv(over map[string]string) map[string]string {
	env := map[string]string{"DATABASE_URL": "postgres://importd:" + dbPassword + "@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0",
		"TOKEN_SECRET": testSecret, "MONITORING_USER": monitoringUser, "MONITORING_PASSWORD": testPassword}
	for k, v := range over {
		env[k] = v
	}
	return env
}

// A generated login and database password, for the tests of reuse.
const (
	monitoringUser = "ops-7c1e9a42d5b8"
	dbPassword     = "e0b4c97d21a6f3580c9e2d7b41f6a8c3"
)

// A secret that is another secret, or the login's user name, was accepted:
// each was strong by itself. A leak of one would give both away, and a
// user name is no secret at all. A secret that is another one with a few
// characters added is as weak as what was added. Each is refused at start,
// naming the variable and the setting it repeats, never the value.
func TestConfig_ReusedSecretsAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		over map[string]string
		want string
	}{
		{"password that is the token secret", map[string]string{"MONITORING_PASSWORD": testSecret}, "MONITORING_PASSWORD: is the same as TOKEN_SECRET"},
		{"password that is the user name", map[string]string{"MONITORING_PASSWORD": monitoringUser}, "MONITORING_PASSWORD: is the same as MONITORING_USER"},
		{"password that is the database's", map[string]string{"MONITORING_PASSWORD": dbPassword}, "MONITORING_PASSWORD: is the same as the password of DATABASE_URL"},
		{"password that is Redis's", map[string]string{"MONITORING_PASSWORD": dbPassword, "DATABASE_URL": "postgres://x@127.0.0.1:1/x",
			"REDIS_URL": "redis://:" + dbPassword + "@127.0.0.1:1/0"}, "MONITORING_PASSWORD: is the same as the password of REDIS_URL"},
		{"token secret that is the database's", map[string]string{"TOKEN_SECRET": testSecret, "DATABASE_URL": "postgres://importd:" + testSecret + "@127.0.0.1:1/x"},
			"TOKEN_SECRET: is the same as the password of DATABASE_URL"},
		{"password that is the user name and a little", map[string]string{"MONITORING_PASSWORD": monitoringUser + "!x9"}, "MONITORING_PASSWORD: too easy to guess"},
		{"token secret that is the password and a little", map[string]string{"TOKEN_SECRET": testPassword + "-2024-token"}, "TOKEN_SECRET: too easy to guess"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := secretsEnv(tc.over)
			_, err := loadConfig(func(k string) string { return env[k] }, needDB|needRedis|needToken)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			for k, v := range tc.over {
				if strings.Contains(err.Error(), v) && !strings.Contains(k, "_URL") {
					t.Errorf("the error shows the value of %s: %v", k, err)
				}
			}
		})
	}
}

// Generated secrets, as the error message, the Makefile and the deployment
// docs make them, are accepted: the estimate's least value over many draws
// (100 under -short, 2,000 otherwise; -v prints it) is well above each
// limit, and importd starts with the first draws.
func TestConfig_GeneratedSecretsAreAccepted(t *testing.T) {
	t.Parallel()
	draws := 2000
	if testing.Short() {
		draws = 100
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	forms := []struct {
		name     string
		generate func() string
		min      float64
	}{
		{"TOKEN_SECRET: openssl rand -hex 32", func() string { return hex.EncodeToString(random(32)) }, minTokenSecretBits},
		{"TOKEN_SECRET: openssl rand -base64 32", func() string { return base64.StdEncoding.EncodeToString(random(32)) }, minTokenSecretBits},
		{"MONITORING_PASSWORD: openssl rand -hex 16", func() string { return hex.EncodeToString(random(16)) }, minPasswordBits},
		{"MONITORING_PASSWORD: openssl rand -base64 24", func() string { return base64.StdEncoding.EncodeToString(random(24)) }, minPasswordBits},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			least, leastOf := math.Inf(1), ""
			for range draws {
				s := f.generate()
				if b := secretBits(s, []string{monitoringUser}); b < least {
					least, leastOf = b, s
				}
			}
			t.Logf("least of %d draws: %.0f bits (%s)", draws, least, leastOf)
			if least < f.min {
				t.Errorf("%s refused: %.0f bits, want at least %.0f", leastOf, least, f.min)
			}
		})
	}
	for range 10 {
		env := secretsEnv(map[string]string{"TOKEN_SECRET": forms[0].generate(), "MONITORING_PASSWORD": forms[3].generate()})
		if _, err := loadConfig(func(k string) string { return env[k] }, needDB|needRedis|needToken); err != nil {
			t.Fatalf("generated secrets refused: %v", err)
		}
	}
}
