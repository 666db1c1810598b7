package account

import (
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// gbLedger is the ledger of the reference's GB example (section 10, the
// EDF GB v2 ExamplePayload), as written.
const gbLedger = `{
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

// gbStatements are the statements of the same example, as written.
const gbStatements = `[
    {"bill_period_from_date": "2019-06-01", "bill_period_to_date": "2019-07-01", "statement_path": "/EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "statement_id": "54321"},
    {"bill_period_from_date": "2019-07-01", "bill_period_to_date": "2019-08-01", "statement_path": "/EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf", "statement_id": "12345"}
  ]`

// auLedger is the ledger of the reference's other example with one (Origin
// AU, section 10, ExampleElectricityPayload), as written: numbers where the
// GB example has strings, and three current transactions.
const auLedger = `{
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

// rawJSON decodes a JSON text for a doc edit, numbers kept as written.
func rawJSON(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	return v
}

// referenceLedgerAccount is the fixture billed, as the reference's examples
// are, up to 2019-08-01 (the first supply point; the second address, whose
// supply started later, is left out), with the ledger and the statements
// given (statements "" leaves the fixture's).
func referenceLedgerAccount(t testing.TB, ledger, statements string) []byte {
	t.Helper()
	d := fixtureDoc(t)
	addresses := d["supply_addresses"].([]any)
	d["supply_addresses"] = addresses[:1]
	d.set(t, "supply_addresses.0.supply_points.0.last_billed_to_date", "2019-08-01")
	d.set(t, "supply_addresses.0.supply_points.0.agreements", rawJSON(t, `[{"tariff_code": "E-1R-VAR-C", "effective_from": "2019-04-01"}]`))
	d.set(t, "ledgers", []any{rawJSON(t, ledger)})
	if statements != "" {
		d.set(t, "statements", rawJSON(t, statements))
	}
	return d.bytes(t)
}

// The reference's examples that carry a ledger are accepted as written:
// their transactions are E7's, their balances add up in the reference's
// sign, and the normalised payload keeps every amount exactly as sent, so
// that it validates again to the same account.
func TestLedger_ReferenceExamplesAreAcceptedAsWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name                string
		ledger, statements  string
		current, historical int
		balance             string // the stored balance, E7's: what the customer owes
	}{
		{"GB, with its statements", gbLedger, gbStatements, 2, 2, "-30"},
		{"AU", auLedger, "", 3, 2, "-50"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, err := b.v.Validate(ctx, referenceLedgerAccount(t, tc.ledger, tc.statements))
			if err != nil {
				t.Fatalf("refused: %v", pairsOf(fieldErrors(t, err)))
			}
			if len(a.Ledgers) != 1 {
				t.Fatalf("%d ledgers", len(a.Ledgers))
			}
			l := a.Ledgers[0]
			if len(l.Current) != tc.current || len(l.Historical) != tc.historical {
				t.Errorf("%d current and %d historical transactions, want %d and %d", len(l.Current), len(l.Historical), tc.current, tc.historical)
			}
			stored := ReferenceBalance(l.Transactions()).Neg()
			if want := decimal.RequireFromString(tc.balance); !stored.Equal(want) {
				t.Errorf("balance %s, want %s", stored, want)
			}
			checkAppendJSON(t, a)
			enc, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			again, err := b.v.Validate(ctx, enc)
			if err != nil {
				t.Fatalf("normalised payload refused: %v\n%s", err, enc)
			}
			if diff := cmp.Diff(a, again); diff != "" {
				t.Errorf("validated again (-first +second):\n%s", diff)
			}
		})
	}
}

// A ledger's amounts are kept exactly as sent in the normalised payload,
// also where E7 would answer them rounded to two places.
func TestLedger_NormalisedPayloadKeepsAmountsExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ledger := `{"current_statement_transactions": [{"transaction_id": "C1", "transaction_date": "2025-06-02", "amount": "0.125",
			"type": "CHARGE", "reason": "IMPORTED_CHARGE"}],
		"last_statement_closing_date": "2025-05-31", "ledger_balance": -0.125}`
	a, err := b.v.Validate(context.Background(), fixtureDoc(t).set(t, "ledgers", []any{rawJSON(t, ledger)}).bytes(t))
	if err != nil {
		t.Fatalf("refused: %v", pairsOf(fieldErrors(t, err)))
	}
	enc, err := a.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"amount":"0.125"`, `"ledger_balance":"-0.125"`} {
		if !strings.Contains(string(enc), want) {
			t.Errorf("normalised payload without %s: %s", want, enc)
		}
	}
}

// ledgerOK is a ledger that the fixture (billed to 2025-05-31, today
// 2025-06-15) accepts: two historical transactions make the last statement
// 15.00 in credit, and a charge of 30.00 takes the ledger to 15.00 in debit.
func ledgerOK() map[string]any {
	return map[string]any{
		"historical_statement_transactions": []any{
			map[string]any{"transaction_id": "H1", "transaction_date": "2025-05-10", "amount": "10.00", "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT"},
			map[string]any{"transaction_id": "H2", "transaction_date": "2025-05-20", "amount": json.Number("5"), "type": "CREDIT", "reason": "GOODWILL"},
		},
		"current_statement_transactions": []any{
			map[string]any{"transaction_id": "C1", "transaction_date": "2025-06-05", "amount": "30.00", "type": "CHARGE", "reason": "IMPORTED_CHARGE"},
		},
		"last_statement_closing_date": "2025-05-31", "last_statement_issue_date": "2025-06-02",
		"last_statement_balance": "15.00", "ledger_balance": "-15.00",
	}
}

// withLedger puts ledgerOK, changed by change, in the payload.
func withLedger(change func(l map[string]any)) func(testing.TB, doc) doc {
	return func(t testing.TB, d doc) doc {
		l := ledgerOK()
		if change != nil {
			change(l)
		}
		return d.set(t, "ledgers", []any{l})
	}
}

// txAt returns transaction i of list of l.
func txAt(l map[string]any, list string, i int) map[string]any {
	return l[list].([]any)[i].(map[string]any)
}

const (
	ledger0    = "ledgers.0."
	historical = ledger0 + "historical_statement_transactions"
	current    = ledger0 + "current_statement_transactions"
)

// unbilled removes every last_billed_to_date of the fixture.
var unbilled = edits(del("supply_addresses.0.supply_points.0.last_billed_to_date"), del("supply_addresses.1.supply_points.0.last_billed_to_date"))

// supplyCharge is the reference's E7 example SUPPLY_CHARGE (53.24 is 44.0
// net and 9.24 VAT) of the fixture's product E-1R, dated in the current
// statement.
func supplyCharge() map[string]any {
	return map[string]any{"transaction_id": "S1", "transaction_date": "2025-06-03", "amount": json.Number("53.24"), "type": "SUPPLY_CHARGE",
		"product_code": "E-1R",
		"line_items": []any{map[string]any{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-10",
			"number_of_units": json.Number("4.0"), "net_amount": json.Number("44.0"), "price_per_unit": json.Number("11.0"), "units": []any{json.Number("4.0"), json.Number("8.0")}}},
		"tax_items": []any{map[string]any{"amount": json.Number("9.24"), "tax_type": "VAT", "value_taxed": json.Number("44.0"), "rate": json.Number("0.21"), "unit_type": "PROPORTION"}}}
}

// withCurrent replaces the current transactions by ts, and ledger_balance by
// balance ("" removes it).
func withCurrent(balance string, ts ...map[string]any) func(l map[string]any) {
	return func(l map[string]any) {
		list := make([]any, len(ts))
		for i, t := range ts {
			list[i] = t
		}
		l["current_statement_transactions"] = list
		if balance == "" {
			delete(l, "ledger_balance")
		} else {
			l["ledger_balance"] = balance
		}
	}
}

func init() {
	// The ledger's cases join the payload's rule cases, so that
	// TestValidate's run and TestRules_EverySemanticCodeIsTested see them.
	ruleCases = append(ruleCases, ledgerRuleCases...)
}

var ledgerRuleCases = []ruleCase{
	{name: "ledger: a second ledger", edit: func(t testing.TB, d doc) doc {
		return d.set(t, "ledgers", []any{ledgerOK(), map[string]any{}})
	}, want: []pair{{"ledgers.1", CodeDuplicateLedger}}},
	{name: "ledger: historical transaction after the closing date", edit: withLedger(func(l map[string]any) {
		txAt(l, "historical_statement_transactions", 1)["transaction_date"] = "2025-06-01"
	}), want: []pair{{historical + ".1.transaction_date", CodeHistoricalAfterClosing}}},
	{name: "ledger: historical transaction after last_billed_to_date, which stands in for the closing date", edit: edits(withLedger(func(l map[string]any) {
		delete(l, "last_statement_closing_date")
		delete(l, "current_statement_transactions")
		delete(l, "ledger_balance")
		txAt(l, "historical_statement_transactions", 0)["transaction_date"] = "2025-06-01"
	})), want: []pair{{historical + ".0.transaction_date", CodeHistoricalAfterClosing}}},
	{name: "ledger: historical transactions without a closing date or a billed date", edit: edits(unbilled, withLedger(func(l map[string]any) {
		delete(l, "last_statement_closing_date")
		delete(l, "last_statement_issue_date")
		delete(l, "current_statement_transactions")
		delete(l, "ledger_balance")
	})), want: []pair{{historical, CodeHistoricalWithoutClosing}}},
	{name: "ledger: historical transactions that do not make the last statement's balance", edit: withLedger(func(l map[string]any) {
		l["last_statement_balance"] = "-15.00" // the service's sign, not the reference's
		delete(l, "ledger_balance")
	}), want: []pair{{ledger0 + "last_statement_balance", CodeHistoricalBalanceMismatch}}},
	{name: "ledger: historical transactions without the last statement's balance", edit: withLedger(func(l map[string]any) {
		delete(l, "last_statement_balance")
		delete(l, "ledger_balance")
	}), want: []pair{{ledger0 + "last_statement_balance", CodeHistoricalBalanceMismatch}}},
	{name: "ledger: last statement issued before it closes", edit: withLedger(func(l map[string]any) { l["last_statement_issue_date"] = "2025-05-30" }),
		want: []pair{{ledger0 + "last_statement_issue_date", CodeIssuedBeforeClosing}}},
	{name: "ledger: current transaction on the closing date", edit: withLedger(func(l map[string]any) {
		txAt(l, "current_statement_transactions", 0)["transaction_date"] = "2025-05-31"
	}), want: []pair{{current + ".0.transaction_date", CodeCurrentBeforeOpening}}},
	{name: "ledger: current transaction on a statement's last day", edit: edits(set("statements", []any{map[string]any{
		"statement_id": "S1", "bill_period_from_date": "2025-06-01", "bill_period_to_date": "2025-06-05"}}),
		withLedger(nil)), want: []pair{{current + ".0.transaction_date", CodeCurrentBeforeOpening}}},
	{name: "ledger: current transaction after the closing date but on the last billed day", edit: withLedger(func(l map[string]any) {
		l["last_statement_closing_date"] = "2025-05-20"
		txAt(l, "current_statement_transactions", 0)["transaction_date"] = "2025-05-31"
	}), want: []pair{{current + ".0.transaction_date", CodeCurrentBeforeLastBilled}}},
	{name: "ledger: current transactions without any billed day", edit: edits(unbilled, withLedger(func(l map[string]any) {
		delete(l, "last_statement_closing_date")
		delete(l, "last_statement_issue_date")
		delete(l, "historical_statement_transactions")
		l["last_statement_balance"] = "0"
		l["ledger_balance"] = "-30.00"
	})), want: []pair{{current, CodeCurrentWithoutBilledDay}}},
	{name: "ledger: ledger balance that is not the last statement's and the current transactions", edit: withLedger(func(l map[string]any) {
		l["ledger_balance"] = "15.00"
	}), want: []pair{{ledger0 + "ledger_balance", CodeLedgerBalanceMismatch}}},
	{name: "ledger: balances that are not amounts", edit: withLedger(func(l map[string]any) {
		l["ledger_balance"] = "fifteen"
		l["last_statement_balance"] = json.Number("1.00000000001")
	}), want: []pair{{ledger0 + "last_statement_balance", "invalid_amount_precision"}, {ledger0 + "ledger_balance", "invalid"}}},
	{name: "ledger: transactions beyond what a ledger holds", edit: withLedger(func(l map[string]any) {
		var ts []any
		for i := range 101 {
			ts = append(ts, map[string]any{"transaction_id": "BIG-" + strings.Repeat("X", i+1), "transaction_date": "2025-06-05",
				"amount": "9999999999.99", "type": "CHARGE"})
		}
		l["current_statement_transactions"] = ts
		delete(l, "ledger_balance")
	}), want: []pair{{"ledgers.0", "ledger_balance_out_of_range"}}},
	{name: "ledger: a transaction id in both lists", edit: withLedger(func(l map[string]any) {
		txAt(l, "current_statement_transactions", 0)["transaction_id"] = "H1"
	}), want: []pair{{current + ".0.transaction_id", "duplicate_transaction_ids"}}},
	{name: "ledger: a current transaction dated tomorrow", edit: withLedger(func(l map[string]any) {
		txAt(l, "current_statement_transactions", 0)["transaction_date"] = "2025-06-16"
	}), want: []pair{{current + ".0.transaction_date", "transaction_in_future"}}},
	{name: "ledger: a payment of nothing", edit: withLedger(func(l map[string]any) {
		txAt(l, "historical_statement_transactions", 0)["amount"] = "0.00"
		l["last_statement_balance"] = "5.00"
		l["ledger_balance"] = "-25.00"
	}), want: []pair{{historical + ".0.amount", "amount_must_be_positive"}}},
	{name: "ledger: amounts beyond the reference's pattern", edit: withLedger(func(l map[string]any) {
		txAt(l, "current_statement_transactions", 0)["amount"] = "10000000000"
		txAt(l, "historical_statement_transactions", 0)["amount"] = "10.000000000001"
	}), want: []pair{{current + ".0.amount", "amount_out_of_range"}, {historical + ".0.amount", "invalid_amount_precision"}}},
	{name: "ledger: a transaction's own fields, as in E7", edit: withLedger(func(l map[string]any) {
		tx := txAt(l, "current_statement_transactions", 0)
		tx["type"] = "GIFT"
		tx["colour"] = "red"
		delete(l, "ledger_balance")
	}), want: []pair{{current + ".0.colour", "unknown_field"}, {current + ".0.type", "invalid_choice"}}},
	{name: "ledger: the reference's supply charge of an unknown product", edit: withLedger(func(l map[string]any) {
		sc := supplyCharge()
		sc["product_code"] = "NOPE"
		withCurrent("", sc)(l)
	}), want: []pair{{current + ".0.product_code", "product_code_does_not_exist"}}},
	{name: "ledger: a supply charge of 99 with net 44 and tax 9.24", edit: withLedger(func(l map[string]any) {
		sc := supplyCharge()
		sc["amount"] = json.Number("99")
		withCurrent("", sc)(l)
	}), want: []pair{{current + ".0.amount", "ledger_transaction_amount_does_not_match_with_line_item_net_amount_and_tax_amount"}}},
	{name: "ledger: a supply charge without line items", edit: withLedger(func(l map[string]any) {
		sc := supplyCharge()
		delete(sc, "line_items")
		delete(sc, "tax_items")
		withCurrent("", sc)(l)
	}), want: []pair{{current + ".0.line_items", "required"}}},
	{name: "ledger: a line item whose net amount is not units times price, with one unit value", edit: withLedger(func(l map[string]any) {
		sc := supplyCharge()
		li := sc["line_items"].([]any)[0].(map[string]any)
		li["price_per_unit"] = json.Number("12.0")
		li["units"] = []any{json.Number("4.0")}
		li["start_date"] = "2025-06-11"
		delete(sc["tax_items"].([]any)[0].(map[string]any), "unit_type")
		withCurrent("", sc)(l)
	}), want: []pair{{current + ".0.tax_items.0.unit_type", "required"}, {current + ".0.line_items.0.start_date", "start_date_later_than_end_date"},
		{current + ".0.line_items.0.units", "line_item_units_must_be_two_values"}, {current + ".0.line_items.0.net_amount", "incorrect_line_item_net_amount"}}},
}

// A supply charge of the catalogue's product, consistent with its items,
// is accepted in a ledger, and its product is looked up.
func TestLedger_SupplyChargeOfAKnownProductIsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := withLedger(withCurrent("-38.24", supplyCharge()))(t, fixtureDoc(t)).bytes(t)
	a, err := b.v.Validate(context.Background(), body)
	if err != nil {
		t.Fatalf("refused: %v", pairsOf(fieldErrors(t, err)))
	}
	if got := a.Ledgers[0].Current[0].Amount.String(); got != "53.24" {
		t.Errorf("amount %s", got)
	}
}

// FuzzLedger: any ledger in an otherwise valid payload is refused with
// every problem at its place, or accepted with balances that add up (summed
// again here in big.Rat, from the amounts' text) and a normalised payload
// that validates again to the same account.
func FuzzLedger(f *testing.F) {
	for _, seed := range []string{gbLedger, auLedger, `{}`, `[]`, `null`, `{"ledger_balance": "1e2"}`,
		`{"current_statement_transactions": [{"transaction_id": "C", "transaction_date": "2025-06-01", "amount": "0.1", "type": "CREDIT"},
			{"transaction_id": "D", "transaction_date": "2025-06-02", "amount": 0.2, "type": "CHARGE"}], "ledger_balance": "-0.1"}`,
		`{"historical_statement_transactions": [{"transaction_id": "H", "transaction_date": "2025-05-31", "amount": "1.005", "type": "REPAYMENT"}],
			"last_statement_balance": -1.005, "last_statement_closing_date": "2025-05-31", "last_statement_issue_date": "2025-05-31"}`,
	} {
		f.Add(seed)
	}
	b := setup(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, ledger string) {
		body := strings.Replace(string(fixture(t)), `"ledgers": []`, `"ledgers": [`+ledger+`]`, 1)
		a, err := b.v.Validate(ctx, []byte(body))
		if err != nil {
			p, ok := problem.As(err)
			if !ok || p.Kind != problem.Invalid {
				t.Fatalf("error is not an Invalid problem: %v", err)
			}
			for _, e := range p.Errors {
				if e.Code == "" || e.Attr == "" || e.Detail == "" {
					t.Fatalf("problem without code, attr or detail: %+v", e)
				}
			}
			return
		}
		for _, l := range a.Ledgers {
			last := new(big.Rat)
			if l.LastStatementBalance != nil {
				last = ratOf(t, l.LastStatementBalance.String())
			}
			if got := referenceSum(t, l.Historical); got.Cmp(last) != 0 {
				t.Fatalf("accepted historical transactions summing to %s for a last statement of %s", got.FloatString(10), last.FloatString(10))
			}
			if l.LedgerBalance != nil {
				if got := new(big.Rat).Add(last, referenceSum(t, l.Current)); got.Cmp(ratOf(t, l.LedgerBalance.String())) != 0 {
					t.Fatalf("accepted ledger_balance %s for %s", l.LedgerBalance, got.FloatString(10))
				}
			}
		}
		checkAppendJSON(t, a)
		enc, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		again, err := b.v.Validate(ctx, enc)
		if err != nil {
			t.Fatalf("normalised payload refused: %v\n%s", err, enc)
		}
		if diff := cmp.Diff(a, again); diff != "" {
			t.Fatalf("normalisation is not idempotent (-first +second):\n%s", diff)
		}
	})
}

func ratOf(t *testing.T, s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("%q is not a number", s)
	}
	return r
}

// referenceSum is the sum of ts in the reference's sign, written out: payments
// and credits add, the rest subtract.
func referenceSum(t *testing.T, ts []postimport.Transaction) *big.Rat {
	sum := new(big.Rat)
	for _, tx := range ts {
		a := ratOf(t, tx.Amount.String())
		switch tx.Type {
		case postimport.TypePayment, postimport.TypeCredit:
			sum.Add(sum, a)
		default:
			sum.Sub(sum, a)
		}
	}
	return sum
}
