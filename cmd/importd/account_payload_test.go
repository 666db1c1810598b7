package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// referenceAccount is the reference's example account (the National Grid
// US page, section 7 of the reference; its truncated end completed with a
// supply address, the second supply point in the shape of the Essential
// Energy water example, and notes), with spec names only.
func referenceAccount(t testing.TB) (map[string]any, []byte) {
	t.Helper()
	raw, err := os.ReadFile("../../jobs/account/testdata/reference_account.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m, raw
}

// seedReference creates what the reference account refers to: supplier
// TENTACLE_ENERGY in the US, team Ops, the two tariffs and supply type
// TREATED.
func seedReference(t testing.TB, s *service) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "TENTACLE_ENERGY", Country: "US"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTeam(ctx, s.db, "Ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProduct(ctx, s.db, "REFERENCE", []string{"ELEC-1234-J", "WATER_PRODUCT"}); err != nil {
		t.Fatal(err)
	}
	// The reference's water supply point has a type beyond the spec's five.
	if _, err := admin.AddSupplyType(ctx, s.db, "TREATED"); err != nil {
		t.Fatal(err)
	}
}

// readBackAccount rebuilds, from the stored rows, the payload of the
// account with the given service account number, in the payload's shape:
// omitted fields are the columns left NULL. The fields of a supply type
// without a layout of its own come from supply_points.fields, as stored
// (nulls included).
const readBackAccount = `
SELECT jsonb_strip_nulls(jsonb_build_object(
	'import_supplier', s.code,
	'external_account_number', a.external_account_number,
	'billing_address', jsonb_build_object('street_address', a.billing_street_address, 'locality', a.billing_locality,
		'administrative_area', a.billing_administrative_area, 'postal_code', a.billing_postal_code, 'country', a.billing_country),
	'metadata', (SELECT jsonb_agg(jsonb_build_object('key', m.key, 'value', m.value) ORDER BY m.key) FROM account_metadata m WHERE m.account_id = a.id),
	'customers', (SELECT jsonb_agg(jsonb_build_object(
		'given_name', c.given_name, 'family_name', c.family_name, 'email', c.email, 'mobile', c.mobile, 'landline', c.landline,
		'date_of_birth', c.date_of_birth,
		'alternative_phone_numbers', (SELECT jsonb_agg(jsonb_build_object('phone_number', p.phone_number) ORDER BY p.position)
			FROM customer_phone_numbers p WHERE p.customer_id = c.id),
		'customer_preferences', jsonb_build_object('opted_into_updates', c.opted_into_updates, 'opted_into_offers', c.opted_into_offers,
			'opted_into_sms', c.opted_into_sms),
		'user_details', (SELECT jsonb_agg(jsonb_build_object('namespace', d.namespace, 'value', d.value) ORDER BY d.position)
			FROM customer_user_details d WHERE d.customer_id = c.id)
		) ORDER BY c.position) FROM customers c WHERE c.account_id = a.id),
	'notes', (SELECT jsonb_agg(jsonb_build_object('body', n.body,
		'created_at', to_char(n.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
		'is_pinned', CASE WHEN n.is_pinned THEN true END,
		'unpin_at', to_char(n.unpin_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')) ORDER BY n.id) FROM notes n WHERE n.account_id = a.id)
)) || jsonb_build_object('supply_addresses', (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
		'supply_address1', x.supply_address1, 'supply_address2', x.supply_address2, 'supply_address3', x.supply_address3,
		'supply_address4', x.supply_address4, 'supply_postcode', x.supply_postcode,
		'customer_at_supply_address_from_date', x.customer_at_supply_address_from_date))
	|| jsonb_build_object('supply_points', (SELECT jsonb_agg(COALESCE(sp.fields, '{}') || jsonb_strip_nulls(jsonb_build_object(
		'supply_type', sp.supply_type, 'supply_start_date', sp.supply_start_date, 'last_billed_to_date', sp.last_billed_to_date,
		'identifier', e.identifier, 'energization_status', e.energization_status,
		'agreements', (SELECT jsonb_agg(jsonb_build_object('tariff_code', tr.code, 'effective_from', g.effective_from) ORDER BY g.effective_from)
			FROM agreements g JOIN tariffs tr ON tr.id = g.tariff_id WHERE g.supply_point_id = sp.id)
		)) ORDER BY sp.position)
		FROM supply_points sp LEFT JOIN electricity_supply_points e ON e.supply_point_id = sp.id WHERE sp.supply_address_id = x.id))
	ORDER BY x.position) FROM supply_addresses x WHERE x.account_id = a.id))
FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE a.service_account_number = $1`

// TestAccount_ReferenceExampleIsValidatedStagedCreatedAndReadBackAsSent runs
// the reference's example account through E3, E4 and E5 and reads the
// created account back from storage: everything sent is there, including
// the fields of a supply type without a layout of its own.
func TestAccount_ReferenceExampleIsValidatedStagedCreatedAndReadBackAsSent(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedReference(t, s)
	tok := s.accessToken(t, s.newKey(t, "k"))
	sent, raw := referenceAccount(t)

	if r := s.do(t, "POST", pathValidateAccount, tok, string(raw)); r.Status != 200 {
		t.Fatalf("E3: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "POST", pathStageAccount, tok, string(raw)); r.Status != 201 {
		t.Fatalf("E4: %d %s", r.Status, r.Raw)
	}
	r := s.do(t, "POST", processPath, tok, map[string]any{
		"external_account_number": "8888888889", "import_supplier_code": "TENTACLE_ENERGY", "operations_team_name": "Ops"})
	if r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	var stored []byte
	if err := s.db.Get(&stored, readBackAccount, r.Body["service_account_number"]); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(stored, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sent, got); diff != "" {
		t.Errorf("stored account differs from the payload sent (-sent +stored):\n%s", diff)
	}
}

// TestAccount_WithoutBillingAddressBillsTheFirstSupplyAddress: E5 stores
// the billing address derived from the first supply address, as
// jobs/account/RULES.md documents for billing_address.
func TestAccount_WithoutBillingAddressBillsTheFirstSupplyAddress(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	body := fixture(t, "ACC-NOBILL")
	delete(body, "billing_address")
	delete(body, "notes") // their document needs a store; not the subject here
	s.stage(t, tok, body)
	r := s.do(t, "POST", processPath, tok, processBody("ACC-NOBILL", false))
	if r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	type billing struct {
		Street, Locality, Area, Postcode *string
		Country                          string
	}
	var got billing
	if err := s.db.QueryRow(`SELECT billing_street_address, billing_locality, billing_administrative_area, billing_postal_code, billing_country
		FROM accounts WHERE service_account_number = $1`, r.Body["service_account_number"]).
		Scan(&got.Street, &got.Locality, &got.Area, &got.Postcode, &got.Country); err != nil {
		t.Fatal(err)
	}
	want := billing{Street: new("14 Albert Road\nFlat 2\nDidsbury\nManchester"), Postcode: new("M20 2GL"), Country: "GB"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("billing address (-want +got):\n%s", diff)
	}
}

// TestAccount_StatementsAreStoredAsE8StoresThem: an account payload that
// carries statements as the reference's GB account example has them is
// staged (E4) and created (E5), and the statements are the account's
// historical statements: stored in E8's table, so that E8 then refuses the
// same statement_id as one the account already has.
func TestAccount_StatementsAreStoredAsE8StoresThem(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	body := fixture(t, "ACC-ST")
	delete(body, "notes") // their document needs a store; not the subject here
	body["statements"] = []any{
		map[string]any{"bill_period_from_date": "2019-06-01", "bill_period_to_date": "2019-07-01",
			"statement_path": "/EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "statement_id": "54321"},
		map[string]any{"bill_period_from_date": "2019-07-01", "bill_period_to_date": "2019-08-01",
			"statement_path": "/EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf", "statement_id": "12345"},
	}
	s.stage(t, tok, body)
	r := s.do(t, "POST", processPath, tok, processBody("ACC-ST", false))
	if r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	var got []string
	if err := s.db.Select(&got, `SELECT concat_ws(' ', h.statement_id, h.bill_period_from_date, h.bill_period_to_date, h.statement_path)
		FROM historical_statements h JOIN accounts a ON a.id = h.account_id
		WHERE a.service_account_number = $1 ORDER BY h.id`, r.Body["service_account_number"]); err != nil {
		t.Fatal(err)
	}
	want := []string{"54321 2019-06-01 2019-07-01 /EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf",
		"12345 2019-07-01 2019-08-01 /EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored statements (-want +got):\n%s", diff)
	}
	r = s.do(t, "POST", pathStatements, tok, map[string]any{"import_supplier": "DEMO", "external_account_number": "ACC-ST",
		"statements": []any{map[string]any{"statement_id": "54321", "bill_period_from_date": "2019-06-01", "bill_period_to_date": "2019-07-01"}}})
	if r.Status != 400 || !strings.Contains(string(r.Raw), `"code":"historical_statement_already_exists"`) {
		t.Errorf("E8 of a statement the account has: %d %s", r.Status, r.Raw)
	}
}
