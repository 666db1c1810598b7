package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// codesAt returns the "code@attr" pairs of a section 7 body, sorted, and
// fails the test if the body does not have the section 7 shape.
func codesAt(t testing.TB, r response) []string {
	t.Helper()
	errs, ok := r.Body["errors"].([]any)
	if !ok || r.Body["code"] == nil || r.Body["detail"] == nil {
		t.Fatalf("not a section 7 body: %s", r.Raw)
	}
	out := []string{}
	for _, e := range errs {
		m, _ := e.(map[string]any)
		if d, _ := m["detail"].(string); d == "" {
			t.Errorf("an error without detail: %v", m)
		}
		out = append(out, m["code"].(string)+"@"+m["attr"].(string))
	}
	slices.Sort(out)
	return out
}

// businessRequest is a valid E1 body for supplier DEMO whose contract is the
// one the account fixture references.
func businessRequest() map[string]any {
	return map[string]any{
		"import_supplier_code":         "DEMO",
		"external_business_identifier": "BIZ-42",
		"business": map[string]any{
			"business_type":  "LTD",
			"company_number": "09876543",
			"company_name":   "Albert Road Bakery Ltd",
			"details":        []any{map[string]any{"key": "vat_number", "value": "GB999999973"}},
			"business_contracts": []any{map[string]any{
				"valid_from_date": "2024-01-01", "signed_at_date": "2023-12-15", "identifier": fixtureContractID,
				"versions": []any{map[string]any{"applicable_at_date": "2024-01-01", "terms": []any{map[string]any{"unit_rate": 24.50}}}},
			}},
		},
	}
}

// E1 over HTTP: the business is created once, its contract is what staged
// accounts reference, and refusals have the section 7 body.
func TestBusiness_CreateOverHTTP(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	ctx := context.Background()
	for _, code := range []string{"DEMO", "OTHER"} {
		if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: code}); err != nil {
			t.Fatal(err)
		}
	}
	for product, tariffs := range fixtureTariffCodes {
		if _, err := admin.CreateProduct(ctx, s.db, product, tariffs); err != nil {
			t.Fatal(err)
		}
	}
	tok := s.accessToken(t, s.newKey(t, "team"))
	otherTok := s.accessToken(t, s.newKey(t, "other-team", "OTHER"))
	const path = "/v1/data-import/business/"

	// Before E1 the fixture's contract does not exist ...
	if r := s.do(t, "POST", "/v1/data-import/validate-account/", tok, fixture(t, "")); r.Status != 400 {
		t.Fatalf("validate before E1: %d %s", r.Status, r.Raw)
	}

	r := s.do(t, "POST", path, tok, businessRequest())
	if r.Status != 201 {
		t.Fatalf("E1: %d %s", r.Status, r.Raw)
	}
	var created struct {
		ServiceBusinessID          json.Number `json:"service_business_id"`
		ExternalBusinessIdentifier string      `json:"external_business_identifier"`
	}
	if err := json.Unmarshal(r.Raw, &created); err != nil {
		t.Fatal(err)
	}
	id, err := created.ServiceBusinessID.Int64()
	if err != nil || id <= 0 || created.ExternalBusinessIdentifier != "BIZ-42" || len(r.Body) != 2 {
		t.Fatalf("201 body %s: service_business_id must be a positive integer", r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM business_contract_versions v JOIN business_contracts c ON c.id = v.contract_id
		WHERE c.business_id = $1`, id); n != 1 {
		t.Errorf("%d contract versions stored, want 1", n)
	}

	// ... after it, an account that references it validates.
	if r := s.do(t, "POST", "/v1/data-import/validate-account/", tok, fixture(t, "")); r.Status != 200 {
		t.Errorf("validate after E1: %d %s", r.Status, r.Raw)
	}

	tests := []struct {
		name   string
		tok    string
		body   any
		status int
		code   string
		errors []string
	}{
		{"repeat", tok, businessRequest(), 400, "business_already_exists", []string{"business_already_exists@external_business_identifier"}},
		{"contract identifier taken by another business", tok, func() any {
			m := businessRequest()
			m["external_business_identifier"] = "BIZ-43"
			return m
		}(), 400, "business_failed_validation", []string{"business_contract_already_exists@business.business_contracts.0.identifier"}},
		{"every problem at once", tok, func() any {
			m := businessRequest()
			m["external_business_identifier"] = ""
			b := m["business"].(map[string]any)
			b["business_type"] = strings.Repeat("G", 65)
			b["unknown"] = true
			b["company_name"] = 5
			return m
		}(), 400, "business_failed_validation", []string{
			"blank@external_business_identifier", "business_contract_already_exists@business.business_contracts.0.identifier",
			"invalid@business.company_name", "invalid_choice@business.business_type",
			"unknown_field@business.unknown",
		}},
		{"a supplier the key may not use", otherTok, businessRequest(), 400, "business_failed_validation",
			[]string{"import_supplier_not_found@import_supplier_code"}},
		{"not JSON", tok, "{", 400, "parse_error", []string{}},
		{"no token", "", businessRequest(), 401, "not_authenticated", []string{}},
	}
	t.Run("refusals", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := s.do(t, "POST", path, tc.tok, tc.body)
				if r.Status != tc.status || r.Body["code"] != tc.code {
					t.Fatalf("%d %s, want %d %s", r.Status, r.Raw, tc.status, tc.code)
				}
				if diff := cmp.Diff(tc.errors, codesAt(t, r)); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				if tc.code == "business_already_exists" && r.Body["service_business_id"] != float64(id) {
					t.Errorf("the repeat does not carry the business's id %d: %s", id, r.Raw)
				}
			})
		}
	})
	// The group above has finished: none of its refusals stored anything.
	if n := s.count(t, `SELECT count(*) FROM businesses`); n != 1 {
		t.Errorf("%d businesses stored, want 1", n)
	}
}
