package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/auth"
)

// sendAtOnce sends the n requests that req makes, released together on
// connections of their own, and returns their answers in order.
func sendAtOnce(t *testing.T, n int, req func(i int) *http.Request) []response {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	out := make([]response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		r := req(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := client.Do(r)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			raw, err := io.ReadAll(res.Body)
			out[i] = response{Status: res.StatusCode, Header: res.Header, Raw: raw}
			errs[i] = err
			_ = json.Unmarshal(raw, &out[i].Body)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d of %d at once: %v", i, n, err)
		}
	}
	return out
}

// tokenRequest is obtainServiceToken with input from the client address
// addr (an X-Forwarded-For behind the trusted loopback proxy).
func (s *service) tokenRequest(addr, input string) *http.Request {
	q := map[string]any{"query": `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token refreshToken } }`,
		"variables": map[string]any{"input": json.RawMessage(input)}}
	body, _ := json.Marshal(q)
	req, _ := http.NewRequest("POST", s.base+"/v1/graphql/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", addr)
	return req
}

// basicRequest requests path with the basic-auth login user:pass from addr.
func (s *service) basicRequest(path, addr, user, pass string) *http.Request {
	req, _ := http.NewRequest("GET", s.base+path, nil)
	req.SetBasicAuth(user, pass)
	req.Header.Set("X-Forwarded-For", addr)
	return req
}

// tokenAttempt reads a token request's answer as tokenFrom does.
func tokenAttempt(t testing.TB, r response) attempt {
	t.Helper()
	a := attempt{Status: r.Status}
	if code, ok := r.Body["code"].(string); ok {
		a.Code = code
	} else if errs, _ := r.Body["errors"].([]any); len(errs) > 0 {
		a.Code = errorCode(t, errs)
	}
	return a
}

// restAttempt reads a section 7 answer (or a success without one).
func restAttempt(_ testing.TB, r response) attempt {
	code, _ := r.Body["code"].(string)
	return attempt{Status: r.Status, Code: code}
}

// letThrough is the log line of an attempt that the limit let through
// unchecked because Redis did not answer in time, as it is documented to.
const letThrough = "failed-attempt limit not checked"

// Wrong credentials sent at once were all checked before any of them was
// counted: 1,000 wrong keys sent together had 954 checked against a limit
// of 20, and basic auth on /monitoring/ and /migration/ likewise. Over HTTP
// now, 200 wrong credentials sent at once from one address have at most
// the limit checked (401, or the token endpoint's invalid_api_key); every
// other one is refused as limited, in the spec's form (the section 7 429,
// or GraphQL's 200 with the code in errors[], each with a Retry-After). The
// right credential from that address is refused too until the count
// allows one attempt more, which Retry-After says is at most window/limit
// away: the refused flood did not make the lock-out longer. From another
// address it is accepted at once.
//
// The limit lets an attempt through unchecked when Redis does not answer
// within 250 ms (docs/security.md); on a loaded machine a few of the 200
// may be, and each is then allowed for, as the log says.
func TestHarden_WrongCredentialsSentAtOnceAreCheckedAtMostTheLimit(t *testing.T) {
	t.Parallel()
	const limit, n = 20, 200
	// A long window makes the refusals certain however slowly the flood is
	// answered: one attempt more is allowed every window/limit, 3 minutes.
	const window = time.Hour
	const interval = window / limit
	const user, password = "ops", testPassword
	const attacker, other = "203.0.113.50", "198.51.100.50"
	wrongLogin, accepted := attempt{401, auth.CodeAuthenticationFailed}, attempt{200, ""}
	restThrottled := func(t testing.TB, r response) { checkThrottled(t, r, interval+time.Second) }
	tokenRefused := func(t testing.TB, r response) { checkTokenThrottled(t, r, interval+time.Second) }
	tests := []struct {
		name string
		// wrong is the i-th wrong credential from the attacker, right the
		// right one from addr (key is a valid API key).
		wrong func(s *service, i int) *http.Request
		right func(s *service, addr, key string) *http.Request
		// read reads an answer; checked is that of a wrong credential
		// that was checked, limited that of one refused for the limit,
		// whose form checkLimited checks.
		read         func(testing.TB, response) attempt
		checked      attempt
		limited      attempt
		checkLimited func(testing.TB, response)
	}{
		{
			name:         "API keys to the token endpoint",
			wrong:        func(s *service, i int) *http.Request { return s.tokenRequest(attacker, keyInput(badKey(i))) },
			right:        func(s *service, addr, key string) *http.Request { return s.tokenRequest(addr, keyInput(key)) },
			read:         tokenAttempt,
			checked:      refusedKey,
			limited:      tokenThrottled,
			checkLimited: tokenRefused,
		},
		{
			name: "logins to /monitoring/",
			wrong: func(s *service, i int) *http.Request {
				return s.basicRequest("/monitoring/api/queues", attacker, user, "guess-"+strconv.Itoa(i))
			},
			right: func(s *service, addr, _ string) *http.Request {
				return s.basicRequest("/monitoring/api/queues", addr, user, password)
			},
			read: restAttempt, checked: wrongLogin, limited: throttled, checkLimited: restThrottled,
		},
		{
			name: "logins to /migration/",
			wrong: func(s *service, i int) *http.Request {
				return s.basicRequest("/migration/", attacker, user, "guess-"+strconv.Itoa(i))
			},
			right: func(s *service, addr, _ string) *http.Request {
				return s.basicRequest("/migration/", addr, user, password)
			},
			read: restAttempt, checked: wrongLogin, limited: throttled, checkLimited: restThrottled,
		},
		{
			name: "API keys as the /migration/ password",
			wrong: func(s *service, i int) *http.Request {
				return s.basicRequest("/migration/", attacker, "viewer", badKey(i))
			},
			right: func(s *service, addr, key string) *http.Request {
				return s.basicRequest("/migration/", addr, "viewer", key)
			},
			read: restAttempt, checked: wrongLogin, limited: throttled, checkLimited: restThrottled,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs lockedBuffer
			s := startServiceLogging(t, "api", map[string]string{"MONITORING_USER": user, "MONITORING_PASSWORD": password,
				"AUTH_FAILURE_LIMIT": strconv.Itoa(limit), "AUTH_FAILURE_WINDOW": window.String(), "TRUSTED_PROXIES": "127.0.0.1",
				"LOG_LEVEL": "warn"}, &logs)
			key := s.newKey(t, "good")

			answers := sendAtOnce(t, n, func(i int) *http.Request { return tc.wrong(s, i) })
			counts := map[attempt]int{}
			for _, r := range answers {
				a := tc.read(t, r)
				counts[a]++
				if a == tc.limited && !t.Failed() {
					tc.checkLimited(t, r)
				}
			}
			unchecked := strings.Count(logs.String(), letThrough)
			if unchecked == 0 {
				if diff := cmp.Diff(map[attempt]int{tc.checked: limit, tc.limited: n - limit}, counts); diff != "" {
					t.Errorf("%d wrong credentials at once (-want +got):\n%s", n, diff)
				}
			} else {
				// An attempt let through is checked without being counted;
				// one whose count Redis kept but answered too late is
				// counted too.
				t.Logf("%d attempts let through unchecked by a slow Redis", unchecked)
				if c := counts[tc.checked]; c < limit-unchecked || c > limit+unchecked || c+counts[tc.limited] != n {
					t.Errorf("%d wrong credentials at once with %d let through: %v, want %d±%d checked and the rest limited",
						n, unchecked, counts, limit, unchecked)
				}
				// The attempts let through spent nothing, so the count
				// may have room left: use it up, one attempt at a time.
				deadline := time.Now().Add(30 * time.Second)
				for i := n; ; i++ {
					if tc.read(t, sendAtOnce(t, 1, func(int) *http.Request { return tc.wrong(s, i) })[0]) == tc.limited {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("wrong credentials one at a time after the flood were not limited within 30 s")
					}
				}
				unchecked = strings.Count(logs.String(), letThrough)
			}

			r := sendAtOnce(t, 1, func(int) *http.Request { return tc.right(s, attacker, key) })[0]
			switch a := tc.read(t, r); {
			case a == tc.limited:
				tc.checkLimited(t, r)
			case a == accepted && strings.Count(logs.String(), letThrough) > unchecked:
				t.Logf("the right credential was let through unchecked by a slow Redis")
			default:
				t.Errorf("the right credential from the limited address: %+v %s, want %+v", a, r.Raw, tc.limited)
			}
			r = sendAtOnce(t, 1, func(int) *http.Request { return tc.right(s, other, key) })[0]
			if a := tc.read(t, r); a != accepted {
				t.Errorf("the right credential from another address: %+v %s, want %+v", a, r.Raw, accepted)
			}
		})
	}
}
