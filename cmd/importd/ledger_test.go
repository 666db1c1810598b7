package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/accountview"
	"github.com/bulkimport/bulkimport/jobs/reconcile"
)

// The ledgers of the reference's examples (section 10), as written: the GB
// example's (EDF) with its statements, and the other example's that has
// one (Origin, AU), whose amounts are numbers rather than strings.
const (
	referenceGBLedger = `{
      "current_statement_transactions": [
        {"transaction_id": "1", "transaction_date": "2019-08-04", "amount": "10.00", "type": "REPAYMENT", "reason": "FULL_CREDIT_REFUND", "payment_type": ""},
        {"transaction_id": "2", "transaction_date": "2019-08-05", "amount": "20.00", "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT"}
      ],
      "historical_statement_transactions": [
        {"transaction_id": "3", "transaction_date": "2018-08-05", "amount": "10.00", "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT"},
        {"transaction_id": "4", "transaction_date": "2018-07-05", "amount": "10.00", "type": "CREDIT", "reason": "DIRECT_DEBIT_DISCOUNT"}
      ],
      "last_statement_closing_date": "2019-07-31",
      "last_statement_balance": "20.00",
      "last_statement_issue_date": "2019-08-01",
      "ledger_balance": "30.00"
    }`
	referenceGBStatements = `[
    {"bill_period_from_date": "2019-06-01", "bill_period_to_date": "2019-07-01", "statement_path": "/EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "statement_id": "54321"},
    {"bill_period_from_date": "2019-07-01", "bill_period_to_date": "2019-08-01", "statement_path": "/EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf", "statement_id": "12345"}
  ]`
	referenceAULedger = `{
      "current_statement_transactions": [
        {"transaction_id": "1", "transaction_date": "2019-08-04", "amount": 10.0, "type": "REPAYMENT", "reason": "FULL_CREDIT_REFUND", "payment_type": "CHEQUE"},
        {"transaction_id": "2", "transaction_date": "2019-08-03", "amount": 20.0, "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT", "payment_type": "DD_FINAL_COLLECTION"},
        {"transaction_id": "3", "transaction_date": "2019-08-02", "amount": 20.0, "type": "CREDIT", "reason": "IMPORTED_CREDIT"}
      ],
      "historical_statement_transactions": [
        {"transaction_id": "4", "transaction_date": "2019-06-01", "amount": 10.0, "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT", "payment_type": "CREDIT_CARD"},
        {"transaction_id": "5", "transaction_date": "2019-07-01", "amount": 10.0, "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT", "payment_type": "DEBIT_CARD"}
      ],
      "last_statement_closing_date": "2019-07-31",
      "last_statement_issue_date": "2019-08-01",
      "last_statement_balance": 20.0,
      "ledger_balance": 50.0
    }`
)

// withReferenceLedger is the reference account (billed to 2019-08-01, as
// the examples are) with the ledger and statements given as written; the
// numbers of every part are kept as written.
func withReferenceLedger(t testing.TB, ean, ledger, statements string) []byte {
	t.Helper()
	_, raw := referenceAccount(t)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	m["external_account_number"] = ean
	m["ledgers"] = []any{json.RawMessage(ledger)}
	if statements != "" {
		m["statements"] = json.RawMessage(statements)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The reference's ledgers are validated (E3) and staged (E4) as written,
// and E5 creates the GB one with the account: its transactions are E7's
// (E7 skips their ids, the balance is theirs), and its closing date and
// statements end the billed history, so that E7's open period starts the
// day after the last billed day. E10 and E13 show the account, importctl
// account show reads the ledger's money as E7's, and reconciliation finds
// the account as the cohort line says.
func TestAccount_ReferenceLedgersAreAcceptedAndTheirMoneyIsE7s(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedReference(t, s)
	tok := s.accessToken(t, s.newKey(t, "k"))

	for name, body := range map[string][]byte{
		"AU": withReferenceLedger(t, "AU-1", referenceAULedger, ""),
		"GB": withReferenceLedger(t, "GB-1", referenceGBLedger, referenceGBStatements),
	} {
		if r := s.do(t, "POST", pathValidateAccount, tok, string(body)); r.Status != 200 {
			t.Fatalf("E3 of the %s ledger: %d %s", name, r.Status, r.Raw)
		}
	}
	payload := withReferenceLedger(t, "GB-1", referenceGBLedger, referenceGBStatements)
	if r := s.do(t, "POST", pathStageAccount, tok, string(payload)); r.Status != 201 {
		t.Fatalf("E4: %d %s", r.Status, r.Raw)
	}
	r := s.do(t, "POST", processPath, tok, map[string]any{
		"external_account_number": "GB-1", "import_supplier_code": "TENTACLE_ENERGY", "operations_team_name": "Ops"})
	if r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}

	// The ledger's transactions, as stored, and the balance they make:
	// 30.00 in credit, what the customer owes being -30.00.
	var stored []string
	if err := s.db.Select(&stored, `SELECT concat_ws(' | ', t.transaction_id, t.transaction_date, t.amount, t.type,
			COALESCE(t.payment_type, '-'), l.balance, l.last_statement_closing_date, l.last_statement_balance)
		FROM transactions t JOIN ledgers l ON l.account_id = t.account_id ORDER BY t.transaction_id`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1 | 2019-08-04 | 10.00 | REPAYMENT |  | -30.00 | 2019-07-31 | 20.00",
		"2 | 2019-08-05 | 20.00 | PAYMENT | - | -30.00 | 2019-07-31 | 20.00",
		"3 | 2018-08-05 | 10.00 | PAYMENT | - | -30.00 | 2019-07-31 | 20.00",
		"4 | 2018-07-05 | 10.00 | CREDIT | - | -30.00 | 2019-07-31 | 20.00",
	}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored ledger (-want +got):\n%s", diff)
	}

	// E7: the last billed day (the last statement's end, inclusive) is
	// closed; the day after opens the period; the ledger's ids are known.
	tx := func(id, date string) string {
		return fmt.Sprintf(`{"import_supplier": "TENTACLE_ENERGY", "external_account_number": "GB-1", "transactions": [
			{"transaction_id": %q, "transaction_date": %q, "amount": 5.25, "type": "CHARGE", "reason": "IMPORTED_CHARGE"}]}`, id, date)
	}
	if r := s.do(t, "POST", pathTransactions+"?force_add_to_current_statement=false", tok, tx("E7-1", "2019-08-01")); r.Status != 400 ||
		!strings.Contains(string(r.Raw), `"code":"transaction_not_in_open_statement_period"`) {
		t.Errorf("E7 on the last billed day: %d %s", r.Status, r.Raw)
	}
	e7 := tx("E7-1", "2019-08-02")
	if r := s.do(t, "POST", pathTransactions+"?force_add_to_current_statement=false", tok, e7); r.Status != 201 {
		t.Fatalf("E7 on the first open day: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "POST", pathTransactions, tok, tx("2", "2019-08-05")); r.Status != 201 ||
		!strings.Contains(string(r.Raw), `"status":"TRANSACTION_ALREADY_EXISTS"`) {
		t.Errorf("E7 with a ledger transaction's id: %d %s", r.Status, r.Raw)
	}

	// E10 and E13 see the account.
	if r := s.do(t, "GET", pathTransferStatus("TENTACLE_ENERGY", "GB-1"), tok, nil); r.Status != 200 || r.Body["status"] != "COMPLETED" {
		t.Errorf("E10: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "GET", pathList("imported", "TENTACLE_ENERGY", ""), tok, nil); r.Status != 200 || !strings.Contains(string(r.Raw), `"GB-1"`) {
		t.Errorf("E13: %d %s", r.Status, r.Raw)
	}

	// importctl account show's view: the ledger's transactions beside
	// E7's, one balance.
	ctx := context.Background()
	v, err := accountview.Load(ctx, s.db, "TENTACLE_ENERGY", "GB-1")
	if err != nil || v.Account == nil {
		t.Fatalf("account show: %v", err)
	}
	view := v.Account
	l := view.Ledger
	if len(view.Transactions) != 5 || l.Balance.String() != "-24.75" || !l.Consistent() ||
		l.LastStatementClosingDate == nil || *l.LastStatementClosingDate != "2019-07-31" ||
		l.LastStatementBalance == nil || l.LastStatementBalance.String() != "20.00" {
		t.Errorf("account show: %d transactions, ledger %+v", len(view.Transactions), l)
	}

	// Reconciliation: the cohort line (the payload and the E7 request)
	// gives the summary the service's rows give.
	var e7Body struct {
		Transactions json.RawMessage `json:"transactions"`
	}
	if err := json.Unmarshal([]byte(e7), &e7Body); err != nil {
		t.Fatal(err)
	}
	expected, err := reconcile.FromCohortLine(ctx, reconcile.Line{Account: payload, Transactions: e7Body.Transactions}, "US")
	if err != nil {
		t.Fatal(err)
	}
	found, err := reconcile.FromView("GB-1", view)
	if err != nil {
		t.Fatal(err)
	}
	if diff := reconcile.Compare(expected, found); len(diff) > 0 {
		t.Errorf("reconciliation differs: %+v", diff)
	}
	if expected.Transactions != 5 || expected.LedgerBalance != "-24.75" || expected.TransactionsSum != "55.25" {
		t.Errorf("cohort summary %+v", expected)
	}
}
