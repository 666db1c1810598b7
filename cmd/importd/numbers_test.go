package main

import (
	"fmt"
	"strings"
	"testing"
)

// Exponents are JSON: E7 reads "amount": 1e2 exactly as 100, answers
// "100.00" and stores 100.00, the same as for "amount": 100.
func TestPostImport_AmountWithAnExponentReadsBackExactly(t *testing.T) {
	t.Parallel()
	e := newPostImportEnv(t)
	e.account(t, "PI", "ACC-EXP", day(-60))
	body := fmt.Sprintf(`{"import_supplier": "PI", "external_account_number": "ACC-EXP", "transactions": [`+
		`{"transaction_id": "T1", "transaction_date": %q, "amount": 1e2, "type": "CHARGE", "reason": "IMPORTED_CHARGE"},`+
		`{"transaction_id": "T2", "transaction_date": %q, "amount": 2.5E-1, "type": "CHARGE", "reason": "IMPORTED_CHARGE"}]}`, day(-2), day(-1))
	r := e.do(t, "POST", pathTransactions, e.tok, body)
	if r.Status != 201 || !strings.Contains(string(r.Raw), `"amount":"100.00"`) || !strings.Contains(string(r.Raw), `"amount":"0.25"`) {
		t.Fatalf("E7: %d %s", r.Status, r.Raw)
	}
	var stored []string
	if err := e.db.Select(&stored, `SELECT amount::text FROM transactions ORDER BY transaction_id`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(stored, " ") != "100.00 0.25" {
		t.Errorf("stored amounts %v, want 100.00 0.25", stored)
	}
}

// Every request body goes through one parse path: a body that is not a
// JSON object gets the same 400 parse_error, with the same detail and no
// entries, from every endpoint that takes one.
func TestBodies_EveryEndpointAnswersTheSameParseError(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	tok := s.accessToken(t, s.newKey(t, "k"))
	paths := []string{
		"/v1/data-import/business/",
		"/v1/data-import/business-payment-instruction/create/",
		"/v1/data-import/validate-account/",
		stagePath,
		processPath,
		pathNotes,
		pathTransactions,
		pathStatements,
		"/v1/data-import/payment-instruction/create/",
	}
	for _, tc := range []struct{ name, body, detail string }{
		{"truncated", `{"external_account_number":`, "JSON parse error: invalid JSON at byte offset 27: unexpected end of JSON input."},
		{"invalid UTF-8", "{\"external_account_number\":\"\xff\"}", "JSON parse error: invalid JSON at byte offset 28: invalid UTF-8 in string literal."},
		{"array", `[{"external_account_number":"A-1"}]`, "The request body must be a JSON object, not array."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range paths {
				r := s.do(t, "POST", path, tok, tc.body)
				if r.Status != 400 || r.Body["code"] != "parse_error" || r.Body["detail"] != tc.detail || len(problemsOf(t, r.Body)) != 0 {
					t.Errorf("%s: %d %s, want 400 parse_error %q without entries", path, r.Status, r.Raw, tc.detail)
				}
			}
		})
	}
}
