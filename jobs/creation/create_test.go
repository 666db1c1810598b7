package creation

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// createToday is "now" for the creation tests, so that the fixtures' dates
// stay valid.
var createToday = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)

// seedCatalogue writes the catalogue rows the fixtures need: supplier DEMO
// (GB, with migration e-mails) with its business contract, supplier
// TENTACLE_ENERGY (US) of the reference's example, their tariffs and team
// Ops.
func seedCatalogue(t testing.TB, d *db.DB) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO import_suppliers (code, country, document_root, migration_emails) VALUES
			('DEMO', 'GB', 'imports/demo', true), ('TENTACLE_ENERGY', 'US', '', false)`,
		`INSERT INTO products (code) VALUES ('P')`,
		`INSERT INTO tariffs (product_id, code) SELECT p.id, c FROM products p,
			unnest(ARRAY['E-1R-VAR-C', 'E-1R-FIX-24M-C', 'WH-RENT-STD', 'HP-STD', 'ELEC-1234-J', 'WATER_PRODUCT', 'LP-STD']) AS c`,
		`INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_name, company_number)
			SELECT id, 'BIZ-DEMO', 'LTD', 'Demo Ltd', '00001' FROM import_suppliers WHERE code = 'DEMO'`,
		`INSERT INTO business_contracts (business_id, supplier_id, identifier)
			SELECT id, supplier_id, 'BC-2024-0042' FROM businesses`,
		`INSERT INTO operations_teams (name) VALUES ('Ops')`,
	} {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
}

// createFixtures are payloads that between them fill every table account
// creation writes: the fixture (with a business, notes with documents and
// migration e-mails), the reference's own example (a supply type without a
// layout of its own, no business), and the fixture with light and pole
// supply points and no billing address.
func createFixtures(t testing.TB) map[string]createFixture {
	t.Helper()
	read := func(name string) map[string]any {
		b, err := os.ReadFile("../account/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	enc := func(m map[string]any) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lights := read("account.json")
	delete(lights, "billing_address")
	lights["unknown_occupier"] = true
	delete(lights, "customers") // an unknown occupier has none
	// ... and one supply address at most (reference 6.1): the first one,
	// with a light and a pole beside its electricity and water heater.
	first := lights["supply_addresses"].([]any)[0].(map[string]any)
	first["supply_points"] = append(first["supply_points"].([]any),
		map[string]any{"supply_type": "LIGHT", "supply_start_date": "2020-01-01", "serial_number": "L-1",
			"secondary_serial_number": "L-1B", "manufacturer_name": "Lumen", "model_name": "X", "location": "North",
			"product_note": "LED", "installed_at": "2019-12-01",
			"agreements": []any{map[string]any{"tariff_code": "LP-STD", "effective_from": "2020-01-01"}}},
		map[string]any{"supply_type": "POLE", "supply_start_date": "2020-01-01", "serial_number": "P-1",
			"agreements": []any{map[string]any{"tariff_code": "LP-STD", "effective_from": "2020-01-01"}}})
	lights["supply_addresses"] = []any{first}
	// The fixture carries statements as the reference's GB account example
	// has them, and one with every field.
	fixture := read("account.json")
	fixture["statements"] = []any{
		map[string]any{"bill_period_from_date": "2019-06-01", "bill_period_to_date": "2019-07-01",
			"statement_path": "/EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "statement_id": "54321"},
		map[string]any{"bill_period_from_date": "2019-07-01", "bill_period_to_date": "2019-08-01",
			"statement_path": "/EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf", "statement_id": "12345"},
		map[string]any{"statement_id": "S-3", "number": "A-0003", "bill_period_from_date": "2019-08-01",
			"bill_period_to_date": "2019-09-01", "issued_date": "2019-09-02", "gross_amount": 12345, "statement_path": "s/3.pdf"},
	}
	return map[string]createFixture{
		"fixture": {enc(fixture), []string{"registers", "transfer_readings", "heat_pump_supply_points",
			"water_heater_supply_points", "note_documents", "email_outbox", "customer_phone_numbers", "customer_user_details",
			"historical_statements"}},
		"reference": {enc(read("reference_account.json")), []string{"notes", "account_metadata"}},
		"lights":    {enc(lights), []string{"light_pole_supply_points", "electricity_supply_points", "agreements"}},
	}
}

// createFixture is a payload and the tables it must fill, besides accounts.
type createFixture struct {
	payload []byte
	fills   []string
}

// createTables are the tables account creation writes, with the columns
// that differ between two databases for reasons other than the writer
// (defaults of now()) left out.
var createTables = map[string][]string{
	"import_processes": {"created_at", "updated_at"}, "accounts": nil, "ledgers": nil, "customers": nil,
	"customer_phone_numbers": nil, "customer_user_details": nil, "supply_addresses": nil, "supply_points": nil,
	"electricity_supply_points": nil, "heat_pump_supply_points": nil, "light_pole_supply_points": nil,
	"water_heater_supply_points": nil, "meters": nil, "registers": nil, "agreements": nil, "transfer_readings": nil,
	"account_metadata": nil, "notes": nil, "note_documents": nil, "email_outbox": {"created_at"},
	"historical_statements": {"created_at"},
}

// dumpAccounts returns every row of createTables as JSON, ids included,
// with the service account number replaced by a placeholder.
func dumpAccounts(t testing.TB, d *db.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	var number string
	if err := d.Get(&number, `SELECT service_account_number FROM accounts`); err != nil {
		t.Fatal(err)
	}
	for table, skip := range createTables {
		var rows []string
		q := `SELECT (to_jsonb(t) - $1::text[])::text AS r FROM ` + table + ` t ORDER BY 1`
		if err := d.Select(&rows, q, "{"+strings.Join(skip, ",")+"}"); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		for i := range rows {
			rows[i] = strings.ReplaceAll(rows[i], number, "A-NUMBER")
		}
		out[table] = rows
	}
	return out
}

// stageProcess writes the staged row account creation refers to.
func stageProcess(t testing.TB, d *db.DB, supplier string, payload []byte) int64 {
	t.Helper()
	var id int64
	if err := d.Get(&id, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
		SELECT id, 'X-1', $2, 'IN_PROGRESS' FROM import_suppliers WHERE code = $1 RETURNING id`, supplier, payload); err != nil {
		t.Fatal(err)
	}
	return id
}

func validateForCreate(t testing.TB, d *db.DB, payload []byte) *account.Account {
	t.Helper()
	acc, err := account.Validator{Catalog: account.NewCatalog(d, nil), Now: func() time.Time { return createToday }}.Validate(context.Background(), payload)
	if err != nil {
		pe, _ := problem.As(err)
		t.Fatalf("validate: %v %+v", err, pe.Errors)
	}
	return acc
}

// The set-based statement writes exactly the rows, ids included, that the
// row-by-row writer it replaced wrote for the same account, and records the
// process as the worker did.
func TestCreateAccount_WritesTheRowsOfTheRowByRowWriter(t *testing.T) {
	t.Parallel()
	for name, fx := range createFixtures(t) {
		payload := fx.payload
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var supplier struct {
				Code string `json:"import_supplier"`
			}
			_ = json.Unmarshal(payload, &supplier)
			write := func(create func(d *db.DB, tx *db.Tx, acc *account.Account, opt options) error) map[string][]string {
				d := dbtest.New(t)
				seedCatalogue(t, d)
				acc := validateForCreate(t, d, payload)
				opt := options{ProcessID: stageProcess(t, d, supplier.Code, payload), Now: createToday.Add(time.Hour)}
				if err := d.Get(&opt.OperationsTeamID, `SELECT id FROM operations_teams`); err != nil {
					t.Fatal(err)
				}
				if err := db.InTx(ctx, d, func(tx *db.Tx) error { return create(d, tx, acc, opt) }); err != nil {
					t.Fatal(err)
				}
				return dumpAccounts(t, d)
			}
			want := write(func(_ *db.DB, tx *db.Tx, acc *account.Account, opt options) error {
				c, err := createAccountRowByRow(ctx, tx, acc, opt)
				if err != nil {
					return err
				}
				_, err = tx.Exec(`UPDATE import_processes SET status = 'COMPLETED', service_account_number = $2,
					account_created_at = $3, last_error = NULL WHERE id = $1`, opt.ProcessID, c.ServiceAccountNumber, c.CreatedAt)
				return err
			})
			var outbox []int64
			got := write(func(d *db.DB, tx *db.Tx, acc *account.Account, opt options) error {
				c, err := CreateAccount(ctx, tx, acc, opt)
				outbox = c.Outbox
				return err
			})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rows (-row by row +set-based):\n%s", diff)
			}
			if n := len(want["email_outbox"]); len(outbox) != n {
				t.Errorf("created.Outbox lists %d rows, want %d", len(outbox), n)
			}
			for _, table := range append(fx.fills, "accounts") {
				if len(want[table]) == 0 {
					t.Errorf("the payload writes no row in %s: it no longer checks that table", table)
				}
			}
		})
	}
}

// A tariff or business contract deleted between validation and creation
// refuses the account with the code validation would have given, and the
// caller's rollback leaves nothing behind.
func TestCreateAccount_CatalogueChangedSinceValidationIsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, remove, code string
	}{
		{"tariff", `DELETE FROM tariffs WHERE code = 'HP-STD'`, "tariff_code_not_found"},
		{"business contract", `DELETE FROM business_contracts`, "business_contract_not_found"},
	}
	payload := createFixtures(t)["fixture"].payload
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := dbtest.New(t)
			seedCatalogue(t, d)
			acc := validateForCreate(t, d, payload)
			opt := options{ProcessID: stageProcess(t, d, "DEMO", payload), Now: createToday}
			if err := d.Get(&opt.OperationsTeamID, `SELECT id FROM operations_teams`); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Exec(tc.remove); err != nil {
				t.Fatal(err)
			}
			err := db.InTx(ctx, d, func(tx *db.Tx) error {
				_, err := CreateAccount(ctx, tx, acc, opt)
				return err
			})
			pe, ok := problem.As(err)
			if !ok || pe.Kind != problem.Invalid || pe.Code != tc.code {
				t.Fatalf("CreateAccount: %v, want a problem %s", err, tc.code)
			}
			var n int
			if err := d.Get(&n, `SELECT (SELECT count(*) FROM accounts) + (SELECT count(*) FROM customers)
				+ (SELECT count(*) FROM import_processes WHERE status = 'COMPLETED')`); err != nil || n != 0 {
				t.Errorf("%d rows left behind (%v)", n, err)
			}
		})
	}
}
