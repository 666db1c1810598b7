package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/imports"
)

// An account created with a ledger in its payload shows the ledger's
// transactions among E7's, the balance they make, and the ledger's last
// statement.
func TestAccountShow_PrintsThePayloadLedger(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	d := c.db()
	c.ok("supplier", "create", "DEMO")
	c.ok("team", "create", "Ops")
	c.ok("product", "create", "ELEC", "--tariff", "E-1R-VAR-C", "--tariff", "E-1R-FIX-24M-C")
	c.ok("product", "create", "HEAT", "--tariff", "WH-RENT-STD", "--tariff", "HP-STD")
	raw, err := os.ReadFile("../../jobs/account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	var payload map[string]json.RawMessage
	if err := json.Unmarshal(raw, &payload); err != nil {
		t.Fatal(err)
	}
	delete(payload, "business") // its contract is not the matter here
	// The last statement closed on 2025-05-31 in credit 15.00; a charge of
	// 30.00 since then leaves the customer owing 15.00.
	payload["ledgers"] = json.RawMessage(`[{
		"historical_statement_transactions": [
			{"transaction_id": "H1", "transaction_date": "2025-05-10", "amount": "10.00", "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT"},
			{"transaction_id": "H2", "transaction_date": "2025-05-20", "amount": 5, "type": "CREDIT", "reason": "GOODWILL"}],
		"current_statement_transactions": [
			{"transaction_id": "C1", "transaction_date": "2025-06-05", "amount": "30.00", "type": "CHARGE", "reason": "IMPORTED_CHARGE"}],
		"last_statement_closing_date": "2025-05-31", "last_statement_issue_date": "2025-06-02",
		"last_statement_balance": "15.00", "ledger_balance": "-15.00"}]`)
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := imports.New(d).Stage(ctx, body, everyone); err != nil {
		t.Fatalf("E4: %v", err)
	}
	p := jobs.AccountProcessPayload{SupplierCode: "DEMO", ExternalAccountNumber: "A-00012345"}
	if err := d.QueryRow(`SELECT p.id, p.supplier_id, (SELECT id FROM operations_teams) FROM import_processes p`).
		Scan(&p.ProcessID, &p.SupplierID, &p.OperationsTeamID); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	if err := creation.NewCreator(d, rdb, account.NewCatalog(d, nil), nil, creation.NewAnnouncer(rdb, log), log).Run(ctx, p, true); err != nil {
		t.Fatalf("E5: %v", err)
	}

	out := c.ok("account", "show", "DEMO", "A-00012345")
	for _, want := range []string{
		`(?m)^2025-05-10\s+H1\s+PAYMENT\s+10\.00\s+-10\.00\s`, `(?m)^2025-05-20\s+H2\s+CREDIT\s+5\.00\s+-5\.00\s`,
		`(?m)^2025-06-05\s+C1\s+CHARGE\s+30\.00\s+\+30\.00\s`,
		`(?m)^Balance\s+15\.00 `, `(?m)^Sum of the transactions\s+15\.00$`,
		`(?m)^Last statement closed\s+2025-05-31$`, `(?m)^Last statement issued\s+2025-06-02$`,
		`(?m)^Last statement balance\s+15\.00 \(as sent: credit positive\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("account show has no line matching %s:\n%s", want, out)
		}
	}
}
