package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

func statement(id, from, to string) obj {
	return obj{"statement_id": id, "number": "N-" + id, "bill_period_from_date": from, "bill_period_to_date": to,
		"issued_date": to, "gross_amount": num("123.4")}
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
	{name: "periods of the request share a day", sts: []obj{statement("S1", "2025-01-01", "2025-01-31"), statement("S2", "2025-01-31", "2025-02-28")},
		want: []want{{CodeStatementPeriodsOverlap, "statements.1.bill_period_from_date"}}},
	{name: "period overlaps one the account has (an adjacent one does not)", before: []obj{statement("S1", "2025-01-01", "2025-01-31")},
		sts:  []obj{statement("S2", "2025-02-01", "2025-02-28"), statement("S3", "2025-01-10", "2025-01-20")},
		want: []want{{CodeStatementPeriodsOverlap, "statements.1.bill_period_from_date"}}},
	{name: "period ends tomorrow", sts: []obj{with(statement("S1", "2025-06-01", "2025-06-16"), "issued_date", "2025-06-15")},
		want: []want{{CodeStatementInFuture, "statements.0.bill_period_to_date"}}},
	{name: "issued tomorrow", sts: []obj{with(statement("S1", "2025-05-01", "2025-05-31"), "issued_date", "2025-06-16")},
		want: []want{{CodeStatementInFuture, "statements.0.issued_date"}}},
	{name: "path leaving the root", sts: []obj{with(statement("S1", "2025-01-01", "2025-01-31"), "statement_path", "../other/s1.pdf")},
		want: []want{{CodeInvalidDocumentPath, "statements.0.statement_path"}}},
	{name: "document not in the store", sts: []obj{with(statement("S1", "2025-01-01", "2025-01-31"), "statement_path", "statements/missing.pdf")},
		want: []want{{CodeDocumentNotFound, "statements.0.statement_path"}}},
	{name: "gross amount with three places", sts: []obj{with(statement("S1", "2025-01-01", "2025-01-31"), "gross_amount", num("1.234"))},
		want: []want{{CodeAmountPrecision, "statements.0.gross_amount"}}},
	{name: "missing and mistyped fields", sts: []obj{{"statement_id": 7, "bill_period_from_date": "2025-13-01", "bill_period_to_date": "2025-01-31",
		"issued_date": "2025-01-31", "gross_amount": "12.00", "pdf": "x"}},
		want: []want{{"invalid", "statements.0.statement_id"}, {"required", "statements.0.number"}, {"invalid_date", "statements.0.bill_period_from_date"},
			{"invalid", "statements.0.gross_amount"}, {"unknown_field", "statements.0.pdf"}}},
	{name: "statements missing", raw: `{"import_supplier": "ACME", "external_account_number": %q}`, want: []want{{"required", "statements"}}},
	{name: "too many statements", raw: `{"import_supplier": "ACME", "external_account_number": %q, "statements": [` +
		strings.TrimSuffix(strings.Repeat(`{},`, MaxStatements+1), ",") + `]}`,
		want: func() []want {
			w := []want{{CodeTooManyItems, "statements"}}
			for i := 0; i <= MaxStatements; i++ {
				for _, f := range []string{"bill_period_from_date", "bill_period_to_date", "gross_amount", "issued_date", "number", "statement_id"} {
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
		with(statement("S1", "2025-01-01", "2025-01-31"), "statement_path", "statements/2025-01.pdf", "gross_amount", num("-12.5")),
		statement("S2", "2025-02-01", "2025-02-28"))
	res, err := b.svc.CreateStatements(context.Background(), req, visible)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res)
	want := fmt.Sprintf(`{"import_supplier":"ACME","external_account_number":%q,"statements":[`+
		`{"statement_id":"S1","number":"N-S1","bill_period_from_date":"2025-01-01","bill_period_to_date":"2025-01-31","issued_date":"2025-01-31","gross_amount":"-12.50","statement_path":"statements/2025-01.pdf"},`+
		`{"statement_id":"S2","number":"N-S2","bill_period_from_date":"2025-02-01","bill_period_to_date":"2025-02-28","issued_date":"2025-02-28","gross_amount":"123.40"}]}`, ean)
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	var rows []string
	if err := b.db.Select(&rows, `SELECT statement_id || ' ' || bill_period_from_date || ' ' || bill_period_to_date || ' ' || gross_amount || ' ' || COALESCE(statement_path, '-')
		FROM historical_statements ORDER BY statement_id`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"S1 2025-01-01 2025-01-31 -12.50 statements/2025-01.pdf", "S2 2025-02-01 2025-02-28 123.40 -"}, rows); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	// Statements do not touch the ledger.
	if bal := b.balance(t, ean); bal != "0.00" {
		t.Errorf("balance = %s", bal)
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
