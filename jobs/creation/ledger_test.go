package creation

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// ledgerPayload is the fixture (billed to 2025-05-31) with a ledger: the
// last statement, closed on 2025-05-31, is 15.00 in credit (a payment of
// 10.00 and a credit of 5.00), and the current statement holds a supply
// charge of 53.24 of product P (44.0 net and 9.24 VAT): the customer owes
// 38.24.
func ledgerPayload(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	decode(t, b, &m)
	var ledger any
	decode(t, []byte(`{
		"historical_statement_transactions": [
			{"transaction_id": "H1", "transaction_date": "2025-05-10", "amount": "10.00", "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT"},
			{"transaction_id": "H2", "transaction_date": "2025-05-20", "amount": 5, "type": "CREDIT", "reason": "GOODWILL"}],
		"current_statement_transactions": [
			{"transaction_id": "S1", "transaction_date": "2025-06-03", "amount": 53.24, "type": "SUPPLY_CHARGE", "product_code": "P",
			 "line_items": [{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-10",
			   "number_of_units": 4.0, "net_amount": 44.0, "price_per_unit": 11.0, "units": [4.0, 8.0]}],
			 "tax_items": [{"amount": 9.24, "tax_type": "VAT", "value_taxed": 44.0, "rate": 0.21, "unit_type": "PROPORTION"}]}],
		"last_statement_closing_date": "2025-05-31", "last_statement_issue_date": "2025-06-02",
		"last_statement_balance": "15.00", "ledger_balance": "-38.24"}`), &ledger)
	m["ledgers"] = []any{ledger}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decode reads JSON with its numbers as written (4.0 stays 4.0).
func decode(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatal(err)
	}
}

// The payload's ledger is written with the account, in its transaction:
// its transactions as E7 writes them (line and tax items included), the
// balance they make, its last statement, and the open statement period
// that starts the day after the closing date.
func TestCreateAccount_LedgerIsStoredWithTheAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	seedCatalogue(t, d)
	payload := ledgerPayload(t)
	acc := validateForCreate(t, d, payload)
	opt := options{ProcessID: stageProcess(t, d, "DEMO", payload), Now: createToday}
	if err := d.Get(&opt.OperationsTeamID, `SELECT id FROM operations_teams`); err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, d, func(tx *db.Tx) error {
		_, err := CreateAccount(ctx, tx, acc, opt)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var ledger []string
	if err := d.Select(&ledger, `SELECT concat_ws(' | ', l.balance, l.last_statement_closing_date, l.last_statement_issue_date,
			l.last_statement_balance, account_first_open_day(a.id)) FROM ledgers l JOIN accounts a ON a.id = l.account_id`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"38.24 | 2025-05-31 | 2025-06-02 | 15.00 | 2025-06-01"}, ledger); diff != "" {
		t.Errorf("ledger (balance, closing, issued, last balance, first open day) (-want +got):\n%s", diff)
	}
	var txs []string
	if err := d.Select(&txs, `SELECT concat_ws(' | ', t.transaction_id, t.transaction_date, t.amount, t.type, COALESCE(p.code, '-'),
			(SELECT string_agg(concat_ws(' ', li.net_amount, li.number_of_units, li.price_per_unit, li.units::text), ';') FROM transaction_line_items li WHERE li.transaction_row_id = t.id),
			(SELECT string_agg(concat_ws(' ', x.amount, x.tax_type, x.unit_type), ';') FROM transaction_tax_items x WHERE x.transaction_row_id = t.id))
		FROM transactions t LEFT JOIN products p ON p.id = t.product_id ORDER BY t.transaction_id`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"H1 | 2025-05-10 | 10.00 | PAYMENT | -",
		"H2 | 2025-05-20 | 5.00 | CREDIT | -",
		"S1 | 2025-06-03 | 53.24 | SUPPLY_CHARGE | P | 44.00 4.0 11.0 {4.0,8.0} | 9.24 VAT PROPORTION",
	}
	if diff := cmp.Diff(want, txs); diff != "" {
		t.Errorf("transactions (-want +got):\n%s", diff)
	}
}

// An account whose creation is refused (a tariff left the catalogue after
// validation) leaves none of its ledger behind once rolled back, as none
// of the rest.
func TestCreateAccount_RefusedAccountLeavesNoLedgerTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	seedCatalogue(t, d)
	payload := ledgerPayload(t)
	acc := validateForCreate(t, d, payload)
	opt := options{ProcessID: stageProcess(t, d, "DEMO", payload), Now: createToday}
	if err := d.Get(&opt.OperationsTeamID, `SELECT id FROM operations_teams`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`DELETE FROM tariffs WHERE code = 'HP-STD'`); err != nil {
		t.Fatal(err)
	}
	err := db.InTx(ctx, d, func(tx *db.Tx) error {
		_, err := CreateAccount(ctx, tx, acc, opt)
		return err
	})
	if pe, ok := problem.As(err); !ok || pe.Code != "tariff_code_not_found" {
		t.Fatalf("CreateAccount: %v, want tariff_code_not_found", err)
	}
	var n int
	if err := d.Get(&n, `SELECT (SELECT count(*) FROM transactions) + (SELECT count(*) FROM ledgers) + (SELECT count(*) FROM accounts)`); err != nil || n != 0 {
		t.Errorf("%d rows left behind (%v)", n, err)
	}
}

// Several accounts created in one execution each get their own ledger and
// transactions, written by one more statement for all of them.
func TestCreateAccounts_LedgersOfSeveralAccountsInOneExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	seedCatalogue(t, d)
	var in []toCreate
	var team int64
	if err := d.Get(&team, `SELECT id FROM operations_teams`); err != nil {
		t.Fatal(err)
	}
	for _, ean := range []string{"L-1", "L-2", "L-3"} {
		m := map[string]any{}
		decode(t, ledgerPayload(t), &m)
		m["external_account_number"] = ean
		if ean == "L-2" {
			m["ledgers"] = []any{} // no ledger: a zero balance
		}
		payload, _ := json.Marshal(m)
		var process int64
		if err := d.Get(&process, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
			SELECT id, $1, $2, 'IN_PROGRESS' FROM import_suppliers WHERE code = 'DEMO' RETURNING id`, ean, payload); err != nil {
			t.Fatal(err)
		}
		in = append(in, toCreate{validateForCreate(t, d, payload), options{ProcessID: process, OperationsTeamID: team, Now: createToday}})
	}
	if err := db.InTx(ctx, d, func(tx *db.Tx) error {
		_, errs, err := createAccounts(ctx, tx, in, newServiceAccountNumber)
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := d.Select(&got, `SELECT concat_ws(' | ', a.external_account_number, l.balance,
			(SELECT count(*) FROM transactions t WHERE t.account_id = a.id))
		FROM accounts a JOIN ledgers l ON l.account_id = a.id ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"L-1 | 38.24 | 3", "L-2 | 0.00 | 0", "L-3 | 38.24 | 3"}, got); diff != "" {
		t.Errorf("accounts (number, balance, transactions) (-want +got):\n%s", diff)
	}
}
