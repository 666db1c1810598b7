package business

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

var update = flag.Bool("update", false, "rewrite RULES.md from the code")

// testToday is "now" for every test.
var testToday = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)

type bundle struct {
	db  *db.DB
	svc *Service
}

// setup returns a fresh database with suppliers DEMO and OTHER (Ongoing),
// PAUSED, and HIDDEN (which the caller may not see), and a Service over it.
func setup(t testing.TB) bundle {
	t.Helper()
	d := dbtest.New(t)
	if _, err := d.Exec(`INSERT INTO import_suppliers (code, status) VALUES
		('DEMO', 'Ongoing'), ('OTHER', 'Ongoing'), ('PAUSED', 'Paused'), ('HIDDEN', 'Ongoing')`); err != nil {
		t.Fatal(err)
	}
	return bundle{db: d, svc: New(d, func() time.Time { return testToday })}
}

func visible(code string) bool { return code != "HIDDEN" }

// request returns a valid E1 body as a map, so that cases can change it.
func request() map[string]any {
	return map[string]any{
		"import_supplier_code":         "DEMO",
		"external_business_identifier": "BIZ-1",
		"business": map[string]any{
			"business_type":  "LTD",
			"company_number": "01234567",
			"company_name":   "Acme Widgets Ltd",
			"details": []any{
				map[string]any{"key": "vat_number", "value": "GB123456789"},
				map[string]any{"key": "sector", "value": ""},
			},
			"business_contracts": []any{
				map[string]any{
					"valid_from_date": "2024-01-01",
					"signed_at_date":  "2023-12-01",
					"identifier":      "BC-1",
					"versions": []any{
						map[string]any{"applicable_at_date": "2024-01-01", "terms": []any{map[string]any{"rate": 10.50, "unit": "p/kWh"}, "plain"}},
						map[string]any{"applicable_at_date": "2024-07-01", "terms": []any{}},
					},
				},
				map[string]any{"valid_from_date": "2024-03-01", "identifier": "BC-2",
					"versions": []any{map[string]any{"applicable_at_date": "2024-03-01", "terms": []any{1e2}}}},
			},
		},
	}
}

func body(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// at walks a path of keys and indexes into the request and returns the map
// or slice there, for cases that edit it.
func at(m map[string]any, path ...any) any {
	var cur any = m
	for _, p := range path {
		switch p := p.(type) {
		case string:
			cur = cur.(map[string]any)[p]
		case int:
			cur = cur.([]any)[p]
		}
	}
	return cur
}

func obj(m map[string]any, path ...any) map[string]any { return at(m, path...).(map[string]any) }

func asProblem(t *testing.T, err error) *problem.Error {
	t.Helper()
	p, ok := problem.As(err)
	if !ok || p.Kind != problem.Invalid {
		t.Fatalf("want an Invalid *problem.Error, got %v", err)
	}
	return p
}

// TestCreate_AnyBusinessTypeCodeIsStoredAsSent: spec 2.6 lists LTD "in use",
// an example; any upper-case code is accepted.
func TestCreate_AnyBusinessTypeCodeIsStoredAsSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := request()
	obj(m, "business")["business_type"] = "GMBH"
	res, err := b.svc.Create(context.Background(), body(t, m), visible)
	if err != nil {
		t.Fatal(err)
	}
	var typ string
	if err := b.db.Get(&typ, `SELECT business_type FROM businesses WHERE id = $1`, res.ServiceBusinessID); err != nil {
		t.Fatal(err)
	}
	if typ != "GMBH" {
		t.Errorf("business_type = %q, want GMBH", typ)
	}
}

func TestCreate_StoresBusinessDetailsContractsVersionsAndTerms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := b.svc.Create(ctx, body(t, request()), visible)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServiceBusinessID <= 0 || res.ExternalBusinessIdentifier != "BIZ-1" {
		t.Fatalf("result = %+v", res)
	}
	var got struct {
		Type, Number, Name, Supplier string
	}
	if err := b.db.QueryRow(`SELECT b.business_type, b.company_number, b.company_name, s.code FROM businesses b
		JOIN import_suppliers s ON s.id = b.supplier_id WHERE b.id = $1`, res.ServiceBusinessID).
		Scan(&got.Type, &got.Number, &got.Name, &got.Supplier); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(struct{ Type, Number, Name, Supplier string }{"LTD", "01234567", "Acme Widgets Ltd", "DEMO"}, got); diff != "" {
		t.Errorf("business row (-want +got):\n%s", diff)
	}
	var details []string
	if err := b.db.Select(&details, `SELECT key || '=' || value FROM business_details WHERE business_id = $1 ORDER BY position`, res.ServiceBusinessID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"vat_number=GB123456789", "sector="}, details); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	var versions []string
	if err := b.db.Select(&versions, `SELECT c.identifier || ' ' || COALESCE(c.valid_from_date::text, '-') || ' ' ||
			COALESCE(c.signed_at_date::text, '-') || ' ' || v.applicable_at_date || ' ' || v.terms::text
		FROM business_contracts c JOIN business_contract_versions v ON v.contract_id = c.id
		WHERE c.business_id = $1 ORDER BY c.identifier, v.position`, res.ServiceBusinessID); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`BC-1 2024-01-01 2023-12-01 2024-01-01 [{"rate": 10.5, "unit": "p/kWh"}, "plain"]`,
		`BC-1 2024-01-01 2023-12-01 2024-07-01 []`,
		`BC-2 2024-03-01 - 2024-03-01 [100]`,
	}
	if diff := cmp.Diff(want, versions); diff != "" {
		t.Errorf("contracts and versions (-want +got):\n%s", diff)
	}
}

// Spec 3.1 limits Paused and Complete to account migration: a business is
// created whatever its supplier's status.
func TestCreate_AcceptedWhateverTheSupplierStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"Ongoing", "Paused", "Complete"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if _, err := b.db.Exec(`UPDATE import_suppliers SET status = $1 WHERE code = 'DEMO'`, status); err != nil {
				t.Fatal(err)
			}
			res, err := b.svc.Create(context.Background(), body(t, request()), visible)
			if err != nil {
				t.Fatalf("supplier %s: %v", status, err)
			}
			var n int
			if err := b.db.Get(&n, `SELECT count(*) FROM business_contracts WHERE business_id = $1`, res.ServiceBusinessID); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(2, n); diff != "" {
				t.Errorf("contracts stored (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreate_TermsKeepExactNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	raw := strings.Replace(string(body(t, request())), `"terms":[100]`, `"terms":[10.50, 1.000000000000000000001]`, 1)
	res, err := b.svc.Create(context.Background(), []byte(raw), visible)
	if err != nil {
		t.Fatal(err)
	}
	var terms string
	if err := b.db.Get(&terms, `SELECT v.terms::text FROM business_contract_versions v JOIN business_contracts c ON c.id = v.contract_id
		WHERE c.business_id = $1 AND c.identifier = 'BC-2'`, res.ServiceBusinessID); err != nil {
		t.Fatal(err)
	}
	if terms != `[10.50, 1.000000000000000000001]` {
		t.Errorf("terms = %s; numbers must not pass through float64", terms)
	}
}

// No source requires a company number, for any business type.
func TestCreate_CompanyNumberIsOptionalForEveryType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, typ := range []string{"LTD", "PLC", "LLP", "SOLE_TRADER", "PARTNERSHIP", "CHARITY"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			m := request()
			m["external_business_identifier"] = "BIZ-" + typ
			obj(m, "business")["business_type"] = typ
			delete(obj(m, "business"), "company_number")
			for i := range 2 {
				obj(m, "business", "business_contracts", i)["identifier"] = typ + "-BC-" + string(rune('A'+i))
			}
			if _, err := b.svc.Create(context.Background(), body(t, m), visible); err != nil {
				t.Fatalf("a %s without a company number: %v", typ, err)
			}
		})
	}
}

// E1 accepts what neither the spec nor the reference refuses: a business
// without type, name, number or contracts; a contract signed after today,
// without versions, or whose versions share a date, come out of order or
// start before the contract; a contract or version without a date, a
// version without terms.
func TestCreate_AcceptsWhatNoSourceRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		check func(t *testing.T, id int64)
	}{
		{"no business type, name or number", func(m map[string]any) {
			delete(obj(m, "business"), "business_type")
			delete(obj(m, "business"), "company_name")
			delete(obj(m, "business"), "company_number")
		}, func(t *testing.T, id int64) {
			var got []string
			if err := b.db.Select(&got, `SELECT unnest(ARRAY[business_type, company_name, company_number]) FROM businesses WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"", "", ""}, got); diff != "" {
				t.Errorf("type, name, number (-want +got):\n%s", diff)
			}
		}},
		{"empty business type, name and number", func(m map[string]any) {
			for _, f := range []string{"business_type", "company_name", "company_number"} {
				obj(m, "business")[f] = ""
			}
		}, func(t *testing.T, id int64) {
			var got []string
			if err := b.db.Select(&got, `SELECT unnest(ARRAY[business_type, company_name, company_number]) FROM businesses WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"", "", ""}, got); diff != "" {
				t.Errorf("type, name, number (-want +got):\n%s", diff)
			}
		}},
		{"no contracts", func(m map[string]any) { delete(obj(m, "business"), "business_contracts") }, nil},
		{"an empty list of contracts", func(m map[string]any) { obj(m, "business")["business_contracts"] = []any{} }, nil},
		{"a business type of any form (GmbH)", func(m map[string]any) { obj(m, "business")["business_type"] = "GmbH" }, nil},
		{"a contract signed after today", func(m map[string]any) {
			obj(m, "business", "business_contracts", 0)["signed_at_date"] = "2025-06-16"
		}, nil},
		{"a contract without versions", func(m map[string]any) { obj(m, "business", "business_contracts", 1)["versions"] = []any{} }, nil},
		{"a contract with versions omitted", func(m map[string]any) { delete(obj(m, "business", "business_contracts", 1), "versions") }, nil},
		{"a contract and a version without dates, a version without terms", func(m map[string]any) {
			c := obj(m, "business", "business_contracts", 0)
			delete(c, "valid_from_date")
			c["versions"] = []any{map[string]any{"terms": []any{"a"}}, map[string]any{"applicable_at_date": "2024-07-01"}, map[string]any{}}
		}, func(t *testing.T, id int64) {
			var got []string
			if err := b.db.Select(&got, `SELECT COALESCE(c.valid_from_date::text, 'NULL') || ' ' || COALESCE(v.applicable_at_date::text, 'NULL')
				|| ' ' || COALESCE(v.terms::text, 'NULL') FROM business_contract_versions v
				JOIN business_contracts c ON c.id = v.contract_id WHERE c.business_id = $1 AND c.identifier LIKE '%-0' ORDER BY v.position`, id); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{`NULL NULL ["a"]`, "NULL 2024-07-01 NULL", "NULL NULL NULL"}, got); diff != "" {
				t.Errorf("what was not sent is NULL (-want +got):\n%s", diff)
			}
		}},
		{"versions out of order, on one date, before the contract", func(m map[string]any) {
			c := obj(m, "business", "business_contracts", 0)
			c["versions"] = []any{
				map[string]any{"applicable_at_date": "2024-07-01", "terms": []any{"b"}},
				map[string]any{"applicable_at_date": "2023-12-31", "terms": []any{"a"}},
				map[string]any{"applicable_at_date": "2024-07-01", "terms": []any{"c"}},
			}
		}, func(t *testing.T, id int64) {
			var dates []string
			if err := b.db.Select(&dates, `SELECT v.applicable_at_date::text FROM business_contract_versions v
				JOIN business_contracts c ON c.id = v.contract_id WHERE c.business_id = $1 AND c.identifier LIKE '%-0' ORDER BY v.position`, id); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"2024-07-01", "2023-12-31", "2024-07-01"}, dates); diff != "" {
				t.Errorf("versions in the order sent (-want +got):\n%s", diff)
			}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := request()
			m["external_business_identifier"] = fmt.Sprintf("BIZ-OPEN-%d", i)
			if cs, ok := obj(m, "business")["business_contracts"].([]any); ok {
				for j := range cs {
					obj(m, "business", "business_contracts", j)["identifier"] = fmt.Sprintf("OPEN-%d-%d", i, j)
				}
			}
			tc.edit(m)
			res, err := b.svc.Create(context.Background(), body(t, m), visible)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			var n int
			if err := b.db.Get(&n, `SELECT count(*) FROM businesses WHERE id = $1`, res.ServiceBusinessID); err != nil || n != 1 {
				t.Fatalf("business not stored: %d %v", n, err)
			}
			if tc.check != nil {
				tc.check(t, res.ServiceBusinessID)
			}
		})
	}
}

func TestCreate_RepeatIsRefusedWithTheExistingID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, err := b.svc.Create(ctx, body(t, request()), visible)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Create(ctx, body(t, request()), visible)
	p := asProblem(t, err)
	if p.Code != CodeAlreadyExists || len(p.Errors) != 1 || p.Errors[0].Attr != "external_business_identifier" {
		t.Fatalf("repeat: %+v", p)
	}
	if p.Extra["service_business_id"] != first.ServiceBusinessID || p.Extra["external_business_identifier"] != "BIZ-1" {
		t.Errorf("repeat carries %v, want the first business's id %d", p.Extra, first.ServiceBusinessID)
	}
	var n int
	if err := b.db.Get(&n, `SELECT count(*) FROM businesses`); err != nil || n != 1 {
		t.Errorf("%d businesses stored (%v), want 1", n, err)
	}
}

func TestCreate_SameIdentifierWithOtherKeyAttributesIsAnotherBusiness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.svc.Create(ctx, body(t, request()), visible); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		field string
		value string
	}{
		{"other name", "company_name", "Acme Widgets (Northern) Ltd"},
		{"other number", "company_number", "07654321"},
		{"other type", "business_type", "PLC"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := request()
			obj(m, "business")[tc.field] = tc.value
			for j := range 2 {
				obj(m, "business", "business_contracts", j)["identifier"] = tc.name + string(rune('0'+i)) + string(rune('0'+j))
			}
			if _, err := b.svc.Create(ctx, body(t, m), visible); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		})
	}
}

func TestCreate_ContractIdentifiersAreUniquePerSupplier(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.svc.Create(ctx, body(t, request()), visible); err != nil {
		t.Fatal(err)
	}

	// Another business of the same supplier may not reuse BC-2 ...
	m := request()
	m["external_business_identifier"] = "BIZ-2"
	obj(m, "business", "business_contracts", 0)["identifier"] = "BC-NEW"
	_, err := b.svc.Create(ctx, body(t, m), visible)
	p := asProblem(t, err)
	want := []problem.FieldError{{Code: CodeContractAlreadyExists, Attr: "business.business_contracts.1.identifier"}}
	if diff := cmp.Diff(want, p.Errors, ignoreDetail); diff != "" || p.Code != CodeFailedValidation {
		t.Errorf("code %s, errors (-want +got):\n%s", p.Code, diff)
	}
	var n int
	if err := b.db.Get(&n, `SELECT count(*) FROM businesses WHERE external_business_identifier = 'BIZ-2'`); err != nil || n != 0 {
		t.Errorf("refused business was stored (%d rows, %v)", n, err)
	}

	// ... but another supplier may.
	m["import_supplier_code"] = "OTHER"
	if _, err := b.svc.Create(ctx, body(t, m), visible); err != nil {
		t.Errorf("the same identifiers at another supplier: %v", err)
	}
}

var ignoreDetail = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Detail" }, cmp.Ignore())

// Each rule reports its code at its path. Every case changes one thing in a
// valid request.
func TestCreate_EachRuleReportsItsCodeAtItsPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name   string
		edit   func(m map[string]any)
		code   string
		attr   string
		detail string // a part of the detail, when it matters
	}{
		{"supplier unknown", func(m map[string]any) { m["import_supplier_code"] = "NOPE" }, CodeSupplierNotFound, "import_supplier_code", ""},
		{"supplier invisible to the key", func(m map[string]any) { m["import_supplier_code"] = "HIDDEN" }, CodeSupplierNotFound, "import_supplier_code", ""},
		{"supplier missing", func(m map[string]any) { delete(m, "import_supplier_code") }, validate.CodeRequired, "import_supplier_code", ""},
		{"identifier blank", func(m map[string]any) { m["external_business_identifier"] = " " }, validate.CodeBlank, "external_business_identifier", ""},
		{"identifier too long", func(m map[string]any) { m["external_business_identifier"] = strings.Repeat("x", 129) }, validate.CodeMaxLength, "external_business_identifier", ""},
		{"business missing", func(m map[string]any) { delete(m, "business") }, validate.CodeRequired, "business", ""},
		{"business not an object", func(m map[string]any) { m["business"] = []any{} }, validate.CodeInvalid, "business", ""},
		{"unknown top-level field", func(m map[string]any) { m["extra"] = 1 }, validate.CodeUnknownField, "extra", ""},
		{"business type of 65 characters", func(m map[string]any) { obj(m, "business")["business_type"] = strings.Repeat("G", 65) }, validate.CodeInvalidChoice, "business.business_type", ""},
		{"company name null", func(m map[string]any) { obj(m, "business")["company_name"] = nil }, validate.CodeInvalid, "business.company_name", ""},
		{"detail key repeated", func(m map[string]any) { obj(m, "business", "details", 1)["key"] = "vat_number" }, CodeDetailsDuplicateKeys, "business.details.1.key", ""},
		{"detail value a number", func(m map[string]any) { obj(m, "business", "details", 0)["value"] = 5 }, validate.CodeInvalid, "business.details.0.value", ""},
		{"contract identifier twice in the request", func(m map[string]any) { obj(m, "business", "business_contracts", 1)["identifier"] = "BC-1" },
			CodeContractAlreadyExists, "business.business_contracts.1.identifier", "more than once"},
		{"contract without identifier", func(m map[string]any) { delete(obj(m, "business", "business_contracts", 0), "identifier") },
			validate.CodeRequired, "business.business_contracts.0.identifier", ""},
		{"valid_from_date not a date", func(m map[string]any) { obj(m, "business", "business_contracts", 0)["valid_from_date"] = "2024-02-30" },
			validate.CodeInvalidDate, "business.business_contracts.0.valid_from_date", ""},
		{"terms not an array", func(m map[string]any) {
			obj(m, "business", "business_contracts", 0, "versions", 0)["terms"] = map[string]any{}
		},
			validate.CodeInvalid, "business.business_contracts.0.versions.0.terms", ""},
		{"terms null", func(m map[string]any) { obj(m, "business", "business_contracts", 0, "versions", 0)["terms"] = nil },
			validate.CodeInvalid, "business.business_contracts.0.versions.0.terms", ""},
		{"terms with a NUL", func(m map[string]any) {
			obj(m, "business", "business_contracts", 0, "versions", 0)["terms"] = []any{"a\x00b"}
		},
			validate.CodeNullCharacters, "business.business_contracts.0.versions.0.terms.0", ""},
	}
	codes := map[string]bool{}
	for _, tc := range tests {
		codes[tc.code] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := request()
			tc.edit(m)
			_, err := b.svc.Create(context.Background(), body(t, m), visible)
			p := asProblem(t, err)
			if p.Code != CodeFailedValidation {
				t.Errorf("top-level code %s, want %s", p.Code, CodeFailedValidation)
			}
			if len(p.Errors) != 1 || p.Errors[0].Code != tc.code || p.Errors[0].Attr != tc.attr {
				t.Fatalf("errors = %+v, want exactly one %s at %s", p.Errors, tc.code, tc.attr)
			}
			if !strings.Contains(p.Errors[0].Detail, tc.detail) {
				t.Errorf("detail %q does not mention %q", p.Errors[0].Detail, tc.detail)
			}
		})
	}
	t.Run("every semantic rule has a case", func(t *testing.T) {
		t.Parallel()
		for _, r := range semanticRules {
			if !codes[r.code] && r.code != CodeAlreadyExists { // tested on its own above
				t.Errorf("rule %s has no case", r.code)
			}
		}
	})
}

func TestCreate_TermsWithDuplicateKeysAndHugeNumbersAreRefusedAtTheirPaths(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := request()
	raw := strings.Replace(string(body(t, m)), `"terms":[100]`, `"terms":[{"a":1,"a":2}, 1e99999]`, 1)
	_, err := b.svc.Create(context.Background(), []byte(raw), visible)
	p := asProblem(t, err)
	want := []problem.FieldError{
		{Code: validate.CodeDuplicateKey, Attr: "business.business_contracts.1.versions.0.terms.0.a"},
		{Code: validate.CodeNumberOutOfRange, Attr: "business.business_contracts.1.versions.0.terms.1"},
	}
	if diff := cmp.Diff(want, p.Errors, ignoreDetail); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestCreate_ReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := request()
	m["import_supplier_code"] = "NOPE"
	obj(m, "business")["business_type"] = strings.Repeat("G", 65)
	obj(m, "business", "details", 1)["key"] = "vat_number"
	obj(m, "business", "business_contracts", 1)["identifier"] = "BC-1"
	_, err := b.svc.Create(context.Background(), body(t, m), visible)
	p := asProblem(t, err)
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Code+"@"+e.Attr)
	}
	slices.Sort(got)
	want := []string{
		CodeContractAlreadyExists + "@business.business_contracts.1.identifier",
		CodeDetailsDuplicateKeys + "@business.details.1.key",
		CodeSupplierNotFound + "@import_supplier_code",
		validate.CodeInvalidChoice + "@business.business_type",
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestCreate_RefusesBodiesThatAreNotAJSONObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, raw := range []string{``, `{`, `[]`, `"x"`, `{"a":1}x`} {
		t.Run(raw, func(t *testing.T) {
			t.Parallel()
			_, err := b.svc.Create(context.Background(), []byte(raw), visible)
			p := asProblem(t, err)
			if p.Code != CodeParseError || len(p.Errors) != 0 {
				t.Errorf("%q: %+v", raw, p)
			}
		})
	}
}

// Concurrent identical requests create one business; the others hear that it
// exists. Concurrent businesses that share a contract identifier: one wins,
// and the loser leaves nothing behind.
func TestCreate_ConcurrentRequestsStoreOnceAndNothingHalfWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			m := request()
			if i%2 == 1 { // a different business claiming the same contracts
				m["external_business_identifier"] = "BIZ-RIVAL-" + string(rune('A'+i))
			}
			_, errs[i] = b.svc.Create(ctx, body(t, m), visible)
		})
	}
	wg.Wait()
	created := 0
	for i, err := range errs {
		if err == nil {
			created++
			continue
		}
		p, ok := problem.As(err)
		if !ok || (p.Code != CodeAlreadyExists && p.Code != CodeFailedValidation) {
			t.Errorf("request %d: %v", i, err)
		}
	}
	var businesses, contracts int
	if err := b.db.Get(&businesses, `SELECT count(*) FROM businesses`); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Get(&contracts, `SELECT count(*) FROM business_contracts`); err != nil {
		t.Fatal(err)
	}
	if created != 1 || businesses != 1 || contracts != 2 {
		t.Errorf("%d created, %d businesses and %d contracts stored; want 1, 1 and 2", created, businesses, contracts)
	}
}

func TestCreate_DatabaseFailureIsNotAValidationProblem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.svc.Create(ctx, body(t, request()), visible)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a wrapped context.Canceled", err)
	}
	if p, ok := problem.As(err); ok && p.Kind == problem.Invalid {
		t.Errorf("an infrastructure failure became a caller problem: %v", p)
	}
}

func TestRulesFile(t *testing.T) {
	t.Parallel()
	want := Reference()
	got, err := os.ReadFile("RULES.md")
	if *update {
		if err := os.WriteFile("RULES.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("RULES.md is out of date; run go test ./jobs/business -run TestRulesFile -update")
	}
	if strings.Contains(want, "| ? |") {
		t.Errorf("RULES.md has a field of unknown type:\n%s", want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(body(f, request()))
	for _, s := range []string{`{}`, `{"business":{"business_contracts":[{"versions":[{"terms":[{"a":1,"a":2}]}]}]}}`, `[]`, `{"business":null}`,
		`{"business":{"details":[{"key":"k","value":"v"},{"key":"k","value":""}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, errs, err := Parse(context.Background(), data)
		if err != nil {
			if perr, ok := problem.As(err); !ok || perr.Code != CodeParseError || len(errs) != 0 {
				t.Fatalf("parse error with problems: %v %v", err, errs)
			}
			return
		}
		for _, e := range errs {
			if e.Code == "" || e.Detail == "" {
				t.Fatalf("problem without code or detail: %+v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		// A request without problems is complete and storable.
		if r.ImportSupplierCode == "" || r.ExternalBusinessIdentifier == "" || r.Business == nil {
			t.Fatalf("accepted an incomplete request: %+v", r)
		}
		if typ, _, _ := r.Business.key(); utf8.RuneCountInString(typ) > validate.MaxCodeLength {
			t.Fatalf("accepted business type %q", typ)
		}
		for _, c := range r.Business.BusinessContracts {
			if c.Identifier == "" || (c.ValidFromDate != nil && *c.ValidFromDate == "") {
				t.Fatalf("accepted an incomplete contract: %+v", c)
			}
			for _, v := range c.Versions {
				if v.ApplicableAtDate != nil && *v.ApplicableAtDate == "" {
					t.Fatalf("accepted an empty version date: %+v", v)
				}
				if v.Terms == nil { // omitted: stored as NULL
					continue
				}
				if !json.Valid(v.Terms) || v.Terms[0] != '[' || strings.Contains(string(v.Terms), `\u0000`) {
					t.Fatalf("accepted terms %s", v.Terms)
				}
			}
		}
	})
}
