package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/auth"
)

// attempt is the outcome of one authentication attempt as a client sees it:
// the HTTP status and the code (section 7 code, or the GraphQL errorCode of
// a 200).
type attempt struct {
	Status int
	Code   string
}

// tokenFrom runs obtainServiceToken with input from the client address
// addr (an X-Forwarded-For behind the trusted loopback proxy; "" for none).
func (s *service) tokenFrom(t testing.TB, addr, input string) (attempt, response) {
	t.Helper()
	q := map[string]any{"query": `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token refreshToken } }`,
		"variables": map[string]any{"input": json.RawMessage(input)}}
	body, _ := json.Marshal(q)
	req, _ := http.NewRequest("POST", s.base+"/v1/graphql/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	r := doReq(t, req)
	a := attempt{Status: r.Status}
	if code, ok := r.Body["code"].(string); ok {
		a.Code = code
	} else if errs, _ := r.Body["errors"].([]any); len(errs) > 0 {
		a.Code = errorCode(t, errs)
	}
	return a, r
}

// whoamiFrom calls whoami with the Authorization header from addr.
func (s *service) whoamiFrom(t testing.TB, addr, authorization string) (attempt, response) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/v1/data-import/whoami/", nil)
	req.Header.Set("Authorization", authorization)
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	r := doReq(t, req)
	code, _ := r.Body["code"].(string)
	return attempt{Status: r.Status, Code: code}, r
}

func keyInput(key string) string { return fmt.Sprintf(`{"APIKey": %q}`, key) }

// badKey is a well-formed API key that no one holds; n makes each different.
func badKey(n int) string { return fmt.Sprintf("bik_%08dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", n) }

var (
	refusedKey = attempt{200, auth.CodeInvalidAPIKey}
	// throttled is a REST endpoint's refusal: the section 7 429.
	throttled = attempt{429, auth.CodeTooManyFailedAttempts}
	// tokenThrottled is obtainServiceToken's: GraphQL answers 200 with the
	// code in errors[] (reference 2.2).
	tokenThrottled = attempt{200, auth.CodeTooManyFailedAttempts}
)

// checkThrottled checks that r is the section 7 429 with a Retry-After
// within the limit's window.
func checkThrottled(t testing.TB, r response, window time.Duration) {
	t.Helper()
	checkRetryAfter(t, r, window)
	if _, ok := r.Body["errors"].([]any); !ok || r.Body["detail"] == "" {
		t.Errorf("429 body is not the section 7 shape: %s", r.Raw)
	}
}

// checkTokenThrottled checks that r is GraphQL's refusal, 200 with
// data null and the code in errors[0].extensions.code, with a Retry-After
// header within the limit's window.
func checkTokenThrottled(t testing.TB, r response, window time.Duration) {
	t.Helper()
	checkRetryAfter(t, r, window)
	errs, _ := r.Body["errors"].([]any)
	if r.Status != 200 || !noData(r) || len(errs) != 1 {
		t.Fatalf("refusal is not a GraphQL answer: %d %s", r.Status, r.Raw)
	}
	if ext, _ := errs[0].(map[string]any)["extensions"].(map[string]any); ext["code"] != auth.CodeTooManyFailedAttempts {
		t.Errorf("extensions = %v, want code %s", ext, auth.CodeTooManyFailedAttempts)
	}
}

func checkRetryAfter(t testing.TB, r response, window time.Duration) {
	t.Helper()
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > window {
		t.Errorf("Retry-After %q, want 1 to %v seconds", r.Header.Get("Retry-After"), window.Seconds())
	}
}

// Failed token requests are limited, so that keys cannot be guessed at
// speed: the limit's failures are answered as usual, and every attempt after them is refused
// with 429, the right key included, while a client at another address is
// not slowed.
func TestAuthLimit_FailedAttemptsFromOneAddressAreThrottled(t *testing.T) {
	t.Parallel()
	const limit = 10
	s := startService(t, "api", map[string]string{"AUTH_FAILURE_LIMIT": strconv.Itoa(limit), "AUTH_FAILURE_WINDOW": "10m",
		"TRUSTED_PROXIES": "127.0.0.1"})
	good := s.newKey(t, "good")
	const attacker, other = "203.0.113.7", "198.51.100.9"

	counts := map[attempt]int{}
	var last response
	for i := range 300 {
		a, r := s.tokenFrom(t, attacker, keyInput(badKey(i)))
		counts[a]++
		if a == tokenThrottled {
			last = r
		}
	}
	if diff := cmp.Diff(map[attempt]int{refusedKey: limit, tokenThrottled: 300 - limit}, counts); diff != "" {
		t.Fatalf("300 failed attempts (-want +got):\n%s", diff)
	}
	checkTokenThrottled(t, last, 10*time.Minute)

	// While throttled, the right key is refused too, so that a guess tells nothing.
	if a, _ := s.tokenFrom(t, attacker, keyInput(good)); a != tokenThrottled {
		t.Errorf("good key from the throttled address: %+v, want %+v", a, tokenThrottled)
	}
	// The same key from another address is not slowed.
	if a, r := s.tokenFrom(t, other, keyInput(good)); a != (attempt{200, ""}) {
		t.Errorf("good key from another address: %+v %s", a, r.Raw)
	}
	// Nor is the API key used directly on a REST endpoint from there.
	if a, r := s.whoamiFrom(t, other, "Token "+good); a.Status != 200 {
		t.Errorf("good key used directly from another address: %+v %s", a, r.Raw)
	}
	// The REST endpoints apply the same count to the attacker's address.
	if a, _ := s.whoamiFrom(t, attacker, "Token "+good); a != throttled {
		t.Errorf("good key used directly from the throttled address: %+v, want %+v", a, throttled)
	}
}

// Bad bearer tokens and bad refresh tokens count as failed attempts; a
// token the service has verified before is no guess and is not throttled.
func TestAuthLimit_BadTokensAndRefreshTokensCount(t *testing.T) {
	t.Parallel()
	const limit = 5
	s := startService(t, "api", map[string]string{"AUTH_FAILURE_LIMIT": strconv.Itoa(limit), "AUTH_FAILURE_WINDOW": "10m",
		"TRUSTED_PROXIES": "127.0.0.1"})
	key := s.newKey(t, "k")
	const tokens, refreshes = "203.0.113.20", "203.0.113.21"
	a, r := s.tokenFrom(t, tokens, keyInput(key))
	if a.Status != 200 {
		t.Fatalf("token: %+v %s", a, r.Raw)
	}
	tok := r.Body["data"].(map[string]any)["obtainServiceToken"].(map[string]any)["token"].(string)
	if a, r := s.whoamiFrom(t, tokens, "Token "+tok); a.Status != 200 {
		t.Fatalf("whoami: %+v %s", a, r.Raw)
	}

	var got []attempt
	for i := range limit + 2 {
		a, _ := s.whoamiFrom(t, tokens, fmt.Sprintf("Token not.a.token%d", i))
		got = append(got, a)
	}
	failed := attempt{401, auth.CodeAuthenticationFailed}
	want := []attempt{failed, failed, failed, failed, failed, throttled, throttled}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bad bearer tokens (-want +got):\n%s", diff)
	}
	if a, r := s.whoamiFrom(t, tokens, "Token "+tok); a.Status != 200 {
		t.Errorf("a token verified before the limit was reached: %+v %s", a, r.Raw)
	}

	got = nil
	for i := range limit + 2 {
		a, _ := s.tokenFrom(t, refreshes, fmt.Sprintf(`{"refreshToken": "not.a.refresh%d"}`, i))
		got = append(got, a)
	}
	bad := attempt{200, auth.CodeInvalidRefreshToken}
	want = []attempt{bad, bad, bad, bad, bad, tokenThrottled, tokenThrottled}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bad refresh tokens (-want +got):\n%s", diff)
	}
}

// Wrong keys that share a victim key's lookup prefix (its first twelve
// characters, which `importctl apikey list` prints) were counted against
// the key: 21 of them, from anywhere, locked its holder out at every
// address. Failures now count against the client address alone: the
// guesser's addresses are throttled, the victim's key keeps working from
// its own.
func TestAuthLimit_WrongKeysWithAVictimsPrefixDoNotLockItOut(t *testing.T) {
	t.Parallel()
	const limit = 5
	s := startService(t, "api", map[string]string{"AUTH_FAILURE_LIMIT": strconv.Itoa(limit), "AUTH_FAILURE_WINDOW": "10m",
		"TRUSTED_PROXIES": "127.0.0.1"})
	victim := s.newKey(t, "victim")
	const attacker = "192.0.2.1"
	var got []attempt
	for i := range limit + 1 {
		wrong := victim[:len(victim)-4] + fmt.Sprintf("%04d", i)
		a, _ := s.tokenFrom(t, attacker, keyInput(wrong))
		got = append(got, a)
	}
	// And as many again, each from an address of its own.
	for i := range 4 * limit {
		wrong := victim[:12] + fmt.Sprintf("%031d", i)
		if a, r := s.tokenFrom(t, fmt.Sprintf("192.0.2.%d", i+10), keyInput(wrong)); a != refusedKey {
			t.Fatalf("guess %d from an address of its own: %+v %s", i, a, r.Raw)
		}
	}
	want := []attempt{refusedKey, refusedKey, refusedKey, refusedKey, refusedKey, tokenThrottled}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("guesses from one address (-want +got):\n%s", diff)
	}
	for _, use := range []func() attempt{
		func() attempt { a, _ := s.tokenFrom(t, "198.51.100.200", keyInput(victim)); return a },
		func() attempt { a, _ := s.whoamiFrom(t, "198.51.100.200", "Token "+victim); return a },
	} {
		if a := use(); a.Status != 200 || a.Code != "" {
			t.Errorf("the victim's key from its own address: %+v, want 200", a)
		}
	}
}

// The count recovers: one attempt more every window/limit, and all of them
// a window after the last failure.
func TestAuthLimit_CountRecoversAfterTheWindow(t *testing.T) {
	t.Parallel()
	const limit, window = 3, 6 * time.Second
	s := startService(t, "api", map[string]string{"AUTH_FAILURE_LIMIT": strconv.Itoa(limit), "AUTH_FAILURE_WINDOW": window.String()})
	key := s.newKey(t, "k")
	want := []attempt{refusedKey, refusedKey, refusedKey, tokenThrottled}
	// round sends limit+1 wrong keys. The last is throttled only if the
	// round took less than window/limit, after which one attempt more is
	// allowed: on a machine so loaded that it did not, the count is left to
	// recover whole and the round is sent again.
	round := func(name string) {
		t.Helper()
		for try := 1; ; try++ {
			start := time.Now()
			var got []attempt
			for i := range limit + 1 {
				a, _ := s.tokenFrom(t, "", keyInput(badKey(i)))
				got = append(got, a)
			}
			if time.Since(start) < window/limit {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%s (-want +got):\n%s", name, diff)
				}
				return
			}
			if try == 3 {
				t.Fatalf("%s: three rounds of %d requests each took longer than %v", name, limit+1, window/limit)
			}
			time.Sleep(window + 200*time.Millisecond)
		}
	}
	round("first round")
	time.Sleep(window + 200*time.Millisecond)
	if a, r := s.tokenFrom(t, "", keyInput(key)); a != (attempt{200, ""}) {
		t.Errorf("good key after the window: %+v %s", a, r.Raw)
	}
	round("round after the window")
}

// X-Forwarded-For is ignored unless the connection comes from a trusted
// proxy: otherwise a client would pick a new address for every guess.
func TestAuthLimit_ForwardedForIsIgnoredWithoutTrustedProxies(t *testing.T) {
	t.Parallel()
	const limit = 3
	s := startService(t, "api", map[string]string{"AUTH_FAILURE_LIMIT": strconv.Itoa(limit)})
	var got []attempt
	for i := range limit + 1 {
		a, _ := s.tokenFrom(t, fmt.Sprintf("198.51.100.%d", i+1), keyInput(badKey(i)))
		got = append(got, a)
	}
	if diff := cmp.Diff([]attempt{refusedKey, refusedKey, refusedKey, tokenThrottled}, got); diff != "" {
		t.Errorf("attempts with a new X-Forwarded-For each (-want +got):\n%s", diff)
	}
}
