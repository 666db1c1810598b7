package payment

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// A verification whose worker stored the instruction but whose announcement
// never came (the worker died after its commit, or the announcement was
// published while the API's subscription was away) is answered once the
// instruction is found in PostgreSQL, not after the whole wait.
func TestCreateForAccount_LostAnnouncementIsNoticedInPostgreSQL(t *testing.T) {
	t.Parallel()
	b := setup(t, false) // no worker: nothing announces anything
	b.account(t, b.demo, "ACC-1", 0)
	// The whole wait is far longer than the generous bound below, so that
	// an answer at its end fails however slow the machine.
	const wait = 5 * time.Minute
	b.svc = New(b.db, b.tasks, Config{QueueWait: wait, Log: slog.New(slog.DiscardHandler)})
	time.AfterFunc(300*time.Millisecond, func() {
		_, _ = b.db.Exec(`INSERT INTO payment_instructions (supplier_id, account_id, vendor_id, reference, type, vendor_status, verified_at)
			SELECT a.supplier_id, a.id, v.id, 'CARD-11', 'CARD', 'ACTIVE', now()
			FROM accounts a, payment_vendors v WHERE a.external_account_number = 'ACC-1' AND v.name = $1`, vendorOK)
	})
	start := time.Now()
	_, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody("ACC-1", vendorOK, "CARD-11", TypeCard)), visible)
	if err != nil {
		t.Fatalf("CreateForAccount = %v, want the stored instruction claimed", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("stored instruction noticed after %v, want well before the end of the %v wait", d, wait)
	}
}
