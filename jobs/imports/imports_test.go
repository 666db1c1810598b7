package imports

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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

// These tests cover what the end-to-end tests in cmd/importd cannot reach
// through HTTP: the cursor's page boundaries, an emit that fails half way,
// and stagings that race with the worker for the same row.

func allVisible(string) bool { return true }

// newDB returns a fresh database with the catalogue the account fixture
// (jobs/account/testdata/account.json) needs, for each supplier code given.
func newDB(t testing.TB, suppliers ...string) *db.DB {
	t.Helper()
	d := dbtest.New(t)
	exec(t, d, `INSERT INTO products (code) VALUES ('E-1R'), ('WH-RENT'), ('HP')`)
	exec(t, d, `INSERT INTO tariffs (product_id, code) SELECT p.id, t.code
		FROM (VALUES ('E-1R-VAR-C', 'E-1R'), ('E-1R-FIX-24M-C', 'E-1R'), ('WH-RENT-STD', 'WH-RENT'), ('HP-STD', 'HP')) AS t (code, product)
		JOIN products p ON p.code = t.product`)
	for _, code := range suppliers {
		exec(t, d, `INSERT INTO import_suppliers (code) VALUES ($1)`, code)
		exec(t, d, `WITH b AS (INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
			SELECT id, 'BIZ', 'LTD', '01234567', 'Hughes Ltd' FROM import_suppliers WHERE code = $1 RETURNING id, supplier_id)
			INSERT INTO business_contracts (business_id, supplier_id, identifier) SELECT id, supplier_id, 'BC-2024-0042' FROM b`, code)
	}
	return d
}

func exec(t testing.TB, d *db.DB, q string, args ...any) {
	t.Helper()
	if _, err := d.Exec(q, args...); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
}

// fixture is the example account with the supplier and account number given.
func fixture(t testing.TB, supplier, ean string) []byte {
	t.Helper()
	b, err := os.ReadFile("../account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `"import_supplier": "DEMO"`, fmt.Sprintf("%q: %q", "import_supplier", supplier), 1)
	s = strings.Replace(s, `"external_account_number": "A-00012345"`, fmt.Sprintf("%q: %q", "external_account_number", ean), 1)
	return []byte(s)
}

// addProcesses inserts n staged processes E000001 ... for the supplier.
func addProcesses(t testing.TB, d *db.DB, supplier string, n int) {
	t.Helper()
	exec(t, d, `INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT s.id, 'E' || lpad(g::text, 6, '0'), '{}' FROM import_suppliers s, generate_series(1, $2::int) g
		WHERE s.code = $1`, supplier, n)
}

func ean(i int) string { return fmt.Sprintf("E%06d", i) }

func eans(from, to int) []string {
	out := []string{}
	for i := from; i <= to; i++ {
		out = append(out, ean(i))
	}
	return out
}

func TestList_ReadsEveryRowOnceAcrossFetchBoundaries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rows int
		page Page
		want []string
	}{
		{"no rows", 0, Page{}, eans(1, 0)},
		{"one row", 1, Page{}, eans(1, 1)},
		{"one short of a fetch", fetchSize - 1, Page{}, eans(1, fetchSize-1)},
		{"exactly one fetch", fetchSize, Page{}, eans(1, fetchSize)},
		{"one over a fetch", fetchSize + 1, Page{}, eans(1, fetchSize+1)},
		{"exactly two fetches", 2 * fetchSize, Page{}, eans(1, 2*fetchSize)},
		{"limit of exactly one fetch", 3 * fetchSize, Page{Limit: fetchSize}, eans(1, fetchSize)},
		{"limit over a fetch", 3 * fetchSize, Page{Limit: fetchSize + 1}, eans(1, fetchSize+1)},
		{"after, across a fetch boundary", 3 * fetchSize, Page{After: ean(fetchSize - 1), Limit: 2}, eans(fetchSize, fetchSize+1)},
		{"after, to the end", 2*fetchSize + 5, Page{After: ean(5)}, eans(6, 2*fetchSize+5)},
		{"limit larger than the rest", 10, Page{After: ean(8), Limit: MaxPageLimit}, eans(9, 10)},
	}
	codes := []string{}
	for i := range cases {
		codes = append(codes, fmt.Sprintf("S%d", i))
	}
	d := newDB(t, codes...)
	s := New(d)
	for i, tc := range cases {
		addProcesses(t, d, codes[i], tc.rows)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := []string{}
			err := s.List(context.Background(), codes[i], All, tc.page, allVisible, func(it Item) error {
				got = append(got, it.ExternalAccountNumber)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
		})
	}
}

// An emit that fails stops the listing: List returns its error, calls emit
// no more, and gives its connection back. The pool has one connection, so a
// transaction left open would make the next List wait until its deadline.
func TestList_StopsAtTheFirstEmitErrorAndFreesTheConnection(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	d.SetMaxOpenConns(1)
	addProcesses(t, d, "DEMO", 2*fetchSize+500)
	s := New(d)
	errStop := errors.New("client went away")
	cases := []struct {
		name   string
		stopAt int // emit fails on this call (1-based)
		cancel bool
	}{
		{"first item", 1, false},
		{"last item of the first fetch", fetchSize, false},
		{"first item of the second fetch", fetchSize + 1, false},
		{"last item", 2*fetchSize + 500, false},
		{"context cancelled by emit", fetchSize + 7, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			err := s.List(ctx, "DEMO", All, Page{}, allVisible, func(Item) error {
				calls++
				if calls == tc.stopAt {
					if tc.cancel {
						cancel()
						return ctx.Err()
					}
					return errStop
				}
				return nil
			})
			want := errStop
			if tc.cancel {
				want = context.Canceled
			}
			if !errors.Is(err, want) {
				t.Errorf("List returned %v, want %v", err, want)
			}
			if calls != tc.stopAt {
				t.Errorf("emit called %d times, want %d", calls, tc.stopAt)
			}
			// The one connection must be free again.
			ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel2()
			n := 0
			if err := s.List(ctx2, "DEMO", Pending, Page{Limit: 3}, allVisible, func(Item) error { n++; return nil }); err != nil || n != 3 {
				t.Errorf("next List: %d items, %v", n, err)
			}
		})
	}
}

func TestList_UnknownOrInvisibleSupplierIsNotFound(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	cases := []struct {
		name, supplier string
		visible        func(string) bool
	}{
		{"unknown supplier", "NOPE", allVisible},
		{"invisible supplier", "DEMO", func(code string) bool { return code != "DEMO" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			called := false
			err := s.List(context.Background(), tc.supplier, All, Page{}, tc.visible, func(Item) error { called = true; return nil })
			p, ok := problem.As(err)
			if !ok || p.Kind != problem.NotFound || p.Code != CodeImportSupplierNotFound {
				t.Fatalf("List: %v, want NotFound %s", err, CodeImportSupplierNotFound)
			}
			if called {
				t.Error("emit was called")
			}
		})
	}
}

func TestStage_CreatedOnlyByTheFirstStaging(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	for i, want := range []bool{true, false, false} {
		res, err := s.Stage(context.Background(), fixture(t, "DEMO", "A-1"), allVisible)
		if err != nil {
			t.Fatalf("staging %d: %v", i+1, err)
		}
		if diff := cmp.Diff(StageResult{ImportSupplier: "DEMO", ExternalAccountNumber: "A-1", Created: want}, res); diff != "" {
			t.Errorf("staging %d (-want +got):\n%s", i+1, diff)
		}
	}
}

// The staged payload is stored compressed with lz4, which costs PostgreSQL
// a quarter of the CPU of its default compression for each staging.
func TestStage_PayloadIsStoredWithLZ4(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	if _, err := New(d).Stage(context.Background(), fixture(t, "DEMO", "A-1"), allVisible); err != nil {
		t.Fatal(err)
	}
	var method sql.NullString
	if err := d.Get(&method, `SELECT pg_column_compression(payload) FROM import_processes`); err != nil {
		t.Fatal(err)
	}
	if method.String != "lz4" {
		t.Errorf("the staged payload is compressed with %q, want lz4", method.String)
	}
}

// The stored payload is the normalised account, the value json.Marshal
// writes for it, with text that encoding/json escapes for HTML (a note's
// "<" and "&", inside a supply point and out).
func TestStage_PayloadIsTheNormalisedAccount(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	ctx := context.Background()
	body := strings.Replace(string(fixture(t, "DEMO", "A-1")), `"Cupboard under the stairs"`, `"Cupboard <under> the stairs & hall"`, 1)
	body = strings.Replace(body, `"Customer asked for paper bills until the end of 2025."`, `"<b>Paper</b> bills & letters \u2028 only."`, 1)
	acc, err := s.Validator(allVisible).Validate(ctx, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(acc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(want), `\u003cunder\u003e`) || !strings.Contains(string(want), `\u003cb\u003ePaper`) {
		t.Fatalf("the edits did not reach the payload: %s", want)
	}
	if _, err := s.Stage(ctx, []byte(body), allVisible); err != nil {
		t.Fatal(err)
	}
	var same bool
	if err := d.Get(&same, `SELECT payload = $1::jsonb FROM import_processes`, string(want)); err != nil {
		t.Fatal(err)
	}
	if !same {
		var got string
		_ = d.Get(&got, `SELECT payload::text FROM import_processes`)
		t.Errorf("stored payload differs from json.Marshal's:\n got %s\nwant %s", got, want)
	}
}

// The worker changes an import process while a staging of the same account
// waits for the row: the upsert then declines, and the refusal must say why
// from the row as it is now, not fail as an internal error because the
// statement's snapshot still shows a stageable row.
func TestStage_RowChangedByTheWorkerDuringTheStagingIsRefusedWithItsReason(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	cases := []struct {
		name, set, code string
		extra           map[string]any
	}{
		{"marked in progress", `status = 'IN_PROGRESS'`, CodeInProgress, nil},
		{"account created", `status = 'COMPLETED', service_account_number = 'A-0000BEEF', account_created_at = now()`, CodeAlreadyImported,
			map[string]any{"service_account_number": "A-0000BEEF"}},
	}
	for i, tc := range cases {
		ean := fmt.Sprintf("RACE-%d", i)
		if _, err := s.Stage(context.Background(), fixture(t, "DEMO", ean), allVisible); err != nil {
			t.Fatal(err)
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The worker's transaction holds the row while the staging runs.
			tx, err := d.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback() //nolint:errcheck // committed below unless the test failed
			var pid int
			if err := tx.GetContext(ctx, &pid, `SELECT pg_backend_pid()`); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE import_processes SET `+tc.set+` WHERE external_account_number = $1`, ean); err != nil {
				t.Fatal(err)
			}
			body := fixture(t, "DEMO", ean)
			done := make(chan error, 1)
			go func() {
				_, err := s.Stage(ctx, body, allVisible)
				done <- err
			}()
			// Commit only once the staging waits for the row lock.
			for {
				var waiting bool
				if err := d.GetContext(ctx, &waiting, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
					WHERE datname = current_database() AND $1 = ANY (pg_blocking_pids(pid)))`, pid); err != nil {
					t.Fatal(err)
				}
				if waiting {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("the staging did not wait for the row: %v", err)
				case <-time.After(10 * time.Millisecond):
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			err = <-done
			p, ok := problem.As(err)
			if !ok || p.Kind != problem.Invalid || p.Code != tc.code {
				t.Fatalf("staging: %v, want Invalid %s", err, tc.code)
			}
			for k, v := range tc.extra {
				if p.Extra[k] != v {
					t.Errorf("%s = %v, want %v", k, p.Extra[k], v)
				}
			}
		})
	}
}

// E3 answers an imported account as the reference's validate endpoint does
// (reference-api.md 4.3 and 10): 400 with both account numbers; a staged
// account that is not imported, and an invalid payload, are answered as
// before.
func TestValidate_ImportedAccountIsRefusedWithBothNumbers(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	ctx := context.Background()
	for _, ean := range []string{"STAGED", "IMPORTED"} {
		if _, err := s.Stage(ctx, fixture(t, "DEMO", ean), allVisible); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, d, `UPDATE import_processes SET status = 'COMPLETED', service_account_number = 'A-0000BEEF', account_created_at = now()
		WHERE external_account_number = 'IMPORTED'`)

	for _, ean := range []string{"NEW", "STAGED"} {
		if _, err := s.Validate(ctx, fixture(t, "DEMO", ean), allVisible); err != nil {
			t.Errorf("%s: %v", ean, err)
		}
	}

	_, err := s.Validate(ctx, fixture(t, "DEMO", "IMPORTED"), allVisible)
	p, ok := problem.As(err)
	if !ok {
		t.Fatalf("imported account: %v, want a *problem.Error", err)
	}
	detail := "The account import process with the account number IMPORTED has already been imported."
	want := problem.Record{Code: CodeAlreadyImported, Detail: detail,
		Errors: []problem.FieldError{{Detail: detail, Code: CodeAlreadyImported, Attr: "non_field_errors"}},
		Extra:  map[string]any{"external_account_number": "IMPORTED", "service_account_number": "A-0000BEEF"}}
	if diff := cmp.Diff(want, p.ToRecord()); p.Kind != problem.Invalid || diff != "" {
		t.Errorf("imported account: kind %v (-want +got):\n%s", p.Kind, diff)
	}

	broken := strings.Replace(string(fixture(t, "DEMO", "IMPORTED")), `"unknown_occupier": false`, `"unknown_occupier": "no"`, 1)
	_, err = s.Validate(ctx, []byte(broken), allVisible)
	if p, ok := problem.As(err); !ok || p.Code != account.CodeFailedValidation {
		t.Errorf("invalid payload of an imported account: %v, want %s first", err, account.CodeFailedValidation)
	}
}
