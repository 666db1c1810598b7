package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

func statement(id, from, to string) obj {
	return obj{"statement_id": id, "number": "N-" + id, "bill_period_from_date": from, "bill_period_to_date": to,
		"issued_date": to, "gross_amount": num("12340")}
}

func stBody(t testing.TB, ean string, sts ...obj) []byte {
	return body(t, obj{"import_supplier": supplierCode, "external_account_number": ean, "statements": sts})
}

type stRuleCase struct {
	name   string
	before []obj
	sts    []obj
	raw    string
	want   []want
}

var stRuleCases = []stRuleCase{
	{name: "statement id twice in one request", sts: []obj{statement("S1", "2025-01-01", "2025-01-31"), statement("S1", "2025-02-01", "2025-02-28")},
		want: []want{{CodeDuplicateStatementIDs, "statements.1.statement_id"}}},
	{name: "statement id the account has", before: []obj{statement("S1", "2025-01-01", "2025-01-31")},
		sts:  []obj{statement("S2", "2025-02-01", "2025-02-28"), statement("S1", "2025-01-01", "2025-01-31")},
		want: []want{{CodeStatementExists, "statements.1.statement_id"}}},
	{name: "period ends before it starts", sts: []obj{statement("S1", "2025-02-01", "2025-01-31")},
		want: []want{{CodeStartAfterEnd, "statements.0.bill_period_from_date"}}},
	{name: "period ends tomorrow", sts: []obj{with(statement("S1", "2025-06-01", "2025-06-16"), "issued_date", "2025-06-15")},
		want: []want{{CodeStatementInFuture, "statements.0.bill_period_to_date"}}},
	{name: "path leaving the root", sts: []obj{with(statement("S1", "2025-01-01", "2025-01-31"), "statement_path", "../other/s1.pdf")},
		want: []want{{CodeInvalidDocumentPath, "statements.0.statement_path"}}},
	{name: "document not in the store", sts: []obj{with(statement("S1", "2025-01-01", "2025-01-31"), "statement_path", "statements/missing.pdf")},
		want: []want{{CodeDocumentNotFound, "statements.0.statement_path"}}},
	{name: "gross amount with a fraction (it is in the lowest denomination)", sts: []obj{with(statement("S1", "2025-01-01", "2025-01-31"), "gross_amount", num("12.34"))},
		want: []want{{"invalid", "statements.0.gross_amount"}}},
	{name: "gross amount beyond 64 bits", sts: []obj{with(statement("S1", "2025-01-01", "2025-01-31"), "gross_amount", num("-9223372036854775809"))},
		want: []want{{CodeAmountOutOfRange, "statements.0.gross_amount"}}},
	{name: "missing and mistyped fields", sts: []obj{{"statement_id": 7, "bill_period_from_date": "2025-13-01",
		"issued_date": "2025-01-32", "gross_amount": "1200", "number": 1, "pdf": "x"}},
		want: []want{{"invalid", "statements.0.statement_id"}, {"invalid", "statements.0.number"}, {"invalid_date", "statements.0.bill_period_from_date"},
			{"required", "statements.0.bill_period_to_date"}, {"invalid_date", "statements.0.issued_date"},
			{"invalid", "statements.0.gross_amount"}, {"unknown_field", "statements.0.pdf"}}},
	{name: "statements missing", raw: `{"import_supplier": "ACME", "external_account_number": %q}`, want: []want{{"required", "statements"}}},
	{name: "too many statements", raw: `{"import_supplier": "ACME", "external_account_number": %q, "statements": [` +
		strings.TrimSuffix(strings.Repeat(`{},`, MaxStatements+1), ",") + `]}`,
		want: func() []want {
			// The statement beyond the limit is never built, so it has no
			// problems of its own.
			w := []want{{CodeTooManyItems, "statements"}}
			for i := 0; i < MaxStatements; i++ {
				for _, f := range []string{"bill_period_from_date", "bill_period_to_date", "statement_id"} {
					w = append(w, want{"required", fmt.Sprintf("statements.%d.%s", i, f)})
				}
			}
			return w
		}()},
}

func statementCaseCodes() []want {
	var w []want
	for _, c := range stRuleCases {
		w = append(w, c.want...)
	}
	return w
}

func TestStatements_RulesRefuseTheWholeRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range stRuleCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ean := b.newAccount(t, acct{})
			if len(tc.before) > 0 {
				if _, err := b.svc.CreateStatements(ctx, stBody(t, ean, tc.before...), visible); err != nil {
					t.Fatalf("before: %v", err)
				}
			}
			req := stBody(t, ean, tc.sts...)
			if tc.raw != "" {
				req = []byte(fmt.Sprintf(tc.raw, ean))
			}
			res, err := b.svc.CreateStatements(ctx, req, visible)
			if err == nil {
				t.Fatalf("accepted: %+v", res)
			}
			p := wantProblems(t, err, tc.want)
			if p.Code != CodeStatementsFailed {
				t.Errorf("top-level code %q", p.Code)
			}
			n := b.count(t, `SELECT count(*) FROM historical_statements h JOIN accounts a ON a.id = h.account_id WHERE a.external_account_number = $1`, ean)
			if n != len(tc.before) {
				t.Errorf("%d statements stored, want the %d from before", n, len(tc.before))
			}
		})
	}
}

func TestStatements_CreatedAndAnsweredAsValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	b.put(t, "statements/2025-01.pdf")
	req := stBody(t, ean,
		with(statement("S1", "2025-01-01", "2025-02-01"), "statement_path", "statements/2025-01.pdf", "gross_amount", num("-1250")),
		statement("S2", "2025-02-01", "2025-03-01"),
		obj{"statement_id": "S3", "bill_period_from_date": "2025-03-01", "bill_period_to_date": "2025-04-01"},
		with(statement("S4", "2025-04-01", "2025-05-01"), "gross_amount", num("100.0")))
	res, err := b.svc.CreateStatements(context.Background(), req, visible)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res)
	want := fmt.Sprintf(`{"import_supplier":"ACME","external_account_number":%q,"statements":[`+
		`{"statement_id":"S1","number":"N-S1","bill_period_from_date":"2025-01-01","bill_period_to_date":"2025-02-01","issued_date":"2025-02-01","gross_amount":-1250,"statement_path":"statements/2025-01.pdf"},`+
		`{"statement_id":"S2","number":"N-S2","bill_period_from_date":"2025-02-01","bill_period_to_date":"2025-03-01","issued_date":"2025-03-01","gross_amount":12340},`+
		`{"statement_id":"S3","bill_period_from_date":"2025-03-01","bill_period_to_date":"2025-04-01"},`+
		`{"statement_id":"S4","number":"N-S4","bill_period_from_date":"2025-04-01","bill_period_to_date":"2025-05-01","issued_date":"2025-05-01","gross_amount":100}]}`, ean)
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	var rows []string
	if err := b.db.Select(&rows, `SELECT concat_ws(' ', statement_id, COALESCE(number, '-'), bill_period_from_date, bill_period_to_date,
			COALESCE(issued_date::text, '-'), COALESCE(gross_amount::text, '-'), COALESCE(statement_path, '-'))
		FROM historical_statements ORDER BY statement_id`); err != nil {
		t.Fatal(err)
	}
	wantRows := []string{
		"S1 N-S1 2025-01-01 2025-02-01 2025-02-01 -1250 statements/2025-01.pdf",
		"S2 N-S2 2025-02-01 2025-03-01 2025-03-01 12340 -",
		"S3 - 2025-03-01 2025-04-01 - - -",
		"S4 N-S4 2025-04-01 2025-05-01 2025-05-01 100 -",
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	// Statements do not touch the ledger.
	if bal := b.balance(t, ean); bal != "0.00" {
		t.Errorf("balance = %s", bal)
	}
}

// Periods are half-open and overlaps are not refused: consecutive
// statements share their boundary day, within a request and across
// requests, and a re-issued bill may cover part of an earlier one.
func TestStatements_SharedBoundaryDaysAndOverlapsAreAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ean := b.newAccount(t, acct{})
	for _, sts := range [][]obj{
		{statement("S1", "2025-01-01", "2025-02-01"), statement("S2", "2025-02-01", "2025-03-01")},
		{statement("S3", "2025-03-01", "2025-04-01")},
		{statement("S4", "2025-03-15", "2025-03-20")},
		{statement("S5", "2025-06-15", "2025-06-15")},
	} {
		if _, err := b.svc.CreateStatements(ctx, stBody(t, ean, sts...), visible); err != nil {
			t.Errorf("%v refused: %v", sts, err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM historical_statements`); n != 5 {
		t.Errorf("%d statements stored, want 5", n)
	}
}

func TestStatements_AccountNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range notFoundCases(t, b) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := body(t, obj{"import_supplier": tc.supplier, "external_account_number": tc.ean,
				"statements": []obj{statement("S1", "2025-01-01", "2025-01-31")}})
			_, err := b.svc.CreateStatements(context.Background(), req, visible)
			if p := problemOf(t, err, problem.NotFound); p.Code != CodeAccountNotFound {
				t.Errorf("code %q", p.Code)
			}
		})
	}
}

// Without a document store, a statement_path cannot be checked: 503, and
// statements without a path still work.
func TestStatements_WithoutDocumentStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := New(b.db, nil)
	svc.now = b.svc.now
	ean := b.newAccount(t, acct{})
	_, err := svc.CreateStatements(context.Background(),
		stBody(t, ean, with(statement("S1", "2025-01-01", "2025-01-31"), "statement_path", "s.pdf")), visible)
	if p := problemOf(t, err, problem.Unavailable); p.Code != CodeDocumentStoreNotConfigured {
		t.Errorf("code %q", p.Code)
	}
	if _, err := svc.CreateStatements(context.Background(), stBody(t, ean, statement("S1", "2025-01-01", "2025-01-31")), visible); err != nil {
		t.Errorf("statement without a path: %v", err)
	}
}

// A request with a statement the account has is refused at that
// statement's index alone, and writes none of its statements.
func TestStatements_AStatementTheAccountHasIsRefusedAtItsIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ean := b.newAccount(t, acct{})
	if _, err := b.svc.CreateStatements(ctx, stBody(t, ean, statement("S2", "2025-02-01", "2025-03-01")), visible); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.CreateStatements(ctx, stBody(t, ean, statement("S1", "2025-01-01", "2025-02-01"),
		statement("S2", "2025-02-01", "2025-03-01"), statement("S3", "2025-03-01", "2025-04-01")), visible)
	if p := wantProblems(t, err, []want{{CodeStatementExists, "statements.1.statement_id"}}); p.Code != CodeStatementsFailed {
		t.Errorf("top-level code %q", p.Code)
	}
	var ids []string
	if err := b.db.Select(&ids, `SELECT statement_id FROM historical_statements ORDER BY statement_id`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"S2"}, ids); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// A request waits for another import on the same account and then sees
// its statement.
func TestStatements_RequestWaitsForAnotherImportOnTheAccount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	err := b.whileHeld(t, ean, func(tx *sqlx.Tx, id int64) {
		if _, err := tx.Exec(`INSERT INTO historical_statements (account_id, statement_id, bill_period_from_date, bill_period_to_date)
			VALUES ($1, 'S1', '2025-01-01', '2025-02-01')`, id); err != nil {
			t.Fatal(err)
		}
	}, func() error {
		_, err := b.svc.CreateStatements(context.Background(), stBody(t, ean, statement("S0", "2024-12-01", "2025-01-01"),
			statement("S1", "2025-01-01", "2025-02-01")), visible)
		return err
	})
	wantProblems(t, err, []want{{CodeStatementExists, "statements.1.statement_id"}})
	if n := b.count(t, `SELECT count(*) FROM historical_statements`); n != 1 {
		t.Errorf("%d statements, want the other import's 1", n)
	}
}

// Requests that post the same statements to one account at once write
// them once: one of them is answered 201, and every other, which finds
// them once it holds the lock, is refused at each of their indexes.
func TestStatements_ConcurrentPostsOfTheSameStatementsWriteThemOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	req := stBody(t, ean, statement("S1", "2025-01-01", "2025-02-01"), statement("S2", "2025-02-01", "2025-03-01"))
	const posts = 8
	errs := make([]error, posts)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range posts {
		wg.Go(func() {
			<-start
			_, errs[i] = b.svc.CreateStatements(context.Background(), req, visible)
		})
	}
	close(start)
	wg.Wait()
	var written int
	for _, err := range errs {
		if err == nil {
			written++
			continue
		}
		wantProblems(t, err, []want{{CodeStatementExists, "statements.0.statement_id"}, {CodeStatementExists, "statements.1.statement_id"}})
	}
	if written != 1 {
		t.Errorf("%d posts were answered 201, want 1", written)
	}
	if n := b.count(t, `SELECT count(*) FROM historical_statements`); n != 2 {
		t.Errorf("%d statements, want 2", n)
	}
}
