package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The answers of the limits that protect the service from one client (in
// flight per key, slow bodies) are in the OpenAPI
// document: 429 too_many_requests_in_flight, with Retry-After, on every
// data-import endpoint, and 400 request_body_timeout on every POST. A slow
// body holds its request in flight, so one connection produces both for
// real.
func TestOpenAPI_InFlightAndBodyTimeoutAnswersMatchTheDocument(t *testing.T) {
	t.Parallel()
	// The slow body holds the key's one slot until HTTP_BODY_READ_TIMEOUT,
	// long enough for the checks below on a loaded machine.
	const bodyTimeout = 20 * time.Second
	s := startService(t, "api", map[string]string{"HTTP_BODY_READ_TIMEOUT": bodyTimeout.String(), "MAX_IN_FLIGHT_PER_KEY": "1"})
	c := newChecked(t, s)
	tok := s.accessToken(t, s.newKey(t, "slow"))

	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: importd\r\nAuthorization: Token %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ext", pathValidateAccount, tok)

	// Until the slow request has taken the key's one slot, whoami succeeds.
	var r response
	waitFor(t, "the slow request holds the key's slot", bodyTimeout/2, func() bool {
		r = c.do(t, "GET", "/v1/data-import/whoami/", tok, nil)
		return r.Status == http.StatusTooManyRequests
	})
	want(t, "a second request of the key", r, http.StatusTooManyRequests, "too_many_requests_in_flight")
	want(t, "E1 too", c.do(t, "POST", "/v1/data-import/business/", tok, `{}`), http.StatusTooManyRequests, "too_many_requests_in_flight")

	_ = conn.SetReadDeadline(time.Now().Add(bodyTimeout + 30*time.Second))
	req, _ := http.NewRequest("POST", s.base+pathValidateAccount, nil)
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	slow := response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	c.check(t, req, slow)
	if slow.Status != http.StatusBadRequest || !strings.Contains(string(raw), `"request_body_timeout"`) {
		t.Errorf("slow body: %d %s", slow.Status, raw)
	}

	// Every operation under /v1/data-import/ that takes a token documents
	// the 429, and every POST the 400.
	jsonCT := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	limited := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Retry-After": {"1"}}
	errBody := `{"detail": "d", "code": "c", "errors": []}`
	for path, item := range c.doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v1/data-import/") || path == "/v1/data-import/schema/" {
			continue
		}
		concrete := strings.NewReplacer("{supplier}", "DEMO", "{external_account_number}", "A-1").Replace(path)
		for method := range item.Operations() {
			req, _ := http.NewRequest(method, s.base+concrete, nil)
			c.check(t, req, response{Status: http.StatusTooManyRequests, Header: limited, Raw: []byte(errBody)})
			if method == http.MethodPost {
				c.check(t, req, response{Status: http.StatusBadRequest, Header: jsonCT, Raw: []byte(errBody)})
			}
		}
	}
}
