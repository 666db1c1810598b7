package postimport

import (
	"context"
	"testing"
	"time"
)

// "Today" is dated in the supplier's time zone. At testNow (12:30 UTC on
// 15 June) it is already 16 June on Kiritimati (UTC+14): a transaction, or
// a statement's end, dated 16 June is in the future for a supplier in UTC
// and today for one in Pacific/Kiritimati, whose open statement period
// runs to 16 June. An account without a billing history opens on its
// creation date in its supplier's zone: created at 20:00 UTC on 9 March,
// the 10th in Sydney.
func TestToday_IsDatedInTheSuppliersTimeZone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	setZone := func(zone string) {
		t.Helper()
		if _, err := b.db.Exec(`UPDATE import_suppliers SET time_zone = $1 WHERE code = $2`, zone, supplierCode); err != nil {
			t.Fatal(err)
		}
		b.svc.zones = newZones(b.db, time.Now) // forget the zone remembered before
	}
	noForce := query("force_add_to_current_statement=false")

	utc := b.newAccount(t, acct{lastBilled: "2025-05-31"})
	_, err := b.svc.CreateTransactions(ctx, txBody(t, utc, charge("T1", "2025-06-16", "1")), noForce, visible)
	wantProblems(t, err, []want{{CodeTransactionInFuture, "transactions.0.transaction_date"}})
	_, err = b.svc.CreateStatements(ctx, stBody(t, utc, statement("S1", "2025-06-01", "2025-06-16")), visible)
	wantProblems(t, err, []want{{CodeStatementInFuture, "statements.0.bill_period_to_date"}})

	setZone("Pacific/Kiritimati")
	ahead := b.newAccount(t, acct{lastBilled: "2025-05-31"})
	if _, err := b.svc.CreateTransactions(ctx, txBody(t, ahead, charge("T1", "2025-06-16", "1")), noForce, visible); err != nil {
		t.Errorf("a transaction dated today in the supplier's zone: %v", err)
	}
	if _, err := b.svc.CreateStatements(ctx, stBody(t, ahead, statement("S1", "2025-06-01", "2025-06-16")), visible); err != nil {
		t.Errorf("a statement ending today in the supplier's zone: %v", err)
	}
	_, err = b.svc.CreateTransactions(ctx, txBody(t, ahead, charge("T2", "2025-06-17", "1")), noForce, visible)
	wantProblems(t, err, []want{{CodeTransactionInFuture, "transactions.0.transaction_date"}})

	setZone("Australia/Sydney")
	sydney := b.newAccount(t, acct{createdAt: time.Date(2025, 3, 9, 20, 0, 0, 0, time.UTC)})
	_, err = b.svc.CreateTransactions(ctx, txBody(t, sydney, charge("T1", "2025-03-09", "1")), noForce, visible)
	wantProblems(t, err, []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}})
	if _, err := b.svc.CreateTransactions(ctx, txBody(t, sydney, charge("T2", "2025-03-10", "1")), noForce, visible); err != nil {
		t.Errorf("a transaction on the account's creation date in Sydney: %v", err)
	}
}
