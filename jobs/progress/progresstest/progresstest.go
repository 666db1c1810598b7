// Package progresstest seeds a migration cohort for the tests of the
// progress page. It moves each import process through the same statements
// the service runs (staging, E5's IN_PROGRESS mark, the worker's completion
// or recorded failure), so the counters are kept by the triggers exactly as
// in production.
package progresstest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Supplier and Other are the suppliers of the cohort. Other's accounts must
// never show on Supplier's page, and the other way round.
const (
	Supplier = "ACME"
	Other    = "OTHER"
)

// Error codes and attrs of the cohort's failures.
const (
	CodePhone    = "invalid_phone_number"
	AttrPhone    = "customers.0.mobile"
	CodePostcode = "invalid_postcode"
	AttrPostcode = "supply_addresses.0.supply_postcode"
	CodeTariff   = "tariff_code_not_found"
	AttrTariff   = "supply_points.0.agreements.0.tariff_code"
	CodeOther    = "secret_other_code"
	// CodeNotOngoing is the refusal of a staging while the supplier is
	// not Ongoing (jobs/imports), at AttrNotOngoing.
	CodeNotOngoing = "import_supplier_migration_not_ongoing"
	AttrNotOngoing = "import_supplier"
)

// Cohort of Supplier (Ongoing): 3 staged, 2 in progress, 4 completed and 5
// failed accounts, and 2 skip marks. The failures: ACME-F1 has a phone and a
// postcode error, ACME-F2 (which failed twice, first on its tariff) and
// ACME-F3 a phone error, ACME-F4 a tariff error and ACME-F5 an internal
// error without field errors. Other (Paused) has one completed account and
// one failed with CodeOther. Failures recorded: 6 for Supplier.
func Seed(t testing.TB, d *db.DB) {
	t.Helper()
	ctx := context.Background()
	s := seeder{t: t, ctx: ctx, d: d}
	s.exec(`INSERT INTO import_suppliers (code) VALUES ($1)`, Supplier)
	s.exec(`INSERT INTO import_suppliers (code, status) VALUES ($1, 'Paused')`, Other)
	for i := 1; i <= 3; i++ {
		s.stage(Supplier, fmt.Sprintf("ACME-S%d", i))
	}
	for i := 1; i <= 2; i++ {
		s.inProgress(s.stage(Supplier, fmt.Sprintf("ACME-P%d", i)))
	}
	for i := 1; i <= 4; i++ {
		s.complete(s.stage(Supplier, fmt.Sprintf("ACME-C%d", i)), i)
	}
	phone := problem.FieldError{Code: CodePhone, Attr: AttrPhone, Detail: "Not a phone number."}
	postcode := problem.FieldError{Code: CodePostcode, Attr: AttrPostcode, Detail: "Not a postcode."}
	tariff := problem.FieldError{Code: CodeTariff, Attr: AttrTariff, Detail: "No such tariff."}
	s.fail(s.stage(Supplier, "ACME-F1"), validation(phone, postcode))
	f2 := s.stage(Supplier, "ACME-F2")
	s.fail(f2, validation(tariff))
	s.fail(f2, validation(phone))
	s.fail(s.stage(Supplier, "ACME-F3"), validation(phone))
	s.fail(s.stage(Supplier, "ACME-F4"), validation(tariff))
	s.fail(s.stage(Supplier, "ACME-F5"), problem.Record{Code: problem.CodeInternal, Detail: "Account creation failed after retries.", Errors: []problem.FieldError{}})
	s.exec(`INSERT INTO skipped_accounts (supplier_id, external_account_number)
		SELECT id, n FROM import_suppliers, unnest(ARRAY['ACME-K1', 'ACME-K2']) n WHERE code = $1`, Supplier)

	s.complete(s.stage(Other, "OTHER-C1"), 99)
	s.fail(s.stage(Other, "OTHER-F1"), validation(problem.FieldError{Code: CodeOther, Attr: "secret_other_attr", Detail: "Other's detail."}))
}

func validation(errs ...problem.FieldError) problem.Record {
	return problem.Record{Code: "account_failed_validation", Detail: "The account failed validation.", Errors: errs}
}

type seeder struct {
	t   testing.TB
	ctx context.Context
	d   *db.DB
}

func (s seeder) exec(q string, args ...any) {
	s.t.Helper()
	if _, err := s.d.ExecContext(s.ctx, q, args...); err != nil {
		s.t.Fatalf("seed: %s: %v", q, err)
	}
}

// stage inserts the staged process as E4 does and returns its id.
func (s seeder) stage(supplier, ean string) int64 {
	s.t.Helper()
	var id int64
	err := s.d.GetContext(s.ctx, &id, `INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT id, $2, '{}' FROM import_suppliers WHERE code = $1 RETURNING id`, supplier, ean)
	if err != nil {
		s.t.Fatalf("seed: stage %s: %v", ean, err)
	}
	return id
}

func (s seeder) inProgress(id int64) {
	s.t.Helper()
	s.exec(`UPDATE import_processes SET status = 'IN_PROGRESS', updated_at = now() WHERE id = $1 AND service_account_number IS NULL`, id)
}

func (s seeder) complete(id int64, n int) {
	s.t.Helper()
	s.inProgress(id)
	s.exec(`UPDATE import_processes SET status = 'COMPLETED', service_account_number = $2,
		account_created_at = now(), last_error = NULL, updated_at = now() WHERE id = $1`, id, fmt.Sprintf("A-%08X", id*1000+int64(n)))
}

func (s seeder) fail(id int64, rec problem.Record) {
	s.t.Helper()
	s.inProgress(id)
	b, _ := json.Marshal(rec)
	s.exec(`UPDATE import_processes SET status = 'UNKNOWN', last_error = $2, updated_at = now()
		WHERE id = $1 AND service_account_number IS NULL`, id, b)
}

// SeedRefusals adds accounts refused at staging to the cohort of Seed:
// ACME-R1 refused at E3 (step validate) for a phone number, and ACME-R2
// refused at E4 (step stage) while the supplier was not Ongoing, the
// latter refused a moment after the former; and OTHER-R1, refused at E4
// with CodeOther, which must never show on Supplier's page. Each is
// written as jobs/imports writes a refusal: an upsert of the account's one
// row, through the triggers that count it.
func SeedRefusals(t testing.TB, d *db.DB) {
	t.Helper()
	s := seeder{t: t, ctx: context.Background(), d: d}
	s.refuse(Supplier, "ACME-R1", "validate", validation(problem.FieldError{Code: CodePhone, Attr: AttrPhone, Detail: "Not a phone number."}))
	notOngoing := problem.FieldError{Code: CodeNotOngoing, Attr: AttrNotOngoing, Detail: "Import supplier ACME is Paused; it does not accept accounts."}
	s.refuse(Supplier, "ACME-R2", "stage", problem.Record{Code: notOngoing.Code, Detail: notOngoing.Detail, Errors: []problem.FieldError{notOngoing}})
	s.refuse(Other, "OTHER-R1", "stage", validation(problem.FieldError{Code: CodeOther, Attr: "secret_other_attr", Detail: "Other's detail."}))
}

func (s seeder) refuse(supplier, ean, step string, rec problem.Record) {
	s.t.Helper()
	b, _ := json.Marshal(rec)
	s.exec(`INSERT INTO staging_refusals (supplier_id, external_account_number, step, error, refused_at)
		SELECT id, $2, $3, $4, now() FROM import_suppliers WHERE code = $1
		ON CONFLICT (supplier_id, external_account_number) DO UPDATE
			SET step = EXCLUDED.step, error = EXCLUDED.error, refused_at = EXCLUDED.refused_at`, supplier, ean, step, b)
}
