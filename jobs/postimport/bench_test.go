package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Each benchmark imports benchAccounts requests of benchItems items per
// iteration, one request per account, one after the other, and reports
// items per second. Its PlainSQL twin inserts the same rows with one plain
// multi-row INSERT per account and nothing else: the floor that the
// import's parsing, validation, locking, lookups and bookkeeping add to.
// The SideBySide benchmarks alternate the two account by account, so that
// both see the same load of a shared machine, and report their ratio.
const (
	benchAccounts = 100
	benchItems    = 100
)

// benchRows returns the transactions of one account in one iteration; ids
// carry the iteration so that every iteration adds new rows.
func benchRows(iter, acc int) []obj {
	txs := make([]obj, benchItems)
	for k := range txs {
		txs[k] = charge(fmt.Sprintf("B%d-%d-%d", iter, acc, k), fmt.Sprintf("2025-06-%02d", 1+k%15), fmt.Sprintf("%d.%02d", k, k%100))
	}
	return txs
}

// benchStatements returns the historical statements of one account in one
// iteration, with new ids in every iteration.
func benchStatements(iter, acc int) []obj {
	sts := make([]obj, benchItems)
	for k := range sts {
		from := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, k, 0)
		sts[k] = statement(fmt.Sprintf("S%d-%d-%d", iter, acc, k), from.Format(time.DateOnly), from.AddDate(0, 1, 0).Format(time.DateOnly))
	}
	return sts
}

// benchNotes returns the notes of one account in one iteration: new bodies
// in every iteration, so that each is created.
func benchNotes(iter, acc int) []obj {
	notes := make([]obj, benchItems)
	for k := range notes {
		notes[k] = obj{"body": fmt.Sprintf("Migrated note %d-%d-%d: the customer called about the meter reading.", iter, acc, k),
			"created_at": "2025-03-01T10:00:00Z"}
	}
	return notes
}

// workload is one endpoint's side of the comparison.
type workload struct {
	// request returns the body of account acc's request in iteration iter.
	request func(t testing.TB, ean string, iter, acc int) []byte
	// send is the endpoint's service call.
	send func(ctx context.Context, svc *Service, body []byte) error
	// plain returns the same rows as a plain INSERT: its statement and
	// arguments.
	plain func(accountID int64, iter, acc int) (string, []any)
}

var workloads = map[string]workload{
	"E6": {
		request: func(t testing.TB, ean string, iter, acc int) []byte {
			return notesBody(t, ean, benchNotes(iter, acc)...)
		},
		send: func(ctx context.Context, svc *Service, body []byte) error {
			_, err := svc.CreateNotes(ctx, body, visible)
			return err
		},
		plain: func(id int64, iter, acc int) (string, []any) {
			var args []any
			for _, n := range benchNotes(iter, acc) {
				args = append(args, id, n["body"], n["created_at"])
			}
			return plainInsert(`notes (account_id, body, created_at)`, 3), args
		},
	},
	"E7": {
		request: func(t testing.TB, ean string, iter, acc int) []byte { return txBody(t, ean, benchRows(iter, acc)...) },
		send: func(ctx context.Context, svc *Service, body []byte) error {
			_, err := svc.CreateTransactions(ctx, body, nil, visible)
			return err
		},
		plain: func(id int64, iter, acc int) (string, []any) {
			var args []any
			for _, t := range benchRows(iter, acc) {
				args = append(args, id, t["transaction_id"], t["transaction_date"], string(t["amount"].(json.Number)),
					t["type"], t["reason"], t["display_note"], t["note"])
			}
			return plainInsert(`transactions (account_id, transaction_id, transaction_date, amount, type, reason, display_note, note)`, 8), args
		},
	},
	"E8": {
		request: func(t testing.TB, ean string, iter, acc int) []byte {
			return stBody(t, ean, benchStatements(iter, acc)...)
		},
		send: func(ctx context.Context, svc *Service, body []byte) error {
			_, err := svc.CreateStatements(ctx, body, visible)
			return err
		},
		plain: func(id int64, iter, acc int) (string, []any) {
			var args []any
			for _, s := range benchStatements(iter, acc) {
				args = append(args, id, s["statement_id"], s["number"], s["bill_period_from_date"], s["bill_period_to_date"],
					s["issued_date"], string(s["gross_amount"].(json.Number)))
			}
			return plainInsert(`historical_statements (account_id, statement_id, number, bill_period_from_date, bill_period_to_date, issued_date, gross_amount)`, 7), args
		},
	},
}

// plainInsert returns INSERT INTO target VALUES with benchItems rows of
// cols placeholders each.
func plainInsert(target string, cols int) string {
	var q strings.Builder
	q.WriteString("INSERT INTO " + target + " VALUES ")
	for k := range benchItems {
		if k > 0 {
			q.WriteString(", ")
		}
		q.WriteByte('(')
		for c := range cols {
			if c > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "$%d", k*cols+c+1)
		}
		q.WriteByte(')')
	}
	return q.String()
}

// benchAccountsOf creates benchAccounts accounts billed to May 2025 and
// returns their external numbers and row ids.
func benchAccountsOf(b *testing.B, bd *bundle) ([]string, []int64) {
	eans, ids := make([]string, benchAccounts), make([]int64, benchAccounts)
	for i := range eans {
		eans[i] = bd.newAccount(b, billedToMay)
		if err := bd.db.Get(&ids[i], `SELECT id FROM accounts WHERE external_account_number = $1`, eans[i]); err != nil {
			b.Fatal(err)
		}
	}
	return eans, ids
}

// benchService runs w's endpoint and reports items per second.
func benchService(b *testing.B, w workload) {
	bd := setup(b)
	eans, _ := benchAccountsOf(b, bd)
	ctx := context.Background()
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		bodies := make([][]byte, benchAccounts)
		for i, ean := range eans {
			bodies[i] = w.request(b, ean, iter, i)
		}
		b.StartTimer()
		for _, req := range bodies {
			if err := w.send(ctx, bd.svc, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchAccounts*benchItems)/b.Elapsed().Seconds(), "rows/s")
}

// benchPlain inserts w's rows with plain INSERTs and reports rows per
// second. They run unprepared, on the *sqlx.DB under db.DB, as a client
// that does not prepare would send them.
func benchPlain(b *testing.B, w workload) {
	bd := setup(b)
	_, ids := benchAccountsOf(b, bd)
	ctx := context.Background()
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		stmts, args := make([]string, benchAccounts), make([][]any, benchAccounts)
		for i, id := range ids {
			stmts[i], args[i] = w.plain(id, iter, i)
		}
		b.StartTimer()
		for i := range ids {
			if _, err := bd.db.DB.ExecContext(ctx, stmts[i], args[i]...); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchAccounts*benchItems)/b.Elapsed().Seconds(), "rows/s")
}

// benchSideBySide alternates w's endpoint and the plain INSERT of the same
// rows (onto other accounts of the same database), account by account, and
// reports both rates and the endpoint's as a fraction of the plain one.
func benchSideBySide(b *testing.B, w workload) {
	bd := setup(b)
	eans, _ := benchAccountsOf(b, bd)
	_, ids := benchAccountsOf(b, bd)
	ctx := context.Background()
	var service, plain time.Duration
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		for i := range benchAccounts {
			b.StopTimer()
			req := w.request(b, eans[i], iter, i)
			stmt, args := w.plain(ids[i], iter, i)
			b.StartTimer()
			start := time.Now()
			if err := w.send(ctx, bd.svc, req); err != nil {
				b.Fatal(err)
			}
			mid := time.Now()
			if _, err := bd.db.DB.ExecContext(ctx, stmt, args...); err != nil {
				b.Fatal(err)
			}
			service += mid.Sub(start)
			plain += time.Since(mid)
		}
	}
	rows := float64(b.N * benchAccounts * benchItems)
	b.ReportMetric(rows/service.Seconds(), "rows/s")
	b.ReportMetric(rows/plain.Seconds(), "plain-rows/s")
	b.ReportMetric(plain.Seconds()/service.Seconds(), "ratio")
}

// BenchmarkTransactions is E7: 100 accounts × 100 transactions per
// iteration through CreateTransactions (parse, validate, lock, look up,
// insert, ledger update, commit).
func BenchmarkTransactions(b *testing.B) { benchService(b, workloads["E7"]) }

// BenchmarkTransactionsPlainSQL is E7's floor.
func BenchmarkTransactionsPlainSQL(b *testing.B) { benchPlain(b, workloads["E7"]) }

// BenchmarkStatements is E8: 100 accounts × 100 historical statements.
func BenchmarkStatements(b *testing.B) { benchService(b, workloads["E8"]) }

// BenchmarkStatementsPlainSQL is E8's floor.
func BenchmarkStatementsPlainSQL(b *testing.B) { benchPlain(b, workloads["E8"]) }

// BenchmarkNotes is E6: 100 accounts × 100 notes without documents.
func BenchmarkNotes(b *testing.B) { benchService(b, workloads["E6"]) }

// BenchmarkNotesPlainSQL is E6's floor.
func BenchmarkNotesPlainSQL(b *testing.B) { benchPlain(b, workloads["E6"]) }

// BenchmarkSideBySide runs each endpoint alternately with its floor and
// reports the ratio (targets: E7 ≥ 0.80).
func BenchmarkSideBySide(b *testing.B) {
	for _, name := range []string{"E6", "E7", "E8"} {
		b.Run(name, func(b *testing.B) { benchSideBySide(b, workloads[name]) })
	}
}
