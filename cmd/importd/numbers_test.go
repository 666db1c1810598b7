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
