package account

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

func TestValidate_FixtureIsValidAndNormalised(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, err := b.v.Validate(context.Background(), fixture(t))
	if err != nil {
		t.Fatalf("fixture refused: %v %+v", err, err)
	}
	type view struct {
		Supplier                     Supplier
		Email, Mobile, Landline, Alt string
		SecondLandline               string
		Country, BillingPostcode     string
		SupplyPostcode               string
		AgreementDates               []validate.Date
		VoltsHigh, Multiplier        string
		Metadata                     string
	}
	sp := a.SupplyAddresses[0].SupplyPoints[0]
	got := view{
		Supplier: a.Supplier,
		Email:    *a.Customers[0].Email, Mobile: *a.Customers[0].Mobile, Landline: *a.Customers[0].Landline,
		Alt:            a.Customers[0].AlternativePhoneNumbers[0].PhoneNumber,
		SecondLandline: *a.Customers[1].Landline,
		Country:        a.BillingAddress.Country, BillingPostcode: *a.BillingAddress.PostalCode,
		SupplyPostcode: a.SupplyAddresses[1].SupplyPostcode,
		AgreementDates: []validate.Date{sp.Agreements[0].EffectiveFrom, sp.Agreements[1].EffectiveFrom},
		VoltsHigh:      sp.Meters[0].MeterType.VoltsHigh.String(), Multiplier: sp.Meters[0].Registers[1].Multiplier.String(),
		Metadata: string(a.Metadata[0].Value),
	}
	want := view{
		Supplier: Supplier{ID: got.Supplier.ID, Code: "DEMO", Status: "Ongoing", Country: "GB", DocumentRoot: "imports/demo", TimeZone: "UTC"},
		Email:    "Amelia.Hughes@brightmail.co.uk", Mobile: "+447911123456", Landline: "+441614960123", Alt: "+442079460018",
		SecondLandline: "",
		Country:        "GB", BillingPostcode: "M20 2GL", SupplyPostcode: "SK4 1AB",
		AgreementDates: []validate.Date{"2019-04-01", "2024-06-01"},
		VoltsHigh:      "253.0", Multiplier: "0.50",
		Metadata: `{"system":"legacy-crm","id":883421}`,
	}
	if got.Supplier.ID == 0 {
		t.Error("Supplier.ID is not set")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("normalised values (-want +got):\n%s", diff)
	}

	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if l, ok := m["ledgers"].([]any); !ok || len(l) != 0 {
		t.Errorf("ledgers encodes as %v, want the [] that was sent", m["ledgers"])
	}
	second := m["customers"].([]any)[1].(map[string]any)
	for _, k := range []string{"alternative_phone_numbers", "customer_preferences", "user_details"} {
		if _, ok := second[k]; ok {
			t.Errorf("customers.1.%s was omitted but the normalised payload has it", k)
		}
	}
	if _, ok := m["Supplier"]; ok {
		t.Error("the resolved supplier leaks into the payload")
	}
}

func TestValidate_NormalisedPayloadValidatesToTheSameAccount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bodies := map[string][]byte{
		"fixture":          fixture(t),
		"unknown occupier": oneSupplyAddress(t, fixtureDoc(t).del(t, "customers").set(t, "unknown_occupier", true)).bytes(t),
		"exponents":        exponents(t, fixtureDoc(t)).bytes(t),
		"lights and poles": fixtureDoc(t).set(t, "supply_addresses.1.supply_points.1", map[string]any{
			"supply_type": "LIGHT", "supply_start_date": "2020-01-01", "serial_number": "L-1", "secondary_serial_number": nil,
			"manufacturer_name": "", "installed_at": "2019-12-01",
			"agreements": []any{map[string]any{"tariff_code": "HP-STD", "effective_from": "2020-01-01"}}}).bytes(t),
		"other supply type keeps its fields": fixtureDoc(t).set(t, "supply_addresses.1.supply_points.1", map[string]any{
			"supply_type": "TREATED", "supply_start_date": "2020-01-01", "identifier": "WATER:1234567890", "multiplier": json.Number("2.0"),
			"hazard_details": []any{"Dog", "<gate>"}, "supply_end_date": nil, "agreements": []any{map[string]any{"tariff_code": "HP-STD", "effective_from": "2020-01-01"}}}).bytes(t),
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first, err := b.v.Validate(ctx, body)
			if err != nil {
				t.Fatalf("refused: %+v", err)
			}
			enc, err := json.Marshal(first)
			if err != nil {
				t.Fatal(err)
			}
			second, err := b.v.Validate(ctx, enc)
			if err != nil {
				t.Fatalf("normalised payload refused: %+v\n%s", err, enc)
			}
			if diff := cmp.Diff(first, second); diff != "" {
				t.Errorf("second validation changed the account (-first +second):\n%s", diff)
			}
			enc2, _ := json.Marshal(second)
			if string(enc) != string(enc2) {
				t.Errorf("encodings differ:\n%s\n%s", enc, enc2)
			}
			if name == "other supply type keeps its fields" {
				sp := first.SupplyAddresses[1].SupplyPoints[1]
				want := map[string]json.RawMessage{"identifier": json.RawMessage(`"WATER:1234567890"`), "multiplier": json.RawMessage(`2.0`),
					"hazard_details": json.RawMessage(`["Dog","\u003cgate\u003e"]`), "supply_end_date": json.RawMessage(`null`)}
				if diff := cmp.Diff(want, sp.Other); diff != "" {
					t.Errorf("other fields (-want +got):\n%s", diff)
				}
				if len(sp.Agreements) != 1 {
					t.Errorf("agreements of the other supply type = %v", sp.Agreements)
				}
			}
		})
	}
}

// ruleCase edits the fixture so that exactly the listed problems arise.
type ruleCase struct {
	name string
	edit func(t testing.TB, d doc) doc
	body string // used instead of edit when set
	want []pair
}

// oneSupplyAddress keeps only the fixture's first supply address, as an
// account with an unknown occupier has (occupier_account_with_multiple_supply_addresses).
func oneSupplyAddress(_ testing.TB, d doc) doc {
	d["supply_addresses"] = d["supply_addresses"].([]any)[:1]
	return d
}

func set(path string, v any) func(testing.TB, doc) doc {
	return func(t testing.TB, d doc) doc { return d.set(t, path, v) }
}

func del(path string) func(testing.TB, doc) doc {
	return func(t testing.TB, d doc) doc { return d.del(t, path) }
}

func edits(fs ...func(testing.TB, doc) doc) func(testing.TB, doc) doc {
	return func(t testing.TB, d doc) doc {
		for _, f := range fs {
			d = f(t, d)
		}
		return d
	}
}

// exponents writes numbers of the fixture with exponents, which JSON allows:
// decimals and whole numbers where integers are expected.
var exponents = edits(set(meter+"meter_type.amps_low", json.Number("1e2")), set(meter+"registers.0.multiplier", json.Number("2.5E-1")),
	set(meter+"meter_number", json.Number("1e2")), set(elec+"call_number", json.Number("4.20E+1")))

// referenceStatements are the statements of the reference's GB account
// example, as a client copies them into its payload.
func referenceStatements() []any {
	return []any{
		map[string]any{"bill_period_from_date": "2019-06-01", "bill_period_to_date": "2019-07-01",
			"statement_path": "/EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "statement_id": "54321"},
		map[string]any{"bill_period_from_date": "2019-07-01", "bill_period_to_date": "2019-08-01",
			"statement_path": "/EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf", "statement_id": "12345"},
	}
}

// statement is a historical statement of the account payload with more
// fields given as name, value pairs.
func statement(id, from, to string, more ...any) map[string]any {
	st := map[string]any{"statement_id": id, "bill_period_from_date": from, "bill_period_to_date": to}
	for i := 0; i+1 < len(more); i += 2 {
		st[more[i].(string)] = more[i+1]
	}
	return st
}

const (
	elec  = "supply_addresses.0.supply_points.0."
	elec2 = "supply_addresses.1.supply_points.0."
	meter = elec + "meters.0."
)

var ruleCases = []ruleCase{
	// Shape.
	{name: "undocumented top-level field", edit: set("account_type", "DOMESTIC"), want: []pair{{"account_type", "unknown_field"}}},
	{name: "undocumented field deep in a register", edit: set(meter+"registers.0.colour", "red"), want: []pair{{meter + "registers.0.colour", "unknown_field"}}},
	{name: "electricity field on a water heater", edit: set("supply_addresses.0.supply_points.1.identifier", "X1"),
		want: []pair{{"supply_addresses.0.supply_points.1.identifier", "unknown_field"}}},
	{name: "undocumented field in business", edit: set("business.company_name", "ACME"), want: []pair{{"business.company_name", "unknown_field"}}},
	{name: "number for a string", edit: set("customers.0.given_name", 5), want: []pair{{"customers.0.given_name", "invalid"}}},
	{name: "string for a boolean", edit: set("unknown_occupier", "false"), want: []pair{{"unknown_occupier", "invalid"}}},
	{name: "string for an integer", edit: set(elec+"call_number", "42"), want: []pair{{elec + "call_number", "invalid"}}},
	{name: "fraction for an integer", edit: set(elec+"call_number", json.Number("4.5")), want: []pair{{elec + "call_number", "invalid"}}},
	{name: "exponent beyond three digits for a decimal", edit: set(meter+"meter_type.amps_low", json.Number("1e1000")), want: []pair{{meter + "meter_type.amps_low", "invalid"}}},
	{name: "exponent that leaves a fraction for an integer", edit: set(elec+"call_number", json.Number("45e-1")), want: []pair{{elec + "call_number", "invalid"}}},
	{name: "string for a decimal that is no decimal", edit: set(meter+"meter_type.amps_low", "5 A"), want: []pair{{meter + "meter_type.amps_low", "invalid"}}},
	{name: "decimal string with an exponent", edit: set(meter+"registers.0.multiplier", "1e2"), want: []pair{{meter + "registers.0.multiplier", "invalid"}}},
	{name: "null optional string", edit: set("billing_address.locality", nil), want: []pair{{"billing_address.locality", "invalid"}}},
	{name: "null customers list", edit: set("customers", nil), want: []pair{{"customers", "invalid"}}},
	{name: "object where an array is expected", edit: set("supply_addresses", map[string]any{}), want: []pair{{"supply_addresses", "invalid"}}},
	{name: "array element not an object", edit: set("customers.1", "Tom"), want: []pair{{"customers.1", "invalid"}}},
	{name: "date in another format", edit: set("customers.0.date_of_birth", "12/03/1984"), want: []pair{{"customers.0.date_of_birth", "invalid_date"}}},
	{name: "date that does not exist", edit: set(elec+"agreements.0.effective_from", "2023-02-29"), want: []pair{{elec + "agreements.0.effective_from", "invalid_date"}}},
	{name: "datetime without T and Z", edit: set("notes.0.created_at", "2025-05-20 09:30:00"), want: []pair{{"notes.0.created_at", "invalid_datetime"}}},
	{name: "datetime without offset", edit: set("notes.0.unpin_at", "2026-01-01T00:00:00"), want: []pair{{"notes.0.unpin_at", "invalid_datetime"}}},
	{name: "statement without its id and period", edit: set("statements", []any{map[string]any{}}),
		want: []pair{{"statements.0.statement_id", "required"}, {"statements.0.bill_period_from_date", "required"}, {"statements.0.bill_period_to_date", "required"}}},
	{name: "statement field E8 does not know", edit: set("statements", []any{statement("1", "2019-06-01", "2019-07-01", "is_reversed", true)}),
		want: []pair{{"statements.0.is_reversed", "unknown_field"}}},
	{name: "statement id twice in the account", edit: set("statements", []any{statement("1", "2019-06-01", "2019-07-01"), statement("1", "2019-07-01", "2019-08-01")}),
		want: []pair{{"statements.1.statement_id", "duplicate_statement_ids"}}},
	{name: "statement period that starts after it ends", edit: set("statements", []any{statement("1", "2019-07-02", "2019-07-01")}),
		want: []pair{{"statements.0.bill_period_from_date", "start_date_later_than_end_date"}}},
	{name: "statement that ends after today", edit: set("statements", []any{statement("1", "2025-06-01", "2025-06-16")}),
		want: []pair{{"statements.0.bill_period_to_date", "historical_statement_period_end_in_future"}}},
	{name: "statement gross amount beyond 64 bits", edit: set("statements", []any{statement("1", "2019-06-01", "2019-07-01", "gross_amount", json.Number("1e19"))}),
		want: []pair{{"statements.0.gross_amount", "amount_out_of_range"}}},
	{name: "statement path with a .. segment", edit: set("statements", []any{statement("1", "2019-06-01", "2019-07-01", "statement_path", "a/../b.pdf")}),
		want: []pair{{"statements.0.statement_path", "invalid_document_path"}}},
	{name: "metadata value not an object", edit: set("metadata.0.value", "883421"), want: []pair{{"metadata.0.value", "invalid"}}},
	{name: "user detail value not a string", edit: set("customers.0.user_details.0.value", 7), want: []pair{{"customers.0.user_details.0.value", "invalid"}}},
	{name: "preference not a boolean", edit: set("customers.0.customer_preferences.opted_into_sms", "yes"), want: []pair{{"customers.0.customer_preferences.opted_into_sms", "invalid"}}},
	{name: "null character", edit: set("customers.0.given_name", "Ame\u0000lia"), want: []pair{{"customers.0.given_name", "null_characters_not_allowed"}}},
	{name: "duplicate key at top level", body: "dup-import_supplier", want: []pair{{"import_supplier", "duplicate_key"}}},
	{name: "duplicate key in billing address", body: "dup-country", want: []pair{{"billing_address.country", "duplicate_key"}}},

	// Codes: any upper-case code is accepted (see TestValidate_AcceptsAnyCodeInCodedFields); anything else is not.
	{name: "supply type not in the catalogue (a typo)", edit: set(elec2+"supply_type", "ELECTRICTY"),
		want: []pair{{elec2 + "supply_type", "supply_type_not_recognised"}}},
	{name: "supply type of 65 characters", edit: set(elec+"supply_type", strings.Repeat("G", 65)), want: []pair{{elec + "supply_type", "invalid_choice"}}},
	{name: "register type of 65 characters", edit: set(meter+"registers.0.register_type", strings.Repeat("k", 65)), want: []pair{{meter + "registers.0.register_type", "invalid_choice"}}},
	{name: "tank type of 65 characters", edit: set("supply_addresses.0.supply_points.1.tank_type", strings.Repeat("R", 65)), want: []pair{{"supply_addresses.0.supply_points.1.tank_type", "invalid_choice"}}},
	{name: "field of an other supply type not storable", edit: set("supply_addresses.0.supply_points.1", map[string]any{
		"supply_type": "TREATED", "supply_start_date": "2021-09-01", "identifier": "WATER:1\u0000", "agreements": []any{map[string]any{"tariff_code": "WH-RENT-STD", "effective_from": "2021-09-01"}}}),
		want: []pair{{"supply_addresses.0.supply_points.1.identifier", "null_characters_not_allowed"}}},
	{name: "other supply type still needs the common fields", edit: set("supply_addresses.0.supply_points.1", map[string]any{
		"supply_type": "TREATED", "identifier": "WATER:1234567890", "agreements": []any{map[string]any{"tariff_code": "WH-RENT-STD", "effective_from": "2021-09-01"}}}),
		want: []pair{{"supply_addresses.0.supply_points.1.supply_start_date", "required"}}},

	// Required, blank, length.
	{name: "missing import supplier", edit: del("import_supplier"), want: []pair{{"import_supplier", "required"}}},
	{name: "missing external account number", edit: del("external_account_number"), want: []pair{{"external_account_number", "required"}}},
	{name: "missing billing country", edit: del("billing_address.country"), want: []pair{{"billing_address.country", "required"}}},
	{name: "missing supply address line 1", edit: del("supply_addresses.0.supply_address1"), want: []pair{{"supply_addresses.0.supply_address1", "required"}}},
	{name: "missing supply postcode", edit: del("supply_addresses.0.supply_postcode"), want: []pair{{"supply_addresses.0.supply_postcode", "required"}}},
	{name: "missing move-in date", edit: del("supply_addresses.0.customer_at_supply_address_from_date"),
		want: []pair{{"supply_addresses.0.customer_at_supply_address_from_date", "required"}}},
	{name: "missing supply type", edit: del(elec + "supply_type"), want: []pair{{elec + "supply_type", "required"}}},
	{name: "missing supply start date", edit: del(elec + "supply_start_date"), want: []pair{{elec + "supply_start_date", "required"}}},
	{name: "missing electricity identifier", edit: del(elec + "identifier"), want: []pair{{elec + "identifier", "required"}}},
	{name: "missing tariff code", edit: del(elec + "agreements.0.tariff_code"), want: []pair{{elec + "agreements.0.tariff_code", "required"}}},
	{name: "missing effective from", edit: del(elec + "agreements.0.effective_from"), want: []pair{{elec + "agreements.0.effective_from", "required"}}},
	{name: "missing meter serial number", edit: del(meter + "serial_number"), want: []pair{{meter + "serial_number", "required"}}},
	{name: "missing register type", edit: del(meter + "registers.1.register_type"), want: []pair{{meter + "registers.1.register_type", "required"}}},
	{name: "missing transfer reading value", edit: del(elec + "transfer_readings.0.value"), want: []pair{{elec + "transfer_readings.0.value", "required"}}},
	{name: "missing metadata key and value", edit: set("metadata.0", map[string]any{}), want: []pair{{"metadata.0.key", "required"}, {"metadata.0.value", "required"}}},
	{name: "missing alternative phone number", edit: set("customers.0.alternative_phone_numbers.0", map[string]any{}),
		want: []pair{{"customers.0.alternative_phone_numbers.0.phone_number", "required"}}},
	{name: "missing user detail namespace", edit: del("customers.0.user_details.0.namespace"), want: []pair{{"customers.0.user_details.0.namespace", "required"}}},
	{name: "user detail with a key instead of a namespace", edit: set("customers.0.user_details.0", map[string]any{"key": "preferred_contact", "value": "email"}),
		want: []pair{{"customers.0.user_details.0.key", "unknown_field"}, {"customers.0.user_details.0.namespace", "required"}}},
	{name: "missing business contract identifier", edit: set("business", map[string]any{}), want: []pair{{"business.business_contract_identifier", "required"}}},
	{name: "missing document path", edit: set("notes.1.document_paths.0", map[string]any{}), want: []pair{{"notes.1.document_paths.0.document_path", "required"}}},
	{name: "empty external account number", edit: set("external_account_number", ""), want: []pair{{"external_account_number", "blank"}}},
	{name: "external account number of spaces", edit: set("external_account_number", "   "), want: []pair{{"external_account_number", "blank"}}},
	{name: "empty tariff code", edit: set(elec+"agreements.0.tariff_code", ""), want: []pair{{elec + "agreements.0.tariff_code", "blank"}}},
	{name: "locality longer than the reference's 512", edit: set("billing_address.locality", strings.Repeat("L", 513)), want: []pair{{"billing_address.locality", "max_length"}}},
	{name: "external account number too long", edit: set("external_account_number", strings.Repeat("A", 129)), want: []pair{{"external_account_number", "max_length"}}},

	// Supplier.
	{name: "unknown supplier", edit: set("import_supplier", "NOPE"), want: []pair{{"import_supplier", "import_supplier_not_found"}}},
	{name: "supplier the key may not see", edit: set("import_supplier", hiddenSupplier), want: []pair{{"import_supplier", "import_supplier_not_found"}}},

	// Customers.
	{name: "customers with unknown occupier", edit: edits(oneSupplyAddress, set("unknown_occupier", true)), want: []pair{{"customers", "customer_with_unknown_occupier"}}},
	{name: "unknown occupier at two supply addresses", edit: edits(del("customers"), set("unknown_occupier", true)),
		want: []pair{{"supply_addresses", "occupier_account_with_multiple_supply_addresses"}}},
	{name: "invalid landline", edit: set("customers.0.landline", "12345"), want: []pair{{"customers.0.landline", "invalid_phone_number"}}},
	{name: "invalid mobile", edit: set("customers.0.mobile", "07911"), want: []pair{{"customers.0.mobile", "invalid_phone_number"}}},
	{name: "mobile not a number", edit: set("customers.0.mobile", "abcde"), want: []pair{{"customers.0.mobile", "invalid_phone_number"}}},
	{name: "the same invalid number twice, refused at each place",
		edit: edits(set("customers.0.mobile", "12345"), set("customers.1.landline", "12345"), set("customers.0.alternative_phone_numbers.0.phone_number", "12345")),
		want: []pair{{"customers.0.mobile", "invalid_phone_number"}, {"customers.0.alternative_phone_numbers.0.phone_number", "invalid_phone_number"},
			{"customers.1.landline", "invalid_phone_number"}}},
	{name: "invalid alternative phone number", edit: set("customers.0.alternative_phone_numbers.0.phone_number", "0800"),
		want: []pair{{"customers.0.alternative_phone_numbers.0.phone_number", "invalid_phone_number"}}},
	{name: "e-mail without domain", edit: set("customers.0.email", "amelia.hughes"), want: []pair{{"customers.0.email", "invalid_email"}}},
	{name: "e-mail with two dots", edit: set("customers.0.email", "amelia..hughes@brightmail.co.uk"), want: []pair{{"customers.0.email", "invalid_email"}}},
	{name: "e-mail with a bare host", edit: set("customers.1.email", "tom@localhost"), want: []pair{{"customers.1.email", "invalid_email"}}},
	{name: "e-mail with an unclosed quoted local part", edit: set("customers.1.email", `"tom@brightmail.co.uk`), want: []pair{{"customers.1.email", "invalid_email"}}},
	{name: "e-mail with a domain IDNA refuses", edit: set("customers.1.email", "tom@bad\u00a0space.de"), want: []pair{{"customers.1.email", "invalid_email"}}},
	{name: "e-mail starting with test@", edit: set("customers.0.email", "test@brightmail.co.uk"), want: []pair{{"customers.0.email", "possible_test_email_address"}}},
	{name: "e-mail starting with TEST@", edit: set("customers.0.email", "TEST@brightmail.co.uk"), want: []pair{{"customers.0.email", "possible_test_email_address"}}},
	{name: "e-mail starting with xxx@", edit: set("customers.0.email", "xxx@brightmail.co.uk"), want: []pair{{"customers.0.email", "possible_test_email_address"}}},
	{name: "e-mail at test.com", edit: set("customers.1.email", "tom@Test.com"), want: []pair{{"customers.1.email", "possible_test_email_address"}}},
	{name: "e-mail at test.co.uk", edit: set("customers.1.email", "tom@test.co.uk"), want: []pair{{"customers.1.email", "possible_test_email_address"}}},
	{name: "e-mail ending with .xxx", edit: set("customers.1.email", "tom@hughes.xxx"), want: []pair{{"customers.1.email", "possible_test_email_address"}}},
	{name: "e-mail ending with .xx", edit: set("customers.1.email", "tom@hughes.xx"), want: []pair{{"customers.1.email", "possible_test_email_address"}}},

	// Addresses.
	{name: "unknown country", edit: set("billing_address.country", "XX"), want: []pair{{"billing_address.country", "invalid_country"}}},
	{name: "three-letter country", edit: set("billing_address.country", "GBR"), want: []pair{{"billing_address.country", "invalid_country"}}},
	{name: "billing postcode not in GB format", edit: set("billing_address.postal_code", "ABC 123"), want: []pair{{"billing_address.postal_code", "invalid_postcode"}}},
	{name: "supply postcode not in the supplier's format", edit: set("supply_addresses.1.supply_postcode", "12345"),
		want: []pair{{"supply_addresses.1.supply_postcode", "invalid_postcode"}}},

	// Supply points.
	{name: "agreement before supply start", edit: set(elec+"agreements.1.effective_from", "2019-03-31"),
		want: []pair{{elec + "agreements.1.effective_from", "agreement_start_date_before_supply_start_date"}}},
	{name: "two agreements from the same date", edit: set(elec+"agreements.0.effective_from", "2019-04-01"),
		want: []pair{{elec + "agreements.1.effective_from", "gaps_or_overlaps_in_agreement_dates"}}},
	{name: "tariff not in the catalogue", edit: edits(set(elec+"agreements.0.tariff_code", "E-GONE"), set(elec2+"agreements.0.tariff_code", "E-GONE")),
		want: []pair{{elec + "agreements.0.tariff_code", "tariff_code_not_found"}, {elec2 + "agreements.0.tariff_code", "tariff_code_not_found"}}},
	{name: "electricity identifier twice", edit: set(elec2+"identifier", "1200023456789"), want: []pair{{elec2 + "identifier", "duplicate_supply_point_identifier"}}},
	{name: "meter serial number twice in one supply point", edit: set(elec+"meters.1", map[string]any{"serial_number": "E21Z012345"}),
		want: []pair{{elec + "meters.1.serial_number", "duplicate_meter_serial_number"}}},
	{name: "supply point without agreements", edit: del("supply_addresses.0.supply_points.1.agreements"),
		want: []pair{{"supply_addresses.0.supply_points.1.agreements", "meter_point_with_no_agreement"}}},
	{name: "supply point with an empty list of agreements, and billed", edit: set(elec2+"agreements", []any{}),
		want: []pair{{elec2 + "agreements", "meter_point_with_no_agreement"}}},
	{name: "last billed before the first agreement starts", edit: set(elec2+"last_billed_to_date", "2022-01-14"),
		want: []pair{{elec2 + "last_billed_to_date", "no_agreement_covering_last_billed_to_date"}}},
	{name: "supply starting after today in the supplier's time zone", edit: edits(set("supply_addresses.0.supply_points.1.supply_start_date", "2025-06-16"),
		set("supply_addresses.0.supply_points.1.agreements.0.effective_from", "2025-06-16")),
		want: []pair{{"supply_addresses.0.supply_points.1.supply_start_date", "future_supply_start_date"}}},
	{name: "transfer reading value not a number", edit: set(elec+"transfer_readings.0.value", "about 23k"), want: []pair{{elec + "transfer_readings.0.value", "invalid"}}},
	{name: "transfer reading value with an exponent", edit: set(elec+"transfer_readings.0.value", "1e5"), want: []pair{{elec + "transfer_readings.0.value", "invalid"}}},
	{name: "transfer reading value with 11 digits before the point", edit: set(elec+"transfer_readings.0.value", "12345678901"), want: []pair{{elec + "transfer_readings.0.value", "invalid"}}},
	{name: "transfer reading value with 11 decimals", edit: set(elec+"transfer_readings.0.value", "1.12345678901"), want: []pair{{elec + "transfer_readings.0.value", "invalid"}}},
	{name: "transfer reading value with a plus sign", edit: set(elec+"transfer_readings.0.value", "+5"), want: []pair{{elec + "transfer_readings.0.value", "invalid"}}},
	{name: "transfer reading value of a point alone", edit: set(elec+"transfer_readings.0.value", "."), want: []pair{{elec + "transfer_readings.0.value", "invalid"}}},
	{name: "transfer reading value of a minus sign alone", edit: set(elec+"transfer_readings.0.value", "-"), want: []pair{{elec + "transfer_readings.0.value", "invalid"}}},

	// Metadata, notes, business.
	{name: "metadata key twice", edit: set("metadata.1.key", "legacy_account_id"), want: []pair{{"metadata.1.key", "metadata_has_duplicate_keys"}}},
	{name: "note with neither body nor documents", edit: set("notes.1", map[string]any{"created_at": "2019-04-02T10:00:00Z"}),
		want: []pair{{"notes.1", "note_body_or_document_path_not_found"}}},
	{name: "note with a blank body and no documents", edit: set("notes.1", map[string]any{"body": "  ", "document_paths": []any{}}),
		want: []pair{{"notes.1", "note_body_or_document_path_not_found"}}},
	{name: "note unpinned before it was created", edit: set("notes.0.unpin_at", "2025-05-01T00:00:00Z"),
		want: []pair{{"notes.0.unpin_at", "note_unpin_at_earlier_than_creation_date"}}},
	{name: "document path leaving the root", edit: set("notes.1.document_paths.0.document_path", "../other/secret.pdf"),
		want: []pair{{"notes.1.document_paths.0.document_path", "invalid_document_path"}}},
	{name: "document path leaving the root after a leading slash", edit: set("notes.1.document_paths.0.document_path", "/../letters/a.pdf"),
		want: []pair{{"notes.1.document_paths.0.document_path", "invalid_document_path"}}},
	{name: "document path within 1024 characters but over 1024 bytes", edit: set("notes.1.document_paths.0.document_path", "letters/"+strings.Repeat("é", 600)),
		want: []pair{{"notes.1.document_paths.0.document_path", "invalid_document_path"}}},
	{name: "document path over 1024 characters is reported once", edit: set("notes.1.document_paths.0.document_path", "letters/"+strings.Repeat("a", 1100)),
		want: []pair{{"notes.1.document_paths.0.document_path", "max_length"}}},
	{name: "document path with backslash", edit: set("notes.1.document_paths.0.document_path", `letters\a.pdf`),
		want: []pair{{"notes.1.document_paths.0.document_path", "invalid_document_path"}}},
	{name: "document path with empty segment", edit: set("notes.1.document_paths.0.document_path", "letters//a.pdf"),
		want: []pair{{"notes.1.document_paths.0.document_path", "invalid_document_path"}}},
	{name: "unknown business contract", edit: set("business.business_contract_identifier", "BC-NOPE"),
		want: []pair{{"business.business_contract_identifier", "business_contract_not_found"}}},
	{name: "business contract of another supplier", edit: set("business.business_contract_identifier", otherContract),
		want: []pair{{"business.business_contract_identifier", "business_contract_not_found"}}},
}

func (rc ruleCase) bodyBytes(t testing.TB) []byte {
	switch rc.body {
	case "":
		return rc.edit(t, fixtureDoc(t)).bytes(t)
	case "dup-import_supplier":
		return []byte(strings.Replace(string(fixture(t)), `"import_supplier": "DEMO",`, `"import_supplier": "DEMO", "import_supplier": "DEMO",`, 1))
	case "dup-country":
		return []byte(strings.Replace(string(fixture(t)), `"country": "GB",`, `"country": "GB", "country": "GB",`, 1))
	}
	t.Fatalf("unknown body %q", rc.body)
	return nil
}

// TestValidate_EachRuleReportsItsCodeAtItsPath breaks the fixture in one
// place per case and expects exactly the listed problems: the rule's own
// (attr, code) and no cascade of others.
func TestValidate_EachRuleReportsItsCodeAtItsPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	documented := documentedCodes()
	for _, rc := range ruleCases {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.v.Validate(context.Background(), rc.bodyBytes(t))
			if err == nil {
				t.Fatalf("accepted; want %v", rc.want)
			}
			errs := fieldErrors(t, err)
			if diff := cmp.Diff(rc.want, pairsOf(errs)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, e := range errs {
				if e.Detail == "" {
					t.Errorf("problem %s at %s has no detail", e.Code, e.Attr)
				}
				if !documented[e.Code] {
					t.Errorf("code %q is reported but not in RULES.md", e.Code)
				}
			}
		})
	}
}

// documentedCodes is every code RULES.md lists.
func documentedCodes() map[string]bool {
	codes := map[string]bool{validate.CodeUnknownField: true, validate.CodeDuplicateKey: true}
	var walk func(o *validate.ObjectSpec)
	walk = func(o *validate.ObjectSpec) {
		specs := slices.Clone(o.Fields)
		for _, v := range o.Variants {
			specs = append(specs, v.Fields...)
		}
		for _, s := range specs {
			for _, c := range s.ErrorCodes() {
				codes[c] = true
			}
			if s.Object != nil {
				walk(s.Object)
			}
		}
	}
	walk(accountSchema.Spec())
	for _, r := range semanticRules {
		codes[r.code] = true
	}
	return codes
}

func TestRules_EverySemanticCodeIsTested(t *testing.T) {
	t.Parallel()
	tested := map[string]bool{}
	for _, rc := range ruleCases {
		for _, p := range rc.want {
			tested[p.Code] = true
		}
	}
	// The validator never reads the document store: E5's worker reports
	// this code, and cmd/importd's process tests expect it.
	tested[note.CodeDocumentNotFound] = true
	for _, r := range semanticRules {
		if !tested[r.code] {
			t.Errorf("semantic rule %s has no case in ruleCases", r.code)
		}
	}
}

// TestValidate_TodayIsDatedInTheSuppliersTimeZone: the rules that compare a
// date with today (a statement's end, a supply's start) date it in the
// supplier's time zone, as Validator.Now says: at 20:00 UTC on 15 June it
// is 16 June in Sydney already, and not yet for a supplier in UTC.
func TestValidate_TodayIsDatedInTheSuppliersTimeZone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Exec(`UPDATE import_suppliers SET time_zone = 'Australia/Sydney' WHERE code = 'OTHER'`); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 6, 15, 20, 0, 0, 0, time.UTC)
	v := Validator{Catalog: b.catalog, Now: func() time.Time { return now }}
	const water = "supply_addresses.0.supply_points.1."
	sixteenth := edits(set("statements", []any{statement("1", "2025-06-01", "2025-06-16")}),
		set(water+"supply_start_date", "2025-06-16"), set(water+"agreements.0.effective_from", "2025-06-16"))
	tests := []struct {
		name, supplier, contract string
		want                     []pair
	}{
		{"in Sydney, 16 June is today", "OTHER", otherContract, []pair{}},
		{"in UTC, 16 June is tomorrow", "DEMO", fixtureContract, []pair{{water + "supply_start_date", "future_supply_start_date"},
			{"statements.0.bill_period_to_date", "historical_statement_period_end_in_future"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := edits(sixteenth, set("import_supplier", tt.supplier), set("business.business_contract_identifier", tt.contract))(t, fixtureDoc(t)).bytes(t)
			got := []pair{}
			if _, err := v.Validate(context.Background(), body); err != nil {
				got = pairsOf(fieldErrors(t, err))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate_AcceptsWhatTheRulesAllow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name  string
		edit  func(testing.TB, doc) doc
		check func(t *testing.T, a *Account)
	}{
		{name: "external account number of exactly 128 characters", edit: set("external_account_number", strings.Repeat("A", 128))},
		{name: "unknown occupier without customers, at one supply address", edit: edits(oneSupplyAddress, del("customers"), set("unknown_occupier", true))},
		{name: "several supply addresses when the occupier is known", edit: set("unknown_occupier", false)},
		{name: "one meter serial on two supply points (an import and an export MPAN)", edit: set(elec2+"meters.0.serial_number", "E21Z012345")},
		{name: "decimal strings wherever a decimal number is", edit: edits(set(meter+"meter_type.amps_low", "5"),
			set(meter+"meter_type.volts_high", "253.0"), set(meter+"meter_type.elements", "01"), set(meter+"registers.1.multiplier", ".50")),
			check: func(t *testing.T, a *Account) {
				mt, r := a.SupplyAddresses[0].SupplyPoints[0].Meters[0].MeterType, a.SupplyAddresses[0].SupplyPoints[0].Meters[0].Registers[1]
				got := []string{mt.AmpsLow.String(), mt.VoltsHigh.String(), mt.Elements.String(), r.Multiplier.String()}
				if diff := cmp.Diff([]string{"5", "253.0", "1", "0.50"}, got); diff != "" {
					t.Errorf("decimals read from strings (-want +got):\n%s", diff)
				}
			}},
		{name: "empty optional identifiers, as exported from empty columns", edit: edits(set(elec+"book_number", ""),
			set(meter+"meter_type.stock_code", ""), set("supply_addresses.0.supply_points.1.serial_number", ""),
			set("supply_addresses.1.supply_points.1.serial_number_internal", ""), set("supply_addresses.1.supply_points.1.serial_number_external", ""),
			set("supply_addresses.1.supply_points.2", map[string]any{"supply_type": "POLE", "supply_start_date": "2023-03-01",
				"serial_number": "", "secondary_serial_number": "", "agreements": []any{map[string]any{"tariff_code": "HP-STD", "effective_from": "2023-03-01"}}})),
			check: func(t *testing.T, a *Account) {
				e, w, h, p := a.SupplyAddresses[0].SupplyPoints[0], a.SupplyAddresses[0].SupplyPoints[1], a.SupplyAddresses[1].SupplyPoints[1], a.SupplyAddresses[1].SupplyPoints[2]
				for name, got := range map[string]*string{"book_number": e.BookNumber, "stock_code": e.Meters[0].MeterType.StockCode,
					"water heater serial_number": w.SerialNumber, "serial_number_internal": h.SerialNumberInternal,
					"serial_number_external": h.SerialNumberExternal, "pole serial_number": p.SerialNumber, "secondary_serial_number": p.SecondarySerialNumber} {
					if got == nil || *got != "" {
						t.Errorf("%s = %v, want \"\" kept as sent", name, got)
					}
				}
			}},
		{name: "statements as in the reference's GB account example", edit: set("statements", referenceStatements()),
			check: func(t *testing.T, a *Account) {
				p1, p2 := "/EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "/EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf"
				want := []postimport.Statement{
					{StatementID: "54321", BillPeriodFromDate: "2019-06-01", BillPeriodToDate: "2019-07-01", StatementPath: &p1},
					{StatementID: "12345", BillPeriodFromDate: "2019-07-01", BillPeriodToDate: "2019-08-01", StatementPath: &p2},
				}
				if diff := cmp.Diff(want, a.Statements); diff != "" {
					t.Errorf("statements (-want +got):\n%s", diff)
				}
			}},
		{name: "statements with every field E8 takes", edit: set("statements", []any{statement("S-1", "2019-06-01", "2019-07-01",
			"number", "A-0001", "issued_date", "2019-07-02", "gross_amount", json.Number("12345"), "statement_path", "s/1.pdf")})},
		{name: "unknown occupier with an empty customer list", edit: edits(oneSupplyAddress, set("customers", []any{}), set("unknown_occupier", true))},
		{name: "address parts of 512 characters, as the reference allows", edit: edits(set("billing_address.locality", strings.Repeat("L", 512)),
			set("supply_addresses.0.supply_address1", strings.Repeat("A", 512)))},
		{name: "no customers (no source requires one)", edit: del("customers")},
		{name: "empty customers", edit: set("customers", []any{})},
		{name: "date of birth in the future (no source refuses it)", edit: set("customers.0.date_of_birth", "2030-01-01")},
		{name: "date of birth before 1900", edit: set("customers.0.date_of_birth", "1899-12-31")},
		{name: "customer younger than 16", edit: set("customers.1.date_of_birth", "2009-06-16")},
		{name: "move-in after today (no source refuses it)", edit: set("supply_addresses.0.customer_at_supply_address_from_date", "2025-06-16")},
		{name: "supply billed on its start day", edit: set(elec+"last_billed_to_date", "2019-04-01")},
		{name: "last billed on the day the first agreement starts (effective_from is inclusive)", edit: set(elec2+"last_billed_to_date", "2022-01-15")},
		{name: "supply starting today in the supplier's time zone", edit: edits(set("supply_addresses.0.supply_points.1.supply_start_date", "2025-06-15"),
			set("supply_addresses.0.supply_points.1.agreements.0.effective_from", "2025-06-15"))},
		{name: "negative transfer reading (the reference's reading_value pattern allows a sign)", edit: set(elec+"transfer_readings.0.value", "-5")},
		{name: "empty mobile, landline, e-mail and postal code", edit: edits(set("customers.0.mobile", ""), set("customers.0.landline", ""),
			set("customers.0.email", ""), set("billing_address.postal_code", "")),
			check: func(t *testing.T, a *Account) {
				c := a.Customers[0]
				if diff := cmp.Diff([]string{"", "", "", ""}, []string{*c.Mobile, *c.Landline, *c.Email, *a.BillingAddress.PostalCode}); diff != "" {
					t.Errorf("empty strings not kept (-want +got):\n%s", diff)
				}
			}},
		{name: "null mobile and landline", edit: edits(set("customers.0.mobile", nil), set("customers.0.landline", nil)),
			check: func(t *testing.T, a *Account) {
				if c := a.Customers[0]; c.Mobile != nil || c.Landline != nil {
					t.Errorf("null phones = %v, %v; want omitted", c.Mobile, c.Landline)
				}
			}},
		{name: "mobile in national format, read in the supplier's country", edit: set("customers.0.mobile", "07911 123456"),
			check: func(t *testing.T, a *Account) {
				if *a.Customers[0].Mobile != "+447911123456" {
					t.Errorf("mobile = %s", *a.Customers[0].Mobile)
				}
			}},
		{name: "mobile that is a landline number", edit: set("customers.0.mobile", "+441614960123")},
		{name: "phone numbers with an extension, normalised to E.164 with the extension in RFC 3966 form",
			edit: edits(set("customers.0.landline", "0161 496 0123 ext. 12"), set("customers.0.alternative_phone_numbers.0.phone_number", "+44 20 7946 0018 x7")),
			check: func(t *testing.T, a *Account) {
				got := []string{*a.Customers[0].Landline, a.Customers[0].AlternativePhoneNumbers[0].PhoneNumber}
				if diff := cmp.Diff([]string{"+441614960123;ext=12", "+442079460018;ext=7"}, got); diff != "" {
					t.Errorf("numbers (-want +got):\n%s", diff)
				}
			}},
		{name: "the same number in several places, normalised at each",
			edit: edits(set("customers.0.landline", "0161 496 0123"), set("customers.1.landline", "0161 496 0123"),
				set("customers.0.alternative_phone_numbers.0.phone_number", "0161 496 0123")),
			check: func(t *testing.T, a *Account) {
				got := []string{*a.Customers[0].Landline, *a.Customers[1].Landline, a.Customers[0].AlternativePhoneNumbers[0].PhoneNumber}
				if diff := cmp.Diff([]string{"+441614960123", "+441614960123", "+441614960123"}, got); diff != "" {
					t.Errorf("numbers (-want +got):\n%s", diff)
				}
			}},
		{name: "e-mail with a quoted local part", edit: set("customers.0.email", `"amelia hughes"@brightmail.co.uk`)},
		{name: "e-mail with an escaped quote in a quoted local part", edit: set("customers.0.email", `"a\"b"@brightmail.co.uk`)},
		{name: "e-mail at an international domain, lower-cased", edit: set("customers.0.email", "joerg@Müller-Bäckerei.DE"),
			check: func(t *testing.T, a *Account) {
				if got := *a.Customers[0].Email; got != "joerg@müller-bäckerei.de" {
					t.Errorf("e-mail = %q", got)
				}
			}},

		{name: "e-mail at example.com, as in the reference's own example", edit: set("customers.0.email", "some.email@example.com")},
		{name: "e-mail at a subdomain of test.com", edit: set("customers.1.email", "tom@mx.test.com")},
		{name: "e-mail with test@ inside", edit: set("customers.1.email", "contest@brightmail.co.uk")},
		{name: "datetime with offset and fraction, normalised to UTC", edit: edits(set("notes.0.created_at", "2025-05-20T10:30:00.250+01:00"),
			set("notes.0.unpin_at", "2026-01-01T09:00:00+09:00")),
			check: func(t *testing.T, a *Account) {
				if got := []validate.Datetime{*a.Notes[0].CreatedAt, *a.Notes[0].UnpinAt}; !slices.Equal(got, []validate.Datetime{"2025-05-20T09:30:00.25Z", "2026-01-01T00:00:00Z"}) {
					t.Errorf("datetimes = %v", got)
				}
			}},
		{name: "no billing address", edit: del("billing_address"),
			check: func(t *testing.T, a *Account) {
				want := BillingAddress{Country: "GB", StreetAddress: new("14 Albert Road\nFlat 2\nDidsbury\nManchester"), PostalCode: new("M20 2GL")}
				if a.BillingAddress != nil {
					t.Errorf("billing address invented in the payload: %+v", a.BillingAddress)
				}
				if diff := cmp.Diff(want, a.EffectiveBillingAddress()); diff != "" {
					t.Errorf("derived billing address (-want +got):\n%s", diff)
				}
			}},
		{name: "no billing address and no supply address", edit: edits(del("billing_address"), del("supply_addresses")),
			check: func(t *testing.T, a *Account) {
				if diff := cmp.Diff(BillingAddress{Country: "GB"}, a.EffectiveBillingAddress()); diff != "" {
					t.Errorf("derived billing address (-want +got):\n%s", diff)
				}
			}},
		{name: "electricity point without meters", edit: edits(del(elec+"meters"), del(elec+"transfer_readings"))},
		{name: "lower-case country and a foreign postcode", edit: edits(set("billing_address.country", "ie"), set("billing_address.postal_code", "D02 X285")),
			check: func(t *testing.T, a *Account) {
				if a.BillingAddress.Country != "IE" || *a.BillingAddress.PostalCode != "D02 X285" {
					t.Errorf("billing address = %s %q", a.BillingAddress.Country, *a.BillingAddress.PostalCode)
				}
			}},
		{name: "pole with null secondary serial number", edit: set("supply_addresses.1.supply_points.1", map[string]any{
			"supply_type": "POLE", "supply_start_date": "2020-01-01", "serial_number": "P-9", "secondary_serial_number": nil,
			"manufacturer_name": "Pole Co", "model_name": "Tall", "location": "Corner", "product_note": "", "installed_at": "2019-12-01",
			"agreements": []any{map[string]any{"tariff_code": "HP-STD", "effective_from": "2020-01-01"}}}),
			check: func(t *testing.T, a *Account) {
				if p := a.SupplyAddresses[1].SupplyPoints[1]; p.SecondarySerialNumber != nil || *p.SerialNumber != "P-9" {
					t.Errorf("pole = %+v", p)
				}
			}},
		{name: "Irish supplier reads national numbers in Ireland and accepts any supply postcode", edit: edits(
			set("import_supplier", "IEDEMO"), del("business"),
			set("customers.0.landline", "01 234 5678"), set("customers.0.alternative_phone_numbers.0.phone_number", "+44 20 7946 0018"),
			set("supply_addresses.1.supply_postcode", "D02 X285")),
			check: func(t *testing.T, a *Account) {
				if *a.Customers[0].Landline != "+35312345678" || a.Supplier.Country != "IE" {
					t.Errorf("landline = %s, supplier %+v", *a.Customers[0].Landline, a.Supplier)
				}
			}},
		{name: "GB supplier accepts a Crown dependency landline sharing +44", edit: set("customers.0.landline", "01534 412345"),
			check: func(t *testing.T, a *Account) {
				if *a.Customers[0].Landline != "+441534412345" {
					t.Errorf("Jersey landline = %s", *a.Customers[0].Landline)
				}
			}},
		{name: "numbers written with exponents", edit: exponents,
			check: func(t *testing.T, a *Account) {
				m := a.SupplyAddresses[0].SupplyPoints[0].Meters[0]
				got := []string{m.MeterType.AmpsLow.String(), m.Registers[0].Multiplier.String(),
					strconv.FormatInt(*m.MeterNumber, 10), strconv.FormatInt(*a.SupplyAddresses[0].SupplyPoints[0].CallNumber, 10)}
				if diff := cmp.Diff([]string{"100", "0.25", "100", "42"}, got); diff != "" {
					t.Errorf("amps_low, multiplier, meter_number, call_number (-want +got):\n%s", diff)
				}
			}},
		{name: "the reference's example notes", edit: set("notes", referenceNotes()),
			check: func(t *testing.T, a *Account) {
				enc, _ := json.Marshal(a.Notes)
				var got []any
				if err := json.Unmarshal(enc, &got); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(referenceNotes(), got); diff != "" {
					t.Errorf("notes (-want +got):\n%s", diff)
				}
			}},
		{name: "note with unpin_at but no is_pinned", edit: del("notes.0.is_pinned")},
		{name: "note with unpin_at and is_pinned false", edit: set("notes.0.is_pinned", false)},
		{name: "note without created_at unpinned in the past", edit: edits(del("notes.0.created_at"), set("notes.0.unpin_at", "2025-06-01T00:00:00Z"))},
		{name: "document path with a leading slash", edit: set("notes.1.document_paths.0.document_path", "/letters/a.pdf"),
			check: func(t *testing.T, a *Account) {
				if p := a.Notes[1].DocumentPaths[0].DocumentPath; p != "letters/a.pdf" {
					t.Errorf("document path = %q, want letters/a.pdf", p)
				}
			}},
		{name: "day/night meter with two KWH_IMPORT registers (registers carry no id in spec 2.2.5)",
			edit: set(meter+"registers.1.register_type", "KWH_IMPORT"),
			check: func(t *testing.T, a *Account) {
				r := a.SupplyAddresses[0].SupplyPoints[0].Meters[0].Registers
				if got := []string{r[0].RegisterType, r[1].RegisterType, r[1].Multiplier.String()}; !slices.Equal(got, []string{"KWH_IMPORT", "KWH_IMPORT", "0.50"}) {
					t.Errorf("registers = %v", got)
				}
			}},
		{name: "transfer readings in every form of the reference's pattern, kept as sent",
			edit: set(elec+"transfer_readings", []any{
				map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-05-31", "value": "00512.5"},
				map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-04-30", "value": ".5"},
				map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-03-31", "value": "5."},
				map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-02-28", "value": "-.5"},
				map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-01-31", "value": "1234567890.1234567890"},
			}),
			check: func(t *testing.T, a *Account) {
				var got []string
				for _, r := range a.SupplyAddresses[0].SupplyPoints[0].TransferReadings {
					got = append(got, r.Value)
				}
				if diff := cmp.Diff([]string{"00512.5", ".5", "5.", "-.5", "1234567890.1234567890"}, got); diff != "" {
					t.Errorf("readings (-want +got):\n%s", diff)
				}
			}},
		{name: "GB postcode in any spacing and case", edit: set("supply_addresses.0.supply_postcode", " sw1a1aa "),
			check: func(t *testing.T, a *Account) {
				if a.SupplyAddresses[0].SupplyPostcode != "SW1A 1AA" {
					t.Errorf("postcode = %q", a.SupplyAddresses[0].SupplyPostcode)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := b.v.Validate(context.Background(), tc.edit(t, fixtureDoc(t)).bytes(t))
			if err != nil {
				p, _ := problem.As(err)
				t.Fatalf("refused: %v %+v", err, p)
			}
			if tc.check != nil {
				tc.check(t, a)
			}
		})
	}
}

func TestValidate_ReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := fixtureDoc(t)
	d.set(t, "external_account_number", "")
	d.set(t, "customers.0.landline", "12345")
	d.set(t, "customers.1.email", "test@brightmail.co.uk")
	d.set(t, "billing_address.fax", "0161")
	d.set(t, elec+"agreements.0.tariff_code", "E-GONE")
	d.set(t, meter+"status", strings.Repeat("L", 65))
	d.del(t, "supply_addresses.1.supply_postcode")
	d.set(t, "metadata.1.key", "legacy_account_id")
	d.set(t, "notes.1.document_paths.0.document_path", "../abs.pdf")
	_, err := b.v.Validate(context.Background(), d.bytes(t))
	errs := fieldErrors(t, err)
	want := []pair{
		{"external_account_number", "blank"},
		{"customers.0.landline", "invalid_phone_number"},
		{"customers.1.email", "possible_test_email_address"},
		{"billing_address.fax", "unknown_field"},
		{elec + "agreements.0.tariff_code", "tariff_code_not_found"},
		{meter + "status", "invalid_choice"},
		{"supply_addresses.1.supply_postcode", "required"},
		{"metadata.1.key", "metadata_has_duplicate_keys"},
		{"notes.1.document_paths.0.document_path", "invalid_document_path"},
	}
	for _, w := range want {
		if !hasPair(errs, w) {
			t.Errorf("missing %v", w)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("got %d problems, want %d: %v", len(errs), len(want), pairsOf(errs))
	}
}

func TestValidate_UnknownSupplierStillReportsEverythingItCanCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := fixtureDoc(t)
	d.set(t, "import_supplier", "NOPE")
	d.set(t, "customers.0.landline", "12345")                                         // national: needs the country, skipped
	d.set(t, "customers.0.mobile", "+44 161 496")                                     // international: checked
	d.set(t, "supply_addresses.1.supply_postcode", "not a postcode")                  // needs the country, skipped
	d.set(t, "billing_address.postal_code", "not a postcode")                         // billing country is known
	d.set(t, "business.business_contract_identifier", "BC-NOPE")                      // needs the supplier, skipped
	d.set(t, elec+"agreements.0.tariff_code", "E-GONE")                               // independent of the supplier
	d.set(t, "supply_addresses.0.supply_points.1.tank_type", strings.Repeat("P", 65)) // structural
	_, err := b.v.Validate(context.Background(), d.bytes(t))
	want := []pair{
		{"supply_addresses.0.supply_points.1.tank_type", "invalid_choice"},
		{"import_supplier", "import_supplier_not_found"},
		{"customers.0.mobile", "invalid_phone_number"},
		{"billing_address.postal_code", "invalid_postcode"},
		{elec + "agreements.0.tariff_code", "tariff_code_not_found"},
	}
	if diff := cmp.Diff(want, pairsOf(fieldErrors(t, err))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestValidate_RefusesBodiesThatAreNotAJSONObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ name, body, detail string }{
		{"truncated", `{"import_supplier": "DEMO", "customers": [`, "byte offset 42"},
		{"trailing garbage", `{} x`, "byte offset 3"},
		{"empty", ``, "byte offset 0"},
		{"array", `[{"import_supplier": "DEMO"}]`, "not array"},
		{"string", `"DEMO"`, "not string"},
		{"null", `null`, "not null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.v.Validate(context.Background(), []byte(tc.body))
			p, ok := problem.As(err)
			if !ok || p.Kind != problem.Invalid || p.Code != CodeParseError || len(p.Errors) != 0 {
				t.Fatalf("error = %#v, want Invalid %s without field problems", err, CodeParseError)
			}
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q does not contain %q", p.Detail, tc.detail)
			}
		})
	}
}

func TestValidate_DatabaseFailureIsNotAValidationProblem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.db.Close()
	_, err := b.v.Validate(context.Background(), fixture(t))
	if err == nil {
		t.Fatal("validated without a database")
	}
	if _, ok := problem.As(err); ok {
		t.Fatalf("a database failure came back as a problem: %v", err)
	}
}

// TestValidate_AcceptsAnyCodeInCodedFields: the spec lists the values of
// coded fields "in use", as examples; any upper-case code is accepted and
// kept as sent.
func TestValidate_AcceptsAnyCodeInCodedFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const wh = "supply_addresses.0.supply_points.1."
	fields := []string{
		elec + "energization_status", meter + "status", meter + "meter_type.phase", meter + "registers.0.register_type",
		elec + "transfer_readings.0.register_type", meter + "meter_type.cover_material", meter + "meter_type.base",
		wh + "tank_size", wh + "tank_type",
	}
	d := fixtureDoc(t)
	for i, f := range fields {
		d.set(t, f, fmt.Sprintf("NEW_CODE_%d", i))
	}
	d.set(t, "supply_addresses.1.supply_points.1.supply_type", "GAS")
	a, err := b.v.Validate(context.Background(), d.bytes(t))
	if err != nil {
		p, _ := problem.As(err)
		t.Fatalf("refused: %v %+v", err, p)
	}
	sp, w := a.SupplyAddresses[0].SupplyPoints[0], a.SupplyAddresses[0].SupplyPoints[1]
	m := sp.Meters[0]
	got := []string{*sp.EnergizationStatus, *m.Status, *m.MeterType.Phase, m.Registers[0].RegisterType, sp.TransferReadings[0].RegisterType,
		*m.MeterType.CoverMaterial, *m.MeterType.Base, *w.TankSize, *w.TankType}
	want := []string{"NEW_CODE_0", "NEW_CODE_1", "NEW_CODE_2", "NEW_CODE_3", "NEW_CODE_4", "NEW_CODE_5", "NEW_CODE_6", "NEW_CODE_7", "NEW_CODE_8"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	// The heat pump became a GAS supply point: its fields are kept as given.
	hp := a.SupplyAddresses[1].SupplyPoints[1]
	if hp.SupplyType != "GAS" || string(hp.Other["make_model"]) != `"Vaillant aroTHERM plus"` || hp.MakeModel != nil {
		t.Errorf("GAS supply point = %+v, other %s", hp, hp.Other)
	}
}

// TestValidate_AcceptsCodesOfAnyFormAndNumbersWithoutASourcedBound: open
// codes keep only a length limit (lower case, digits first, spaces and
// hyphens are codes too: no source fixes their form), and numbers without
// a sourced lower bound may be negative.
func TestValidate_AcceptsCodesOfAnyFormAndNumbersWithoutASourcedBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const wh = "supply_addresses.0.supply_points.1."
	values := map[string]any{
		elec + "energization_status": "on", meter + "status": "Broken", meter + "meter_type.phase": "3PH",
		meter + "registers.0.register_type": "kwh_import", elec + "transfer_readings.0.register_type": "KWH IMPORT",
		meter + "meter_type.cover_material": "wood", meter + "meter_type.base": "DIN-RAIL", wh + "tank_size": "_HUGE",
		meter + "meter_type.wire_ports": -1, meter + "registers.0.multiplier": json.Number("-1.5"),
		meter + "meter_type.amps_low": json.Number("-5"), meter + "subgroup": -2, elec + "call_number": -3,
		meter + "registers.0.whole_digits": -6,
	}
	d := fixtureDoc(t)
	for path, val := range values {
		d.set(t, path, val)
	}
	d.set(t, "supply_addresses.1.supply_points.1.supply_type", "gas")
	a, err := b.v.Validate(context.Background(), d.bytes(t))
	if err != nil {
		p, _ := problem.As(err)
		t.Fatalf("refused: %v %+v", err, p)
	}
	sp := a.SupplyAddresses[0].SupplyPoints[0]
	m := sp.Meters[0]
	got := []string{*sp.EnergizationStatus, *m.Status, *m.MeterType.Phase, m.Registers[0].RegisterType, sp.TransferReadings[0].RegisterType,
		*m.MeterType.CoverMaterial, *m.MeterType.Base, *a.SupplyAddresses[0].SupplyPoints[1].TankSize,
		strconv.FormatInt(*m.MeterType.WirePorts, 10), m.Registers[0].Multiplier.String(), m.MeterType.AmpsLow.String(),
		strconv.FormatInt(*m.Subgroup, 10), strconv.FormatInt(*sp.CallNumber, 10), strconv.FormatInt(*m.Registers[0].WholeDigits, 10),
		a.SupplyAddresses[1].SupplyPoints[1].SupplyType}
	want := []string{"on", "Broken", "3PH", "kwh_import", "KWH IMPORT", "wood", "DIN-RAIL", "_HUGE", "-1", "-1.5", "-5", "-2", "-3", "-6", "gas"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values kept (-want +got):\n%s", diff)
	}
}

// TestValidate_SupplyTypesAreACatalogueTheOperatorExtends: the reference
// refuses an unknown supply type (supply_type_not_recognised), so supply
// types are a catalogue: the spec's five from the start, others once the
// operator adds them, accepted at once. A Validator without the catalogue
// (E5's, over a payload E4 checked) does not look.
func TestValidate_SupplyTypesAreACatalogueTheOperatorExtends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	body := fixtureDoc(t).set(t, "supply_addresses.1.supply_points.1.supply_type", "UNMETERED_ELECTRICITY").bytes(t)
	_, err := b.v.Validate(ctx, body)
	if diff := cmp.Diff([]pair{{"supply_addresses.1.supply_points.1.supply_type", CodeSupplyTypeNotRecognised}}, pairsOf(fieldErrors(t, err))); diff != "" {
		t.Fatalf("unknown supply type (-want +got):\n%s", diff)
	}
	if _, err := (Validator{Catalog: b.v.Catalog, Now: b.v.Now}).Validate(ctx, body); err != nil {
		t.Errorf("a validator without the catalogue refused it: %v", err)
	}
	if _, err := b.db.Exec(`INSERT INTO supply_types (code) VALUES ('UNMETERED_ELECTRICITY')`); err != nil {
		t.Fatal(err)
	}
	a, err := b.v.Validate(ctx, body)
	if err != nil {
		p, _ := problem.As(err)
		t.Fatalf("refused once the operator added the type: %v %+v", err, p)
	}
	if sp := a.SupplyAddresses[1].SupplyPoints[1]; sp.SupplyType != "UNMETERED_ELECTRICITY" || string(sp.Other["make_model"]) != `"Vaillant aroTHERM plus"` {
		t.Errorf("supply point = %+v, other %s", sp, sp.Other)
	}
}

// referenceNotes are the notes of the reference's own E6 example
// (reference-api.md sections 7 and 10): a pinned note with an unpin_at in
// the past and no created_at, and a note naming a document.
func referenceNotes() []any {
	return []any{
		map[string]any{"body": "Some important pinned note.", "is_pinned": true, "unpin_at": "2020-06-01T12:00:00Z"},
		map[string]any{"created_at": "2020-02-01T12:00:00Z", "body": "Some important note with an attachment.",
			"document_paths": []any{map[string]any{"document_path": "some/path/to/a/document.pdf"}}},
	}
}

// A request whose client hung up stops validating at the next phase: a
// payload that needs no catalogue lookup, which used to be checked to the
// end and refused field by field, comes back as the cancellation.
func TestValidate_ACancelledRequestStopsBeforeTheChecks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := []byte(`{"customers": [{"given_name": "A", "email": "not an address", "mobile": "12345"}]}`)
	_, err := b.v.Validate(ctx, body)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Validate after the client hung up: %v, want context.Canceled", err)
	}
	if _, err := b.v.Validate(context.Background(), body); !errors.As(err, new(*problem.Error)) {
		t.Errorf("the same payload on a live request: %v, want a refusal", err)
	}
}
