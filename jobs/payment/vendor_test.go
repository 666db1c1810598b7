package payment

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

func TestVendor_BudgetCoversEveryAttemptAndBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		v        Vendor
		backoffs []time.Duration // before attempts 2, 3, ...
		budget   time.Duration
	}{
		{"one attempt", Vendor{Timeout: time.Second, Attempts: 1, Backoff: time.Second}, nil, time.Second},
		{"documented default", Vendor{Timeout: 5 * time.Second, Attempts: 3, Backoff: 200 * time.Millisecond},
			[]time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, 15*time.Second + 600*time.Millisecond},
		{"no backoff", Vendor{Timeout: time.Second, Attempts: 3}, []time.Duration{0, 0}, 3 * time.Second},
		{"waits are capped at 30s", Vendor{Timeout: time.Second, Attempts: 4, Backoff: 20 * time.Second},
			[]time.Duration{20 * time.Second, 30 * time.Second, 30 * time.Second}, 4*time.Second + 80*time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []time.Duration
			for n := 2; n <= tc.v.Attempts; n++ {
				got = append(got, tc.v.BackoffBefore(n))
			}
			if diff := cmp.Diff(tc.backoffs, got); diff != "" {
				t.Errorf("backoffs (-want +got):\n%s", diff)
			}
			if b := tc.v.Budget(); b != tc.budget {
				t.Errorf("budget %v, want %v", b, tc.budget)
			}
		})
	}
}

func TestAddVendor_ValidatesAndStores(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	v, err := AddVendor(ctx, d, Vendor{Name: "Pay.Co-1", BaseURL: "https://pay.example/api/", Backoff: DefaultBackoff})
	if err != nil {
		t.Fatal(err)
	}
	if v.BaseURL != "https://pay.example/api" || v.Timeout != DefaultTimeout || v.Attempts != DefaultAttempts || v.Adapter != AdapterHTTP || v.Backoff != DefaultBackoff {
		t.Errorf("defaults and normalisation: %+v", v)
	}
	if _, err := AddVendor(ctx, d, Vendor{Name: "Pay.Co-1", BaseURL: "https://other.example"}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a second vendor of the same name: %v", err)
	}
	tests := []struct {
		name string
		v    Vendor
		code string
	}{
		{"name with a space", Vendor{Name: "Pay Co", BaseURL: "https://x"}, "invalid_vendor_name"},
		{"empty name", Vendor{BaseURL: "https://x"}, "invalid_vendor_name"},
		{"ftp URL", Vendor{Name: "V1", BaseURL: "ftp://x"}, "invalid_url"},
		{"http URL to a host on the network", Vendor{Name: "V9", BaseURL: "http://pay.example"}, "invalid_url"},
		{"http URL to a private address", Vendor{Name: "V10", BaseURL: "http://10.0.0.1:8080"}, "invalid_url"},
		{"http URL to a name that only starts like localhost", Vendor{Name: "V11", BaseURL: "http://localhost.pay.example"}, "invalid_url"},
		{"relative URL", Vendor{Name: "V2", BaseURL: "/api"}, "invalid_url"},
		{"URL with query", Vendor{Name: "V3", BaseURL: "https://x/?a=1"}, "invalid_url"},
		{"URL with credentials", Vendor{Name: "V4", BaseURL: "https://u:p@x"}, "invalid_url"},
		{"negative timeout", Vendor{Name: "V5", BaseURL: "https://x", Timeout: -time.Second}, "invalid"},
		{"too many attempts", Vendor{Name: "V6", BaseURL: "https://x", Attempts: 11}, "invalid"},
		{"backoff too long", Vendor{Name: "V7", BaseURL: "https://x", Backoff: 2 * time.Minute}, "invalid"},
		{"unknown adapter", Vendor{Name: "V8", BaseURL: "https://x", Adapter: "soap"}, "invalid_choice"},
		{"several problems", Vendor{Name: "bad name", BaseURL: "x"}, "invalid_vendor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := AddVendor(ctx, d, tc.v)
			if p, ok := problem.As(err); !ok || p.Kind != problem.Invalid || p.Code != tc.code {
				t.Errorf("got %v, want code %s", err, tc.code)
			}
		})
	}
	vs, err := ListVendors(ctx, d)
	if err != nil || len(vs) != 1 || vs[0].Name != "Pay.Co-1" || vs[0].Timeout != DefaultTimeout {
		t.Errorf("list: %+v %v", vs, err)
	}
	// http is accepted for a loopback host only, where nothing crosses a
	// network.
	for _, u := range []string{"http://127.0.0.1:18090", "http://127.8.9.10", "http://[::1]:80", "http://localhost:9", "http://LOCALHOST."} {
		if _, err := AddVendor(ctx, d, Vendor{Name: "L" + strconv.Itoa(len(u)) + strings.Map(keepAlnum, u), BaseURL: u}); err != nil {
			t.Errorf("AddVendor(%s): %v", u, err)
		}
	}
}

func keepAlnum(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
		return r
	}
	return -1
}

// statusServer answers every request with the status and body named in its
// path: /payment-instructions/<status>:<body>.
func statusServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/json" {
			http.Error(w, "no Accept", http.StatusTeapot)
			return
		}
		spec := strings.TrimPrefix(r.URL.Path, "/payment-instructions/")
		status, body, _ := strings.Cut(spec, ":")
		code, _ := strconv.Atoi(status)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestHTTPAdapter_ClassifiesAnswers(t *testing.T) {
	t.Parallel()
	base := statusServer(t)
	a, err := newHTTPAdapter(Vendor{Name: "T", BaseURL: base}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref  string
		want string // ok, not_found, refused, intermittent, protocol
	}{
		{`200:{"reference":"x","type":"CARD","status":"ACTIVE"}`, "protocol"}, // not the reference asked for
		{"404:", "not_found"},
		{"500:", "intermittent"},
		{"502:", "intermittent"},
		{"503:oops", "intermittent"},
		{"429:", "intermittent"},
		{"400:", "refused"},
		{"401:", "refused"},
		{"403:", "refused"},
		{"422:", "refused"},
		{"204:", "protocol"},
		{"200:not json", "protocol"},
		{"200:[]", "protocol"},
		{`200:{"type":"CARD","status":"ACTIVE"}`, "protocol"},
		{`200:{"reference":"x","type":"CARD","status":""}`, "protocol"},
		{`200:{"reference":"x","type":1,"status":"A"}`, "protocol"},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			t.Parallel()
			_, err := a.Fetch(context.Background(), tc.ref)
			var ie *IntermittentError
			var pe *ProtocolError
			var re *RefusedError
			got := "ok"
			switch {
			case errors.Is(err, ErrNotFound):
				got = "not_found"
			case errors.As(err, &re):
				got = "refused"
			case errors.As(err, &ie):
				got = "intermittent"
			case errors.As(err, &pe):
				got = "protocol"
			case err != nil:
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("%s: got %s (%v), want %s", tc.ref, got, err, tc.want)
			}
		})
	}
}

func TestParseInstruction_KeepsEveryOtherFieldAsDetails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		details string
		err     bool
	}{
		{"only the required fields", `{"reference":"R","type":"CARD","status":"ACTIVE"}`, `{}`, false},
		{"extra fields in order, numbers exact", `{"last4":"4242","reference":"R","limit":10.50,"type":"CARD","nested":{"a":[1, 2]},"status":"X"}`,
			`{"last4":"4242","limit":10.50,"nested":{"a":[1,2]}}`, false},
		{"a NUL storage cannot hold", `{"reference":"R","type":"CARD","status":"A","note":"a\u0000b"}`, "", true},
		{"a number numeric cannot hold", `{"reference":"R","type":"CARD","status":"A","n":1e999999}`, "", true},
		{"a key twice", `{"reference":"R","type":"CARD","status":"A","status":"B"}`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, err := parseInstruction([]byte(tc.body), "R")
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err == nil && string(in.Details) != tc.details {
				t.Errorf("details %s, want %s", in.Details, tc.details)
			}
		})
	}
}

// References are path-escaped: whatever they contain reaches the vendor as
// one path segment and comes back intact.
func TestHTTPAdapter_EscapesTheReference(t *testing.T) {
	t.Parallel()
	const ref = "a/b c?d%e#f"
	sim, err := vendorsim.New(vendorsim.Config{Instructions: []byte(`[{"reference":"a/b c?d%e#f","type":"CARD","status":"ACTIVE"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	a, _ := newHTTPAdapter(Vendor{Name: "T", BaseURL: srv.URL + "/"}, http.DefaultClient)
	in, err := a.Fetch(context.Background(), ref)
	if err != nil || in.Reference != ref {
		t.Fatalf("Fetch(%q) = %+v, %v", ref, in, err)
	}
	if got := InstructionURL("http://v/api/", ref); got != "http://v/api/payment-instructions/a%2Fb%20c%3Fd%25e%23f" {
		t.Errorf("URL %s", got)
	}
}

// isOpenCode is what validate.OpenCode accepts: a code that is not blank,
// of at most validate.MaxCodeLength characters.
func isOpenCode(s string) bool {
	return strings.TrimSpace(s) != "" && utf8.RuneCountInString(s) <= validate.MaxCodeLength
}

func FuzzParseAccountRequest(f *testing.F) {
	f.Add([]byte(`{"import_supplier":"DEMO","external_account_number":"A","vendor":"V","reference":"R","type":"CARD"}`))
	f.Add([]byte(`{"type":"card","type":"CARD"}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, errs, perr := ParseAccountRequest(data)
		if perr != nil {
			if perr.Code != CodeParseError || errs != nil {
				t.Fatalf("parse error with problems: %v %v", perr, errs)
			}
			return
		}
		if len(errs) == 0 && (r.ImportSupplier == "" || r.ExternalAccountNumber == "" || r.Vendor == "" || r.Reference == "" ||
			!isOpenCode(r.Type)) {
			t.Fatalf("accepted an incomplete request: %+v", r)
		}
	})
}

func FuzzParseBusinessRequest(f *testing.F) {
	f.Add([]byte(`{"import_supplier_code":"DEMO","external_business_identifier":"B","vendor":"V","reference":"R","type":"CARD","accounts":[{"external_account_number":"A"}]}`))
	f.Add([]byte(`{"accounts":[{"external_account_number":"A"},{"external_account_number":"A"}]}`))
	f.Add([]byte(`{"accounts":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, errs, perr := ParseBusinessRequest(data)
		if perr != nil {
			return
		}
		if len(errs) > 0 {
			return
		}
		if len(r.Accounts) == 0 || r.ExternalBusinessIdentifier == "" || r.Reference == "" || !isOpenCode(r.Type) {
			t.Fatalf("accepted an incomplete request: %+v", r)
		}
		seen := map[string]bool{}
		for _, a := range r.Accounts {
			if a.ExternalAccountNumber == "" || seen[a.ExternalAccountNumber] {
				t.Fatalf("accepted accounts %+v", r.Accounts)
			}
			seen[a.ExternalAccountNumber] = true
		}
	})
}

func FuzzParseInstruction(f *testing.F) {
	f.Add([]byte(`{"reference":"R","type":"CARD","status":"ACTIVE","x":[1,{"y":null}]}`))
	f.Add([]byte(`{"reference":"R","type":"CARD","status":"ACTIVE","x":"\u0000"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := parseInstruction(data, "R")
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("a bad answer is not a protocol error: %v", err)
			}
			return
		}
		if in.Reference != "R" || in.Type == "" || in.Status == "" || len(in.Details) < 2 || in.Details[0] != '{' {
			t.Fatalf("accepted %+v", in)
		}
		var details any
		if err := json.Unmarshal(in.Details, &details); err != nil || hasNUL(details) {
			t.Fatalf("details storage cannot hold: %s (%v)", in.Details, err)
		}
	})
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		return slices.ContainsFunc(v, hasNUL)
	case map[string]any:
		for k, x := range v {
			if strings.ContainsRune(k, 0) || hasNUL(x) {
				return true
			}
		}
	}
	return false
}

// PROTOCOL.md is the contract; every code the package answers with is in it.
func TestProtocolDoc_NamesEveryCode(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{CodeFailedValidation, CodeParseError, CodeSupplierNotFound, CodeAccountNotFound,
		CodeAccountNotInBusiness, CodeDuplicateAccount, CodeBusinessNotFound, CodeVendorNotFound, CodeAlreadyExists,
		CodeNotFoundAtVendor, CodeTypeMismatch, CodeVendorUnavailable, CodeVendorProtocolError, CodeVerificationUnfinished,
		CodeQueueUnavailable, TypeCard, TypeDirectDebit, jobs.TypePaymentInstructionVerify, jobs.QueueVendors} {
		if !strings.Contains(string(doc), "`"+code+"`") {
			t.Errorf("PROTOCOL.md does not name `%s`", code)
		}
	}
}
