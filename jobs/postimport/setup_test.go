package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"
	_ "gocloud.dev/blob/fileblob" // file:// document stores

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// testNow is "now" for every test, so that dates in cases stay meaningful.
var testNow = time.Date(2025, 6, 15, 12, 30, 45, 0, time.UTC)

const (
	supplierCode = "ACME"
	hiddenCode   = "HIDDEN" // exists, but the test callers may not see it
	laxCode      = "LAX"    // does not require documents
	docRoot      = "imports/acme"
	productCode  = "ELEC-STD"
)

// visible is the key scope of the test caller: every supplier but HIDDEN.
func visible(code string) bool { return code != hiddenCode }

// bundle is one test's database, document store and service.
type bundle struct {
	db   *db.DB
	url  string // the database's, for a pool of a test's own
	docs *documents.Store
	svc  *Service
}

// setup returns a fresh database with suppliers ACME (which requires
// documents), LAX (which does not, the default) and HIDDEN, team ops and
// product ELEC-STD, a file:// document store in a temporary directory, and
// a Service whose clock is testNow. Subtests share one bundle and make
// accounts of their own.
func setup(t testing.TB) *bundle {
	t.Helper()
	ctx := context.Background()
	dbURL := dbtest.NewDatabase(t)
	d, err := db.Open(ctx, dbURL, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for _, q := range []string{
		`INSERT INTO import_suppliers (code, document_root, require_documents) VALUES ('ACME', 'imports/acme', true), ('HIDDEN', '', false)`,
		`INSERT INTO import_suppliers (code, document_root) VALUES ('LAX', 'imports/lax')`,
		`INSERT INTO operations_teams (name) VALUES ('ops')`,
		`INSERT INTO products (code) VALUES ('ELEC-STD')`,
	} {
		if _, err := d.ExecContext(ctx, q); err != nil {
			t.Fatalf("setup: %v\n%s", err, q)
		}
	}
	docs, err := documents.Open(ctx, "file://"+t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docs.Close() })
	svc := New(d, docs)
	svc.now = func() time.Time { return testNow }
	return &bundle{db: d, url: dbURL, docs: docs, svc: svc}
}

// acct describes a test account. The zero value is an ACME account created
// on 2025-01-10 without a last billed date.
type acct struct {
	supplier   string
	lastBilled string    // last_billed_to_date, "" for NULL
	createdAt  time.Time // zero: 2025-01-10
	// closing is the last_statement_closing_date of the ledger the
	// account's payload carried, "" for none.
	closing string
}

var accountSeq atomic.Int64

// newAccount creates an imported account the way E5 leaves one (import
// process COMPLETED, account row, zero ledger) and returns its external
// account number.
func (b *bundle) newAccount(t testing.TB, a acct) string {
	t.Helper()
	n := accountSeq.Add(1)
	ean := fmt.Sprintf("EXT-%d", n)
	if a.supplier == "" {
		a.supplier = supplierCode
	}
	if a.createdAt.IsZero() {
		a.createdAt = time.Date(2025, 1, 10, 9, 0, 0, 0, time.UTC)
	}
	var lastBilled, closing *string
	if a.lastBilled != "" {
		lastBilled = &a.lastBilled
	}
	if a.closing != "" {
		closing = &a.closing
	}
	_, err := b.db.ExecContext(context.Background(), `
		WITH p AS (
			INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
			SELECT id, $2, '{}', 'COMPLETED', $3, $4 FROM import_suppliers WHERE code = $1 RETURNING id, supplier_id),
		a AS (
			INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id,
				operations_team_id, billing_country, last_billed_to_date, created_at)
			SELECT $3, p.supplier_id, $2, p.id, (SELECT id FROM operations_teams WHERE name = 'ops'), 'GB', $5::date, $4 FROM p
			RETURNING id)
		INSERT INTO ledgers (account_id, last_statement_closing_date) SELECT id, $6::date FROM a`,
		a.supplier, ean, fmt.Sprintf("A-%08X", n), a.createdAt, lastBilled, closing)
	if err != nil {
		t.Fatalf("new account: %v", err)
	}
	return ean
}

// stagedAccount stages an account that E5 has not created.
func (b *bundle) stagedAccount(t testing.TB) string {
	t.Helper()
	ean := fmt.Sprintf("STAGED-%d", accountSeq.Add(1))
	_, err := b.db.ExecContext(context.Background(), `INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT id, $1, '{}' FROM import_suppliers WHERE code = 'ACME'`, ean)
	if err != nil {
		t.Fatal(err)
	}
	return ean
}

// put places a document under ACME's root.
func (b *bundle) put(t testing.TB, path string) {
	t.Helper()
	if _, err := b.docs.Put(context.Background(), docRoot, path, strings.NewReader("%PDF-1.4 "+path)); err != nil {
		t.Fatal(err)
	}
}

// count returns one integer from q.
func (b *bundle) count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.GetContext(context.Background(), &n, q, args...); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return n
}

// txCount returns how many transactions the account has.
func (b *bundle) txCount(t testing.TB, ean string) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM transactions t JOIN accounts a ON a.id = t.account_id WHERE a.external_account_number = $1`, ean)
}

// balance returns the ledger balance of the account as text.
func (b *bundle) balance(t testing.TB, ean string) string {
	t.Helper()
	var s string
	if err := b.db.GetContext(context.Background(), &s, `SELECT l.balance::text FROM ledgers l JOIN accounts a ON a.id = l.account_id
		WHERE a.external_account_number = $1`, ean); err != nil {
		t.Fatal(err)
	}
	return s
}

// body encodes a request. json.Number keeps amounts exactly as written.
func body(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type obj = map[string]any

// num is a JSON number written exactly as s.
func num(s string) json.Number { return json.Number(s) }

// problemOf asserts that err is a *problem.Error of the kind and returns it.
func problemOf(t testing.TB, err error, kind problem.Kind) *problem.Error {
	t.Helper()
	if err == nil {
		t.Fatal("no error, want one")
	}
	p, ok := problem.As(err)
	if !ok || p.Kind != kind {
		t.Fatalf("error %v (%T), want a problem of kind %d", err, err, kind)
	}
	return p
}

// want is an expected problem: its code at its attr.
type want struct{ Code, Attr string }

// problems returns the code and attr of each problem, sorted, so that cases
// compare regardless of the order rules run in.
func problems(p *problem.Error) []want {
	out := make([]want, len(p.Errors))
	for i, e := range p.Errors {
		out[i] = want{e.Code, e.Attr}
	}
	slices.SortFunc(out, func(a, b want) int { return strings.Compare(a.Attr+" "+a.Code, b.Attr+" "+b.Code) })
	return out
}

func sortWants(w []want) []want {
	w = slices.Clone(w)
	slices.SortFunc(w, func(a, b want) int { return strings.Compare(a.Attr+" "+a.Code, b.Attr+" "+b.Code) })
	return w
}

// wantProblems fails unless err is an Invalid problem with exactly the
// expected codes at the expected attrs, each with a detail.
func wantProblems(t testing.TB, err error, wants []want) *problem.Error {
	t.Helper()
	p := problemOf(t, err, problem.Invalid)
	if diff := cmp.Diff(sortWants(wants), problems(p)); diff != "" {
		t.Errorf("problems (-want +got):\n%s\nfull error: %v", diff, p.Errors)
	}
	for _, e := range p.Errors {
		if e.Detail == "" {
			t.Errorf("problem %s at %s has no detail", e.Code, e.Attr)
		}
	}
	return p
}

// query builds E7's query string.
func query(s string) url.Values {
	q, err := url.ParseQuery(s)
	if err != nil {
		panic(err)
	}
	return q
}

// testedCodes collects the codes that rule cases expect, for
// TestRules_EveryRuleIsTested.
func testedCodes() map[string]bool {
	m := map[string]bool{}
	for _, set := range [][]want{noteCaseCodes(), transactionCaseCodes(), statementCaseCodes(), notFoundCodes} {
		for _, w := range set {
			m[w.Code] = true
		}
	}
	return m
}

// whileHeld runs request while another transaction, which has locked the
// account's row as an import request does, stays open for a moment, writes
// through write and commits. It returns request's error. A request that
// does not wait for the lock would not see what write wrote; one that read
// the account before the lock was granted would not either.
func (b *bundle) whileHeld(t testing.TB, ean string, write func(tx *sqlx.Tx, accountID int64), request func() error) error {
	t.Helper()
	tx, err := b.db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.Get(&id, `SELECT id FROM accounts WHERE external_account_number = $1 FOR NO KEY UPDATE`, ean); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- request() }()
	select {
	case err := <-done:
		t.Fatalf("the request finished (%v) while another import held the account", err)
	case <-time.After(200 * time.Millisecond):
	}
	write(tx, id)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return <-done
}
