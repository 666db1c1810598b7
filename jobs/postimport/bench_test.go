package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const (
	benchAccounts     = 100
	benchTransactions = 100
)

// benchRows returns the transactions of one account in one iteration; ids
// carry the iteration so that every iteration adds new rows.
func benchRows(iter, acc int) []obj {
	txs := make([]obj, benchTransactions)
	for k := range txs {
		txs[k] = charge(fmt.Sprintf("B%d-%d-%d", iter, acc, k), fmt.Sprintf("2025-06-%02d", 1+k%15), fmt.Sprintf("%d.%02d", k, k%100))
	}
	return txs
}

// BenchmarkTransactions imports 100 accounts × 100 transactions per
// iteration through CreateTransactions (parse, validate, lock, look up,
// insert, ledger update, commit; one request per account, one after the
// other) and reports transactions per second. Compare with
// BenchmarkTransactionsPlainSQL, which inserts the same rows and nothing
// else.
func BenchmarkTransactions(b *testing.B) {
	bd := setup(b)
	eans := make([]string, benchAccounts)
	for i := range eans {
		eans[i] = bd.newAccount(b, billedToMay)
	}
	ctx := context.Background()
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		bodies := make([][]byte, benchAccounts)
		for i, ean := range eans {
			bodies[i] = txBody(b, ean, benchRows(iter, i)...)
		}
		b.StartTimer()
		for _, req := range bodies {
			if _, err := bd.svc.CreateTransactions(ctx, req, nil, visible); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchAccounts*benchTransactions)/b.Elapsed().Seconds(), "tx/s")
}

// BenchmarkTransactionsPlainSQL inserts the same rows as
// BenchmarkTransactions with one plain multi-row INSERT per account: the
// floor that the import's validation and bookkeeping add to.
func BenchmarkTransactionsPlainSQL(b *testing.B) {
	bd := setup(b)
	ids := make([]int64, benchAccounts)
	for i := range ids {
		ean := bd.newAccount(b, billedToMay)
		if err := bd.db.Get(&ids[i], `SELECT id FROM accounts WHERE external_account_number = $1`, ean); err != nil {
			b.Fatal(err)
		}
	}
	const cols = 8
	var q strings.Builder
	q.WriteString(`INSERT INTO transactions (account_id, transaction_id, transaction_date, amount, type, reason, display_note, note) VALUES `)
	for k := range benchTransactions {
		if k > 0 {
			q.WriteString(", ")
		}
		n := k * cols
		fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
	}
	stmt := q.String()
	ctx := context.Background()
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		args := make([][]any, benchAccounts)
		for i := range ids {
			for _, t := range benchRows(iter, i) {
				args[i] = append(args[i], ids[i], t["transaction_id"], t["transaction_date"], string(t["amount"].(json.Number)),
					t["type"], t["reason"], t["display_note"], t["note"])
			}
		}
		b.StartTimer()
		for i := range ids {
			if _, err := bd.db.ExecContext(ctx, stmt, args[i]...); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchAccounts*benchTransactions)/b.Elapsed().Seconds(), "tx/s")
}
