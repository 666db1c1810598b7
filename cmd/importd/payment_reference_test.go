package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
)

// TestPaymentInstruction_ReferenceExamplesAreAcceptedAndStoredAsSent sends
// the reference's own E9 and E2 example requests (reference-api.md section
// 10), with the supplier code of the test's environment, to a simulated
// vendor named as in the examples (STRIPE) that holds the instruction.
func TestPaymentInstruction_ReferenceExamplesAreAcceptedAndStoredAsSent(t *testing.T) {
	t.Parallel()
	e := newPaymentEnv(t)
	instructions, _ := json.Marshal([]map[string]any{
		{"reference": "THIS-IS-A-FAKE-REFERENCE", "type": "CARD", "status": "ACTIVE", "last4": "4242"}})
	sim, err := vendorsim.New(vendorsim.Config{Instructions: instructions})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	if _, err := payment.AddVendor(context.Background(), e.db, payment.Vendor{Name: "STRIPE", BaseURL: srv.URL,
		Timeout: time.Second, Attempts: 3, Backoff: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	// E9: the example's account, then the example request.
	number := e.account(t, "EXTERNAL-1234", "")
	r := e.do(t, "POST", pathE9, e.tok, `{
		"import_supplier": "PAY",
		"external_account_number": "EXTERNAL-1234",
		"vendor": "STRIPE",
		"reference": "THIS-IS-A-FAKE-REFERENCE",
		"type": "CARD"
	}`)
	if r.Status != 201 {
		t.Fatalf("E9: %d %s", r.Status, r.Raw)
	}
	if diff := cmp.Diff(map[string]any{"service_account_number": number, "reference": "THIS-IS-A-FAKE-REFERENCE"}, r.Body); diff != "" {
		t.Errorf("E9 body (-want +got):\n%s", diff)
	}

	// E2: the example's business and its two accounts, then the example
	// request.
	e.business(t, "EXTERNAL-1234", "BC-REF")
	e.account(t, "EXTERNAL-ACCOUNT-123", "BC-REF")
	e.account(t, "EXTERNAL-ACCOUNT-1234", "BC-REF")
	r = e.do(t, "POST", pathE2, e.tok, `{
		"import_supplier_code": "PAY",
		"external_business_identifier": "EXTERNAL-1234",
		"vendor": "STRIPE",
		"reference": "THIS-IS-A-FAKE-REFERENCE",
		"type": "CARD",
		"accounts": [
			{"external_account_number": "EXTERNAL-ACCOUNT-123"},
			{"external_account_number": "EXTERNAL-ACCOUNT-1234"}
		]
	}`)
	if r.Status != 201 {
		t.Fatalf("E2: %d %s", r.Status, r.Raw)
	}
	if diff := cmp.Diff(map[string]any{"external_business_identifier": "EXTERNAL-1234", "reference": "THIS-IS-A-FAKE-REFERENCE"}, r.Body); diff != "" {
		t.Errorf("E2 body (-want +got):\n%s", diff)
	}

	// Both are stored with the vendor, reference and type as sent.
	var stored []string
	if err := e.db.Select(&stored, `SELECT v.name || ' ' || pi.reference || ' ' || pi.type
		FROM payment_instructions pi JOIN payment_vendors v ON v.id = pi.vendor_id ORDER BY pi.id`); err != nil {
		t.Fatal(err)
	}
	want := []string{"STRIPE THIS-IS-A-FAKE-REFERENCE CARD", "STRIPE THIS-IS-A-FAKE-REFERENCE CARD"}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored instructions (-want +got):\n%s", diff)
	}
}
