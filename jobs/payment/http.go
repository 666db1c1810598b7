package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/bulkimport/bulkimport/jobs/validate"
)

// maxAnswerBytes bounds a vendor's answer: an instruction is a few hundred
// bytes, and a vendor gone wrong must not fill the worker's memory.
const maxAnswerBytes = 1 << 20

// httpAdapter speaks the service's vendor protocol (PROTOCOL.md).
type httpAdapter struct {
	base   string
	client *http.Client
}

func newHTTPAdapter(v Vendor, client *http.Client) (Adapter, error) {
	if _, err := url.Parse(v.BaseURL); err != nil {
		return nil, fmt.Errorf("vendor %s: base URL: %w", v.Name, err)
	}
	return &httpAdapter{base: strings.TrimRight(v.BaseURL, "/"), client: client}, nil
}

// newVendorClient is the HTTP client of vendor calls. It follows no
// redirect: the protocol has none, and following one would send the
// reference to a place the operator never configured. The
// redirect comes back as the answer, a protocol violation.
func newVendorClient(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// AllowedURL reports whether vendor calls may go to u: https, or http to a
// loopback host (127.0.0.0/8, ::1, localhost), where nothing crosses a
// network (a vendor simulator, a local adapter's sidecar).
func AllowedURL(u *url.URL) bool {
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		if strings.EqualFold(strings.TrimSuffix(h, "."), "localhost") {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// InstructionURL is where the protocol asks for reference at base.
func InstructionURL(base, reference string) string {
	return strings.TrimRight(base, "/") + "/payment-instructions/" + url.PathEscape(reference)
}

func (a *httpAdapter) Fetch(ctx context.Context, reference string) (VendorInstruction, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, InstructionURL(a.base, reference), nil)
	if err != nil {
		return VendorInstruction{}, fmt.Errorf("build vendor request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if !AllowedURL(req.URL) {
		// AddVendor refuses such a URL; one stored before that rule is
		// never called.
		return VendorInstruction{}, protocolErrorf("base URL %s is not https (http only for a loopback host); nothing was sent", a.base)
	}
	res, err := a.client.Do(req)
	if err != nil {
		// Timeouts, refused and reset connections, DNS failures: all may
		// pass. A context that ended is reported as such by the caller.
		return VendorInstruction{}, &IntermittentError{Reason: "could not be reached", Cause: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes+1))
	switch {
	case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
		return VendorInstruction{}, &IntermittentError{Reason: "answered " + res.Status, Cause: fmt.Errorf("vendor answered %s", res.Status)}
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return VendorInstruction{}, protocolErrorf("answered %s (to %q); redirects are not followed", res.Status, res.Header.Get("Location"))
	case res.StatusCode == http.StatusNotFound:
		return VendorInstruction{}, ErrNotFound
	case res.StatusCode >= 400 && res.StatusCode < 500:
		return VendorInstruction{}, &RefusedError{Status: res.Status}
	case res.StatusCode != http.StatusOK:
		return VendorInstruction{}, protocolErrorf("unexpected status %s", res.Status)
	case err != nil:
		return VendorInstruction{}, &IntermittentError{Reason: "broke off its answer", Cause: fmt.Errorf("read vendor answer: %w", err)}
	case len(body) > maxAnswerBytes:
		return VendorInstruction{}, protocolErrorf("answer larger than %d bytes", maxAnswerBytes)
	}
	return parseInstruction(body, reference)
}

// parseInstruction reads a 200 answer: a JSON object with string fields
// reference (equal to the one asked for), type and status; every other
// field is kept as the vendor's details.
func parseInstruction(body []byte, reference string) (VendorInstruction, error) {
	root, err := validate.Parse(body)
	if err != nil {
		return VendorInstruction{}, protocolErrorf("answer is not JSON: %v", err)
	}
	if root.Kind != validate.KindObject {
		return VendorInstruction{}, protocolErrorf("answer is a JSON %s, not an object", root.Kind)
	}
	var in VendorInstruction
	var details bytes.Buffer
	details.WriteByte('{')
	seen := map[string]bool{}
	for i := range root.Members {
		m := &root.Members[i]
		if seen[m.Key] {
			return VendorInstruction{}, protocolErrorf("key %q appears twice", m.Key)
		}
		seen[m.Key] = true
		if !storable(&m.Value) || strings.IndexByte(m.Key, 0) >= 0 {
			return VendorInstruction{}, protocolErrorf("field %q holds what storage cannot keep (U+0000 or a huge number)", m.Key)
		}
		var dst *string
		switch m.Key {
		case "reference":
			dst = &in.Reference
		case "type":
			dst = &in.Type
		case "status":
			dst = &in.Status
		default:
			if details.Len() > 1 {
				details.WriteByte(',')
			}
			k, _ := json.Marshal(m.Key)
			details.Write(k)
			details.WriteByte(':')
			if err := json.Compact(&details, []byte(m.Value.Raw)); err != nil {
				return VendorInstruction{}, protocolErrorf("field %q: %v", m.Key, err)
			}
			continue
		}
		if m.Value.Kind != validate.KindString || strings.TrimSpace(m.Value.Text) == "" {
			return VendorInstruction{}, protocolErrorf("field %q must be a non-empty string", m.Key)
		}
		*dst = m.Value.Text
	}
	details.WriteByte('}')
	for _, f := range []struct{ name, v string }{{"reference", in.Reference}, {"type", in.Type}, {"status", in.Status}} {
		if f.v == "" {
			return VendorInstruction{}, protocolErrorf("field %q is missing", f.name)
		}
	}
	if in.Reference != reference {
		return VendorInstruction{}, protocolErrorf("asked for reference %q, answered about %q", reference, in.Reference)
	}
	in.Details = json.RawMessage(details.Bytes())
	return in, nil
}

// storable reports whether jsonb can hold v as it is: no U+0000 anywhere,
// and no number beyond numeric's range.
func storable(v *validate.Value) bool {
	switch v.Kind {
	case validate.KindString:
		return strings.IndexByte(v.Text, 0) < 0
	case validate.KindNumber:
		i := strings.IndexAny(v.Text, "eE")
		if i < 0 {
			return len(v.Text) <= 1000
		}
		exp := strings.TrimLeft(strings.TrimLeft(v.Text[i+1:], "+-"), "0")
		return len(exp) <= 3 && i <= 1000
	case validate.KindArray:
		for i := range v.Items {
			if !storable(&v.Items[i]) {
				return false
			}
		}
	case validate.KindObject:
		for i := range v.Members {
			if strings.IndexByte(v.Members[i].Key, 0) >= 0 || !storable(&v.Members[i].Value) {
				return false
			}
		}
	}
	return true
}
