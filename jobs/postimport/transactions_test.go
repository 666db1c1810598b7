package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// charge is a valid CHARGE transaction.
func charge(id, date, amount string) obj {
	return obj{"transaction_id": id, "transaction_date": date, "amount": num(amount), "type": "CHARGE",
		"reason": "IMPORTED_CHARGE", "display_note": "Imported charge", "note": "from the old system"}
}

func payment(id, date, amount string) obj {
	return obj{"transaction_id": id, "transaction_date": date, "amount": num(amount), "type": "PAYMENT",
		"reason": "ACCOUNT_CHARGE_PAYMENT", "reference": "PAY-" + id, "payment_type": "DD_REGULAR_COLLECTION"}
}

func supplyCharge(id, date, amount string) obj {
	return obj{"transaction_id": id, "transaction_date": date, "amount": num(amount), "type": "SUPPLY_CHARGE",
		"product_code": productCode, "display_note": "Electricity",
		"line_items": []obj{{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-10",
			"number_of_units": num("123.456"), "net_amount": num("30.00"), "price_per_unit": num("0.243012"),
			"units": []any{num("100.5"), num("22.956")}}},
		"tax_items": []obj{{"amount": num("1.50"), "tax_type": "VAT", "value_taxed": num("30.00"), "rate": num("0.05"), "unit_type": "PROPORTION"}}}
}

// supplyChargeOf is a valid SUPPLY_CHARGE of any amount: one line item of
// one unit at that price, and a tax item of nothing.
func supplyChargeOf(id, date, amount string) obj {
	return obj{"transaction_id": id, "transaction_date": date, "amount": num(amount), "type": "SUPPLY_CHARGE",
		"product_code": productCode, "display_note": "Electricity",
		"line_items": []obj{{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-10",
			"number_of_units": num("1"), "net_amount": num(amount), "price_per_unit": num(amount), "units": []any{num("0"), num("1")}}},
		"tax_items": []obj{{"amount": num("0"), "tax_type": "VAT", "value_taxed": num(amount), "rate": num("0"), "unit_type": "PROPORTION"}}}
}

// referenceSupplyCharge is the SUPPLY_CHARGE of the reference's E7 example
// (section 10), as a client copies it: 53.24 is 44.0 net and 9.24 VAT.
func referenceSupplyCharge(id, date string) obj {
	return obj{"transaction_id": id, "transaction_date": date, "amount": num("53.24"), "type": "SUPPLY_CHARGE",
		"display_note": "Some customer facing note about the supply charge.", "reference": "supply-charge-reference-1",
		"product_code": productCode,
		"line_items": []obj{{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2019-10-01", "end_date": "2019-11-01",
			"number_of_units": num("4.0"), "net_amount": num("44.0"), "price_per_unit": num("11.0"), "units": []any{num("4.0"), num("8.0")}}},
		"tax_items": []obj{{"amount": num("9.24"), "tax_type": "VAT", "value_taxed": num("44.0"), "rate": num("0.21"), "unit_type": "PROPORTION"}}}
}

// lineItem is the reference example's line item with the given units,
// price and net amount.
func lineItem(units, price, net string) obj {
	return obj{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2019-10-01", "end_date": "2019-11-01",
		"number_of_units": num(units), "net_amount": num(net), "price_per_unit": num(price)}
}

// with returns a copy of o with the given fields set (nil deletes).
func with(o obj, kv ...any) obj {
	c := obj{}
	for k, v := range o {
		c[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return c
}

func txBody(t testing.TB, ean string, txs ...obj) []byte {
	return body(t, obj{"import_supplier": supplierCode, "external_account_number": ean, "transactions": txs})
}

// An account billed to 2025-05-31 has the open period 2025-06-01..2025-06-15.
var billedToMay = acct{lastBilled: "2025-05-31"}

type txRuleCase struct {
	name    string
	account acct
	before  []obj  // added first, with the default options
	query   string // E7's query string
	txs     []obj
	raw     string // a whole body instead of txs, with %s for the account
	want    []want
}

var txRuleCases = []txRuleCase{
	{name: "transaction id twice in one request", txs: []obj{charge("T1", "2025-06-02", "1"), charge("T1", "2025-06-03", "2")},
		want: []want{{CodeDuplicateTransactionIDs, "transactions.1.transaction_id"}}},
	{name: "transaction dated tomorrow", txs: []obj{charge("T1", "2025-06-16", "1")},
		want: []want{{CodeTransactionInFuture, "transactions.0.transaction_date"}}},
	{name: "transaction dated tomorrow is refused even with force", query: "force_add_to_current_statement=true",
		txs: []obj{charge("T1", "2025-06-16", "1")}, want: []want{{CodeTransactionInFuture, "transactions.0.transaction_date"}}},
	{name: "date before the open period without force", query: "force_add_to_current_statement=false",
		txs: []obj{charge("T1", "2025-05-31", "1")}, want: []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}}},
	{name: "billed to today: force never moves a transaction into the future", account: acct{lastBilled: "2025-06-15"},
		query: "force_add_to_current_statement=true", txs: []obj{charge("T1", "2025-06-15", "1")},
		want: []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}}},
	{name: "billed to a future day: nothing can be added", account: acct{lastBilled: "2025-07-31"},
		txs: []obj{charge("T1", "2025-01-02", "1")}, want: []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}}},
	{name: "a dry run is refused like a real run", raw: `{"import_supplier": "ACME", "external_account_number": %q, "dry_run": true,
		"transactions": [{"transaction_id": "T1", "transaction_date": "2025-06-16", "amount": 1, "type": "CREDIT", "reason": "GENERAL_CREDIT"}]}`,
		want: []want{{CodeTransactionInFuture, "transactions.0.transaction_date"}}},
	{name: "dry_run that is not a boolean", raw: `{"import_supplier": "ACME", "external_account_number": %q, "dry_run": "yes", "transactions": []}`,
		want: []want{{"invalid", "dry_run"}}},
	{name: "supply charge of an unknown product", txs: []obj{with(supplyCharge("T1", "2025-06-02", "31.50"), "product_code", "NOPE")},
		want: []want{{CodeProductNotFound, "transactions.0.product_code"}}},
	{name: "supply charge without product", txs: []obj{with(supplyCharge("T1", "2025-06-02", "31.50"), "product_code", nil)},
		want: []want{{"required", "transactions.0.product_code"}}},
	{name: "eleven decimal places", txs: []obj{charge("T1", "2025-06-02", "10.00000000001")},
		want: []want{{CodeAmountPrecision, "transactions.0.amount"}}},
	{name: "eleven decimal places in a string", txs: []obj{with(charge("T1", "2025-06-02", "1"), "amount", "10.00000000001")},
		want: []want{{CodeAmountPrecision, "transactions.0.amount"}}},
	{name: "amount string of ten billion", txs: []obj{with(charge("T1", "2025-06-02", "1"), "amount", "10000000000")},
		want: []want{{CodeAmountOutOfRange, "transactions.0.amount"}}},
	{name: "amount of ten billion", txs: []obj{charge("T1", "2025-06-02", "10000000000")},
		want: []want{{CodeAmountOutOfRange, "transactions.0.amount"}}},
	{name: "negative amount of ten billion", txs: []obj{charge("T1", "2025-06-02", "-10000000000.00")},
		want: []want{{CodeAmountOutOfRange, "transactions.0.amount"}}},
	{name: "amount string with a currency", txs: []obj{with(charge("T1", "2025-06-02", "1"), "amount", "71.00 GBP")},
		want: []want{{"invalid", "transactions.0.amount"}}},
	{name: "amount string with an exponent", txs: []obj{with(charge("T1", "2025-06-02", "1"), "amount", "1e2")},
		want: []want{{"invalid", "transactions.0.amount"}}},
	{name: "amount string without digits", txs: []obj{with(charge("T1", "2025-06-02", "1"), "amount", "-.")},
		want: []want{{"invalid", "transactions.0.amount"}}},
	{name: "amount that is a boolean", txs: []obj{with(charge("T1", "2025-06-02", "1"), "amount", true)},
		want: []want{{"invalid", "transactions.0.amount"}}},
	{name: "amount with an exponent beyond three digits", txs: []obj{charge("T1", "2025-06-02", "7.1e1000")},
		want: []want{{"invalid", "transactions.0.amount"}}},
	{name: "zero payment", txs: []obj{payment("T1", "2025-06-02", "0.00")},
		want: []want{{CodeAmountNotPositive, "transactions.0.amount"}}},
	{name: "negative repayment", txs: []obj{with(payment("T1", "2025-06-02", "-5"), "type", "REPAYMENT", "reason", "FULL_CREDIT_REFUND")},
		want: []want{{CodeAmountNotPositive, "transactions.0.amount"}}},
	{name: "reason of 65 characters", txs: []obj{with(charge("T1", "2025-06-02", "1"), "reason", strings.Repeat("R", 65))},
		want: []want{{"invalid_choice", "transactions.0.reason"}}},
	{name: "unknown type", txs: []obj{with(charge("T1", "2025-06-02", "1"), "type", "GIFT")},
		want: []want{{"invalid_choice", "transactions.0.type"}}},
	{name: "payment type of 65 characters", txs: []obj{with(payment("T1", "2025-06-02", "1"), "payment_type", strings.Repeat("P", 65))},
		want: []want{{"invalid_choice", "transactions.0.payment_type"}}},
	{name: "product code on a payment names a product of the catalogue", txs: []obj{with(payment("T1", "2025-06-02", "1"), "product_code", "NOPE")},
		want: []want{{CodeProductNotFound, "transactions.0.product_code"}}},
	{name: "description is set by the import, not sent", txs: []obj{with(charge("T1", "2025-06-02", "1"), "description", "x")},
		want: []want{{"unknown_field", "transactions.0.description"}}},
	{name: "line item ends before it starts", txs: []obj{with(supplyCharge("T1", "2025-06-02", "2.50"), "line_items",
		[]obj{{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-10", "end_date": "2025-06-01", "number_of_units": num("1"),
			"net_amount": num("1"), "price_per_unit": num("1")}})},
		want: []want{{CodeStartAfterEnd, "transactions.0.line_items.0.start_date"}}},
	{name: "line item problems at their paths", txs: []obj{with(supplyCharge("T1", "2025-06-02", "31.50"), "line_items",
		[]obj{{"rate_band": strings.Repeat("p", 65), "start_date": "2025-06-01", "end_date": "2025-06-31", "number_of_units": "one",
			"net_amount": num("1.00000000005"), "units": []any{num("1"), "x", num("1e5000")}}})},
		want: []want{{"invalid_choice", "transactions.0.line_items.0.rate_band"}, {"invalid_date", "transactions.0.line_items.0.end_date"},
			{"invalid", "transactions.0.line_items.0.number_of_units"}, {CodeAmountPrecision, "transactions.0.line_items.0.net_amount"},
			{"required", "transactions.0.line_items.0.price_per_unit"}, {"invalid", "transactions.0.line_items.0.units.1"},
			{"invalid", "transactions.0.line_items.0.units.2"}}},
	{name: "tax item problems at their paths", txs: []obj{with(supplyCharge("T1", "2025-06-02", "31.50"), "tax_items",
		[]obj{{"amount": num("99999999999"), "tax_type": strings.Repeat("G", 65), "value_taxed": num("1"), "rate": "20%", "unit_type": strings.Repeat("u", 65)}})},
		want: []want{{CodeAmountOutOfRange, "transactions.0.tax_items.0.amount"}, {"invalid_choice", "transactions.0.tax_items.0.tax_type"},
			{"invalid", "transactions.0.tax_items.0.rate"}, {"invalid_choice", "transactions.0.tax_items.0.unit_type"}}},
	{name: "every problem of every transaction at once", query: "force_add_to_current_statement=false",
		txs: []obj{charge("T1", "2025-06-02", "1"), charge("T2", "2025-05-01", "1.00000000001"), with(supplyCharge("T2", "2025-07-01", "31.50"), "product_code", "NOPE")},
		want: []want{{CodeNotInOpenPeriod, "transactions.1.transaction_date"}, {CodeAmountPrecision, "transactions.1.amount"},
			{CodeDuplicateTransactionIDs, "transactions.2.transaction_id"}, {CodeTransactionInFuture, "transactions.2.transaction_date"},
			{CodeProductNotFound, "transactions.2.product_code"}}},
	{name: "supply charge whose amount is not its net amounts and taxes", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "amount", num("99"))},
		want: []want{{CodeAmountNotItemsSum, "transactions.0.amount"}}},
	{name: "supply charge whose amount leaves out its tax", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "amount", "44.00")},
		want: []want{{CodeAmountNotItemsSum, "transactions.0.amount"}}},
	{name: "supply charge without line items", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "line_items", nil, "tax_items", nil)},
		want: []want{{"required", "transactions.0.line_items"}}},
	{name: "supply charge with an empty list of line items", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "line_items", []obj{}, "tax_items", nil)},
		want: []want{{"required", "transactions.0.line_items"}}},
	{name: "net amount that is not units times price", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "amount", num("54.24"),
		"line_items", []obj{lineItem("4.0", "11.0", "45.0")})},
		want: []want{{CodeIncorrectNetAmount, "transactions.0.line_items.0.net_amount"}}},
	{name: "net amount a penny off the rounded product", txs: []obj{with(supplyCharge("T1", "2025-06-02", "31.51"), "line_items",
		[]obj{lineItem("123.456", "0.243012", "30.01")})},
		want: []want{{CodeIncorrectNetAmount, "transactions.0.line_items.0.net_amount"}}},
	{name: "net amount of a charge's line item is checked too", txs: []obj{with(charge("T1", "2025-06-02", "1"), "line_items",
		[]obj{lineItem("2", "3", "7")})},
		want: []want{{CodeIncorrectNetAmount, "transactions.0.line_items.0.net_amount"}}},
	{name: "units of one value", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "line_items",
		[]obj{with(lineItem("4.0", "11.0", "44.0"), "units", []any{num("4.0")})})},
		want: []want{{CodeUnitsNotTwoValues, "transactions.0.line_items.0.units"}}},
	{name: "units of three values", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "line_items",
		[]obj{with(lineItem("4.0", "11.0", "44.0"), "units", []any{num("4"), num("6"), num("8")})})},
		want: []want{{CodeUnitsNotTwoValues, "transactions.0.line_items.0.units"}}},
	{name: "tax item without a unit type", txs: []obj{with(referenceSupplyCharge("T1", "2025-06-02"), "tax_items",
		[]obj{{"amount": num("9.24"), "tax_type": "VAT", "value_taxed": num("44.0"), "rate": num("0.21")}})},
		want: []want{{"required", "transactions.0.tax_items.0.unit_type"}}},
	{name: "ledger balance beyond what the ledger holds", txs: func() []obj {
		var txs []obj
		for i := range 101 {
			txs = append(txs, charge(fmt.Sprintf("BIG-%d", i), "2025-06-02", "9999999999.99"))
		}
		return txs
	}(), want: []want{{CodeBalanceOutOfRange, "transactions"}}},
	{name: "unknown query value", query: "check_previously_added=maybe&force_add_to_current_statement=yes", txs: []obj{charge("T1", "2025-06-02", "1")},
		want: []want{{"invalid", "check_previously_added"}, {"invalid", "force_add_to_current_statement"}}},
	{name: "query parameter twice", query: "check_previously_added=true&check_previously_added=false", txs: []obj{charge("T1", "2025-06-02", "1")},
		want: []want{{"invalid", "check_previously_added"}}},
	{name: "unknown top-level field and missing transactions", raw: `{"import_supplier": "ACME", "external_account_number": %q, "extra": 1}`,
		want: []want{{"unknown_field", "extra"}, {"required", "transactions"}}},
	{name: "too many transactions", raw: `{"import_supplier": "ACME", "external_account_number": %q, "transactions": [` +
		strings.TrimSuffix(strings.Repeat(`{"transaction_id": "x", "transaction_date": "2025-06-01", "amount": 1, "type": "CREDIT", "reason": "GENERAL_CREDIT"},`, MaxTransactions+1), ",") + `]}`,
		want: func() []want {
			// The transaction beyond the limit is never built, so it has no
			// problems of its own.
			w := []want{{CodeTooManyItems, "transactions"}}
			for i := 1; i < MaxTransactions; i++ {
				w = append(w, want{CodeDuplicateTransactionIDs, fmt.Sprintf("transactions.%d.transaction_id", i)})
			}
			return w
		}()},
}

func transactionCaseCodes() []want {
	var w []want
	for _, c := range txRuleCases {
		w = append(w, c.want...)
	}
	return w
}

// Each rule refuses the whole request: nothing is added and the ledger does
// not move.
func TestTransactions_RulesRefuseTheWholeRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range txRuleCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := tc.account
			if a == (acct{}) {
				a = billedToMay
			}
			ean := b.newAccount(t, a)
			ctx := context.Background()
			if len(tc.before) > 0 {
				if _, err := b.svc.CreateTransactions(ctx, txBody(t, ean, tc.before...), nil, visible); err != nil {
					t.Fatalf("before: %v", err)
				}
			}
			countBefore, balanceBefore := b.txCount(t, ean), b.balance(t, ean)
			req := txBody(t, ean, tc.txs...)
			if tc.raw != "" {
				req = []byte(fmt.Sprintf(tc.raw, ean))
			}
			res, err := b.svc.CreateTransactions(ctx, req, query(tc.query), visible)
			if err == nil {
				t.Fatalf("accepted: %+v", res)
			}
			p := wantProblems(t, err, tc.want)
			if p.Code != CodeTransactionsFailed || p.Extra["status"] != TransactionImportError || p.Extra["error_detail"] == "" {
				t.Errorf("refusal is not in E7's form: code %q, extra %v", p.Code, p.Extra)
			}
			if n := b.txCount(t, ean); n != countBefore {
				t.Errorf("%d transactions written by a refused request", n-countBefore)
			}
			if bal := b.balance(t, ean); bal != balanceBefore {
				t.Errorf("balance moved from %s to %s", balanceBefore, bal)
			}
		})
	}
}

// The refusal carries the first failing transaction exactly as sent, and
// the first of its problems as error_detail.
func TestTransactions_RefusalEchoesTheFirstFailingTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	req := fmt.Sprintf(`{"import_supplier": "ACME", "external_account_number": %q, "transactions": [
		{"transaction_id": "OK", "transaction_date": "2025-06-02", "amount": 1.10, "type": "CREDIT", "reason": "GENERAL_CREDIT"},
		{"transaction_id": "LATE", "transaction_date": "2025-07-01", "amount": 2.505, "type": "CREDIT", "reason": "GENERAL_CREDIT"},
		{"transaction_id": "ALSO", "transaction_date": "2025-08-01", "amount": 3, "type": "CREDIT", "reason": "GENERAL_CREDIT"}]}`, ean)
	_, err := b.svc.CreateTransactions(context.Background(), []byte(req), nil, visible)
	p := problemOf(t, err, problem.Invalid)
	want := `{"transaction_id":"LATE","transaction_date":"2025-07-01","amount":"2.51","type":"CREDIT","reason":"GENERAL_CREDIT"}`
	got, _ := json.Marshal(p.Extra["transaction_data"])
	if string(got) != want {
		t.Errorf("transaction_data = %s, want %s", got, want)
	}
	if d, _ := p.Extra["error_detail"].(string); !strings.Contains(d, "2025-07-01") {
		t.Errorf("error_detail %q does not describe the first failure", d)
	}

	// Without a failing transaction, transaction_data is null.
	_, err = b.svc.CreateTransactions(context.Background(), []byte(`{"import_supplier": 5}`), nil, visible)
	p = problemOf(t, err, problem.Invalid)
	if v, ok := p.Extra["transaction_data"]; !ok || v != nil || p.Extra["status"] != TransactionImportError {
		t.Errorf("extra = %v", p.Extra)
	}
	// Valid amounts are answered as on success: amount with two places,
	// line and tax items exactly with at least two, strings read like
	// numbers; an invalid one stays as sent.
	req = fmt.Sprintf(`{"import_supplier": "ACME", "external_account_number": %q, "transactions": [
		{"transaction_id": "S", "transaction_date": "2025-06-02", "amount": 1.00000000005, "type": "SUPPLY_CHARGE", "product_code": "ELEC-STD",
		 "line_items": [{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-02", "number_of_units": 4.0,
		   "net_amount": 44, "price_per_unit": 11.0, "units": [4.0]}],
		 "tax_items": [{"amount": "9.2", "tax_type": "VAT", "value_taxed": 44.125, "rate": 0.21, "unit_type": "PROPORTION"}]}]}`, ean)
	_, err = b.svc.CreateTransactions(context.Background(), []byte(req), nil, visible)
	p = problemOf(t, err, problem.Invalid)
	want = `{"transaction_id":"S","transaction_date":"2025-06-02","amount":1.00000000005,"type":"SUPPLY_CHARGE","product_code":"ELEC-STD",` +
		`"line_items":[{"rate_band":"CONSUMPTION_STANDARD","start_date":"2025-06-01","end_date":"2025-06-02","number_of_units":4.0,` +
		`"net_amount":"44.00","price_per_unit":11.0,"units":[4.0]}],` +
		`"tax_items":[{"amount":"9.20","tax_type":"VAT","value_taxed":"44.125","rate":0.21,"unit_type":"PROPORTION"}]}`
	got, _ = json.Marshal(p.Extra["transaction_data"])
	if string(got) != want {
		t.Errorf("transaction_data = %s, want %s", got, want)
	}
	// transaction_data is null for a body that is not JSON too.
	_, err = b.svc.CreateTransactions(context.Background(), []byte(`{"import_supplier"`), nil, visible)
	p = problemOf(t, err, problem.Invalid)
	if p.Code != CodeParseError || p.Extra["status"] != TransactionImportError || p.Extra["error_detail"] != p.Detail {
		t.Errorf("parse error = %v %v", p.Code, p.Extra)
	}
}

func TestTransactions_AddedWithExactAmountsAndLedgerBalance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	txs := []obj{
		charge("C1", "2025-06-01", "71.1"),
		with(charge("CR1", "2025-06-02", "10.05"), "type", "CREDIT", "reason", "IMPORTED_CREDIT"),
		payment("P1", "2025-06-03", "20"),
		with(payment("R1", "2025-06-04", "5.000"), "type", "REPAYMENT", "reason", "FULL_CREDIT_REFUND"),
		supplyCharge("S1", "2025-06-15", "31.50"),
		charge("REV", "2025-06-05", "-0.10"),
	}
	res, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, txs...), nil, visible)
	if err != nil {
		t.Fatal(err)
	}
	// 71.10 - 10.05 - 20.00 + 5.00 + 31.50 - 0.10
	if got := b.balance(t, ean); got != "77.45" {
		t.Errorf("balance = %s, want 77.45", got)
	}
	out, _ := json.Marshal(res)
	var decoded struct {
		Results []struct {
			Status string         `json:"status"`
			Data   map[string]any `json:"transaction_data"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &decoded); err != nil {
		t.Fatal(err)
	}
	wantAmounts := []string{"71.10", "10.05", "20.00", "5.00", "31.50", "-0.10"}
	for i, r := range decoded.Results {
		if r.Status != TransactionAdded || r.Data["status"] != TransactionImportSuccess {
			t.Errorf("result %d: %s / %v", i, r.Status, r.Data["status"])
		}
		if r.Data["amount"] != wantAmounts[i] {
			t.Errorf("result %d amount = %#v, want %q", i, r.Data["amount"], wantAmounts[i])
		}
	}
	if s := string(out); !strings.Contains(s, `"net_amount":"30.00"`) || !strings.Contains(s, `"price_per_unit":0.243012`) ||
		!strings.Contains(s, `"units":[100.5,22.956]`) || !strings.Contains(s, `"value_taxed":"30.00"`) {
		t.Errorf("line and tax items not echoed exactly: %s", s)
	}

	type row struct {
		ID, Date, Amount, Type string
		Product                *string
	}
	var rows []row
	if err := b.db.Select(&rows, `SELECT transaction_id AS id, transaction_date::text AS date, amount::text AS amount, type,
		(SELECT code FROM products p WHERE p.id = t.product_id) AS product FROM transactions t ORDER BY t.id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 || rows[0].Amount != "71.10" || rows[4].Product == nil || *rows[4].Product != productCode || rows[5].Amount != "-0.10" {
		t.Errorf("rows = %+v", rows)
	}
	var li struct {
		Units, Count, Net, Price string
	}
	if err := b.db.Get(&li, `SELECT units::text AS units, number_of_units::text AS count, net_amount::text AS net, price_per_unit::text AS price
		FROM transaction_line_items`); err != nil {
		t.Fatal(err)
	}
	if li != (struct{ Units, Count, Net, Price string }{"{100.5,22.956}", "123.456", "30.00", "0.243012"}) {
		t.Errorf("line item stored as %+v", li)
	}
	var tax string
	if err := b.db.Get(&tax, `SELECT amount::text || ' ' || tax_type || ' ' || value_taxed::text || ' ' || rate::text || ' ' || unit_type FROM transaction_tax_items`); err != nil {
		t.Fatal(err)
	}
	if tax != "1.50 VAT 30.00 0.05 PROPORTION" {
		t.Errorf("tax item stored as %q", tax)
	}
}

// Amounts with up to ten decimal places, as numbers or as decimal strings
// (the reference's own example sends "10.00"), are stored and summed
// exactly; the answer gives a transaction's amount two places, rounded half
// away from zero, and the other money fields exactly.
func TestTransactions_FractionalPenniesAndDecimalStringsAreKeptExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	sc := supplyCharge("S1", "2025-06-02", "0.125")
	sc["line_items"].([]obj)[0]["number_of_units"] = num("1")
	sc["line_items"].([]obj)[0]["price_per_unit"] = num("0.119047619")
	sc["line_items"].([]obj)[0]["net_amount"] = "0.1190476190"
	sc["tax_items"].([]obj)[0]["amount"] = num("0.0059523810")
	sc["tax_items"].([]obj)[0]["value_taxed"] = "0.1190476190"
	txs := []obj{
		charge("C1", "2025-06-01", "0.125"),
		with(charge("C2", "2025-06-01", "1"), "amount", "10.00"),
		with(payment("P1", "2025-06-03", "1"), "amount", "00512.5"),
		with(charge("C3", "2025-06-01", "1"), "amount", ".5"),
		with(charge("C4", "2025-06-01", "1"), "amount", "-0.125"),
		with(charge("C5", "2025-06-01", "1"), "amount", "1234567890.1234567891"),
		sc,
	}
	res, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, txs...), nil, visible)
	if err != nil {
		p, _ := problem.As(err)
		t.Fatalf("refused: %v %+v", err, p)
	}
	out, _ := json.Marshal(res)
	var decoded struct {
		Results []struct {
			Data map[string]any `json:"transaction_data"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &decoded); err != nil {
		t.Fatal(err)
	}
	var answered []any
	for _, r := range decoded.Results {
		answered = append(answered, r.Data["amount"])
	}
	if diff := cmp.Diff([]any{"0.13", "10.00", "512.50", "0.50", "-0.13", "1234567890.12", "0.13"}, answered); diff != "" {
		t.Errorf("answered amounts (-want +got):\n%s", diff)
	}
	if s := string(out); !strings.Contains(s, `"net_amount":"0.119047619"`) || !strings.Contains(s, `"amount":"0.005952381"`) {
		t.Errorf("line and tax items not answered exactly: %s", s)
	}
	var stored []string
	if err := b.db.Select(&stored, `SELECT amount::text FROM transactions t JOIN accounts a ON a.id = t.account_id
		WHERE a.external_account_number = $1 ORDER BY t.id`, ean); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0.125", "10.00", "512.50", "0.50", "-0.125", "1234567890.1234567891", "0.125"}, stored); diff != "" {
		t.Errorf("stored amounts (-want +got):\n%s", diff)
	}
	// 0.125 + 10 - 512.5 + 0.5 - 0.125 + 1234567890.1234567891 + 0.125
	if got := b.balance(t, ean); got != "1234567388.2484567891" {
		t.Errorf("balance = %s, want the exact sum 1234567388.2484567891", got)
	}
}

// Sums that binary floats get wrong come out exact.
func TestTransactions_AmountsNeverPassThroughFloat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	var txs []obj
	for i := range 10 {
		txs = append(txs, charge(fmt.Sprintf("T%d", i), "2025-06-02", "0.10"))
	}
	txs = append(txs, charge("BIG", "2025-06-02", "9999999999.99"), charge("BIG2", "2025-06-02", "0.01"))
	if _, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, txs...), nil, visible); err != nil {
		t.Fatal(err)
	}
	if got := b.balance(t, ean); got != "10000000001.00" {
		t.Errorf("balance = %s, want 10000000001.00", got)
	}
}

// The open statement period starts the day after the latest billed day:
// the last statement's (inclusive) end or last_billed_to_date; without
// either, on the creation date.
func TestTransactions_OpenStatementPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name       string
		account    acct
		statements []string // bill_period_to_date of statements imported first
		firstDay   string   // the open period's first day
	}{
		{name: "the day after the last billed date", account: acct{lastBilled: "2025-05-31"}, firstDay: "2025-06-01"},
		{name: "the creation date without a billed date", account: acct{createdAt: time.Date(2025, 3, 9, 23, 0, 0, 0, time.UTC)}, firstDay: "2025-03-09"},
		{name: "older statements never reopen a billed period", account: acct{lastBilled: "2025-05-31"},
			statements: []string{"2025-02-28", "2025-04-30", "2025-03-31"}, firstDay: "2025-06-01"},
		{name: "the day after a statement that ends later than the billed date", account: acct{lastBilled: "2025-03-31"},
			statements: []string{"2025-06-10"}, firstDay: "2025-06-11"},
		{name: "the day after the latest of several statements without a billed date", statements: []string{"2025-02-28", "2025-04-30", "2025-03-31"},
			firstDay: "2025-05-01"},
		{name: "a statement ending yesterday: today is open", statements: []string{"2025-06-14"}, firstDay: "2025-06-15"},
		{name: "the day after the payload ledger's closing date", account: acct{closing: "2025-05-20"}, firstDay: "2025-05-21"},
		{name: "the day after the billed date when later than the ledger's closing date", account: acct{lastBilled: "2025-05-31", closing: "2025-05-20"},
			firstDay: "2025-06-01"},
		{name: "the day after the ledger's closing date when later than the billed date and statements", account: acct{lastBilled: "2025-04-30", closing: "2025-05-31"},
			statements: []string{"2025-03-31"}, firstDay: "2025-06-01"},
		{name: "account created today: today is open", account: acct{createdAt: testNow.Add(-time.Hour)}, firstDay: "2025-06-15"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ean := b.newAccount(t, tc.account)
			for i, end := range tc.statements {
				st := statement(fmt.Sprintf("S%d", i), end[:8]+"01", end) // the end's month: periods must not overlap
				if _, err := b.svc.CreateStatements(ctx, stBody(t, ean, st), visible); err != nil {
					t.Fatal(err)
				}
			}
			first, _ := time.Parse(time.DateOnly, tc.firstDay)
			dayBefore := first.AddDate(0, 0, -1).Format(time.DateOnly)
			noForce := query("force_add_to_current_statement=false")
			_, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("BEFORE", dayBefore, "1")), noForce, visible)
			wantProblems(t, err, []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}})
			if _, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("FIRST", tc.firstDay, "1")), noForce, visible); err != nil {
				t.Errorf("first day of the period refused: %v", err)
			}
			// With force (the default) the early one moves to the first day.
			res, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("BEFORE", dayBefore, "1")), nil, visible)
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Results[0].TransactionData.TransactionDate; string(d) != tc.firstDay {
				t.Errorf("moved to %s, want %s", d, tc.firstDay)
			}
		})
	}
}

func TestTransactions_ForceMovesIntoThePeriodWithDescriptionAndPinnedNote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	res, err := b.svc.CreateTransactions(context.Background(),
		txBody(t, ean, charge("OLD", "2024-12-24", "12.00"), charge("NEW", "2025-06-10", "1.00"), payment("OLDP", "2025-05-31", "3")), nil, visible)
	if err != nil {
		t.Fatal(err)
	}
	old := res.Results[0].TransactionData
	if old.TransactionDate != "2025-06-01" || old.OriginalTransactionDate == nil || *old.OriginalTransactionDate != "2024-12-24" ||
		old.Description == nil || !strings.Contains(*old.Description, "2024-12-24") {
		t.Errorf("moved transaction answered as %+v", old)
	}
	if nw := res.Results[1].TransactionData; nw.TransactionDate != "2025-06-10" || nw.Description != nil || nw.OriginalTransactionDate != nil {
		t.Errorf("transaction inside the period was changed: %+v", nw)
	}
	var stored struct {
		Date, Original string
		Description    string
	}
	if err := b.db.Get(&stored, `SELECT transaction_date::text AS date, original_transaction_date::text AS original, description
		FROM transactions WHERE transaction_id = 'OLD'`); err != nil {
		t.Fatal(err)
	}
	if stored.Date != "2025-06-01" || stored.Original != "2024-12-24" || stored.Description == "" {
		t.Errorf("stored %+v", stored)
	}
	var notes []struct {
		Body   string
		Pinned bool `db:"is_pinned"`
	}
	if err := b.db.Select(&notes, `SELECT n.body, n.is_pinned FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = $1`, ean); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !notes[0].Pinned || !strings.Contains(notes[0].Body, "OLD (dated 2024-12-24)") ||
		!strings.Contains(notes[0].Body, "OLDP (dated 2025-05-31)") || strings.Contains(notes[0].Body, "NEW") {
		t.Errorf("notes = %+v, want one pinned note naming OLD and OLDP", notes)
	}
	// Re-sending moves nothing again, so no second note.
	if _, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, charge("OLD", "2024-12-24", "12.00")), nil, visible); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM notes`); n != 1 {
		t.Errorf("%d notes after a re-send, want 1", n)
	}
}

// A dry run answers what the real run then answers, with dry_run true, and
// writes nothing: no transaction, no ledger change, no pinned note.
func TestTransactions_DryRunAnswersAsTheRealRunAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	ctx := context.Background()
	txs := []obj{charge("OLD", "2025-04-01", "12.00"), payment("P1", "2025-06-03", "20")}
	dry := body(t, obj{"import_supplier": supplierCode, "external_account_number": ean, "dry_run": true, "transactions": txs})
	res, err := b.svc.CreateTransactions(ctx, dry, nil, visible)
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || res.Results[0].TransactionData.TransactionDate != "2025-06-01" || res.Results[1].Status != TransactionAdded {
		t.Errorf("dry run answered %+v", res)
	}
	if n, notes, bal := b.txCount(t, ean), b.count(t, `SELECT count(*) FROM notes`), b.balance(t, ean); n != 0 || notes != 0 || bal != "0.00" {
		t.Errorf("a dry run wrote: %d transactions, %d notes, balance %s", n, notes, bal)
	}
	for _, dryRun := range []any{false, nil} {
		real := obj{"import_supplier": supplierCode, "external_account_number": ean, "transactions": txs}
		if dryRun != nil {
			real["dry_run"] = dryRun
		}
		got, err := b.svc.CreateTransactions(ctx, body(t, real), nil, visible)
		if err != nil {
			t.Fatal(err)
		}
		if dryRun == nil {
			break // sent again: the transactions exist now
		}
		want := *res
		want.DryRun = false
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("real run (-dry run +real):\n%s", diff)
		}
	}
	if n, notes, bal := b.txCount(t, ean), b.count(t, `SELECT count(*) FROM notes`), b.balance(t, ean); n != 2 || notes != 1 || bal != "-8.00" {
		t.Errorf("after the real run: %d transactions, %d notes, balance %s; want 2, 1, -8.00", n, notes, bal)
	}
	out, _ := json.Marshal(res)
	if !strings.HasSuffix(string(out), `,"dry_run":true}`) {
		t.Errorf("dry run answer %s has no dry_run", out)
	}
}

func TestTransactions_CheckPreviouslyAddedSkipsKnownIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	ctx := context.Background()
	if _, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("A", "2025-06-02", "10")), nil, visible); err != nil {
		t.Fatal(err)
	}
	// The known one is skipped even though it now differs, and even when it
	// would be refused on its own: it is not imported again.
	res, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("A", "2025-06-02", "99"), charge("B", "2025-06-03", "5")),
		query("check_previously_added=true&force_add_to_current_statement=false"), visible)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{res.Results[0].Status, res.Results[1].Status}
	if diff := cmp.Diff([]string{TransactionAlreadyExists, TransactionAdded}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if bal := b.balance(t, ean); bal != "15.00" {
		t.Errorf("balance = %s, want 15.00", bal)
	}
}

// With check_previously_added=false the service does not look for known
// ids, as the caller asked: a transaction whose id the account has is added
// again. The reference refuses a repeated id only within one request.
func TestTransactions_WithoutThePreviouslyAddedCheckKnownIDsAreAdded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	ctx := context.Background()
	if _, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("T1", "2025-06-02", "10")), nil, visible); err != nil {
		t.Fatal(err)
	}
	// Both rounds send T1, which the account has, and T2, which the second
	// round finds added by the first.
	for _, q := range []string{"check_previously_added=false", "check_previously_added=false&force_add_to_current_statement=false"} {
		res, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("T2", "2025-06-02", "1"), charge("T1", "2025-06-03", "5")), query(q), visible)
		if err != nil {
			p, _ := problem.As(err)
			t.Fatalf("%s: refused: %v %+v", q, err, p)
		}
		if got := []string{res.Results[0].Status, res.Results[1].Status}; !slices.Equal(got, []string{TransactionAdded, TransactionAdded}) {
			t.Errorf("%s: statuses = %v", q, got)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM transactions t JOIN accounts a ON a.id = t.account_id
		WHERE a.external_account_number = $1 AND t.transaction_id = 'T1'`, ean); n != 3 {
		t.Errorf("%d transactions T1, want 3", n)
	}
	// 10 + 2 × (1 + 5)
	if bal := b.balance(t, ean); bal != "22.00" {
		t.Errorf("balance = %s, want 22.00", bal)
	}
}

// A request that timed out (rolled back while waiting) or whose answer was
// lost (committed) can be sent again: nothing is added twice.
func TestTransactions_ResendAfterTimeoutAddsNothingTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	ctx := context.Background()
	req := txBody(t, ean, charge("X1", "2025-06-02", "10.00"), payment("X2", "2025-06-03", "4.00"))

	// Another transaction holds the account; the request times out.
	hold, err := b.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(`SELECT 1 FROM accounts WHERE external_account_number = $1 FOR UPDATE`, ean); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.svc.CreateTransactions(tctx, req, nil, visible)
	cancel()
	if err == nil {
		t.Fatal("request succeeded while the account was locked")
	}
	_ = hold.Rollback()
	if n := b.count(t, `SELECT count(*) FROM transactions`); n != 0 {
		t.Fatalf("a timed-out request left %d transactions", n)
	}

	for i, want := range []string{TransactionAdded, TransactionAlreadyExists, TransactionAlreadyExists} {
		res, err := b.svc.CreateTransactions(ctx, req, nil, visible)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		for _, r := range res.Results {
			if r.Status != want {
				t.Errorf("send %d: status %s, want %s", i, r.Status, want)
			}
		}
	}
	if n, bal := b.count(t, `SELECT count(*) FROM transactions`), b.balance(t, ean); n != 2 || bal != "6.00" {
		t.Errorf("after re-sends: %d transactions, balance %s; want 2, 6.00", n, bal)
	}
}

func TestTransactions_ConcurrentIdenticalRequestsAddOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	var txs []obj
	for i := range 200 {
		txs = append(txs, charge(fmt.Sprintf("C%d", i), "2025-06-02", "1.25"))
	}
	req := txBody(t, ean, txs...)
	// All start at once, so that without the account lock they would
	// overlap, and the later ones would fail on the unique constraint.
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			<-start
			_, errs[i] = b.svc.CreateTransactions(context.Background(), req, nil, visible)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if n, bal := b.count(t, `SELECT count(*) FROM transactions`), b.balance(t, ean); n != 200 || bal != "250.00" {
		t.Errorf("%d transactions, balance %s; want 200, 250.00", n, bal)
	}
}

func TestTransactions_ThousandInOneRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	var txs []obj
	for i := range 1000 {
		tx := supplyChargeOf(fmt.Sprintf("S%04d", i), fmt.Sprintf("2025-06-%02d", 1+i%15), fmt.Sprintf("%d.%02d", i, i%100))
		txs = append(txs, tx)
	}
	res, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, txs...), nil, visible)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1000 || res.Results[999].TransactionData.TransactionID != "S0999" {
		t.Fatalf("%d results", len(res.Results))
	}
	// sum of i for i<1000 is 499500; sum of (i%100)/100 is 10 * 49.50.
	if n, bal := b.count(t, `SELECT count(*) FROM transactions`), b.balance(t, ean); n != 1000 || bal != "499995.00" {
		t.Errorf("%d transactions, balance %s; want 1000, 499995.00", n, bal)
	}
	if n := b.count(t, `SELECT count(*) FROM transaction_line_items`) + b.count(t, `SELECT count(*) FROM transaction_tax_items`); n != 2000 {
		t.Errorf("%d items, want 2000", n)
	}
}

// An account that is not an imported account the caller may see is 404,
// whatever else is wrong with the request.
var notFoundCodes = []want{{CodeAccountNotFound, "external_account_number"}}

func TestTransactions_AccountNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range notFoundCases(t, b) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := body(t, obj{"import_supplier": tc.supplier, "external_account_number": tc.ean,
				"transactions": []obj{charge("T1", "2025-06-02", "1"), charge("T2", "2999-01-01", "1.001")}})
			_, err := b.svc.CreateTransactions(context.Background(), req, nil, visible)
			p := problemOf(t, err, problem.NotFound)
			if diff := cmp.Diff(notFoundCodes, problems(p)); diff != "" || p.Code != CodeAccountNotFound {
				t.Errorf("%s: %s", p.Code, diff)
			}
		})
	}
}

type notFoundCase struct{ name, supplier, ean string }

// notFoundCases are the accounts that must look the same: absent.
func notFoundCases(t *testing.T, b *bundle) []notFoundCase {
	return []notFoundCase{
		{"unknown account", supplierCode, "NO-SUCH-ACCOUNT"},
		{"staged but not created", supplierCode, b.stagedAccount(t)},
		{"account of another supplier", "OTHER", b.newAccount(t, acct{})},
		{"supplier the key may not see", hiddenCode, b.newAccount(t, acct{supplier: hiddenCode})},
		{"unknown supplier", "NOPE", "EXT-1"},
	}
}

// Optional parts stay NULL: a line item without units, a transaction
// without items beside one with them.
func TestTransactions_OptionalPartsAreStoredAsNull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	sc := supplyCharge("S1", "2025-06-02", "0.47")
	sc["line_items"] = []obj{{"rate_band": "STANDING_CHARGE", "start_date": "2025-06-01", "end_date": "2025-06-01",
		"number_of_units": num("1"), "net_amount": num("0.45"), "price_per_unit": num("0.45")}}
	sc["tax_items"] = []obj{{"amount": num("0.02"), "tax_type": "VAT", "value_taxed": num("0.45"), "rate": num("5"), "unit_type": "PROPORTION"}}
	if _, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, payment("P1", "2025-06-01", "1"), sc), nil, visible); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM transaction_line_items WHERE units IS NULL`); n != 1 {
		t.Errorf("%d line items without units, want 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM transactions WHERE transaction_id = 'P1' AND product_id IS NULL AND display_note IS NULL AND original_transaction_date IS NULL`); n != 1 {
		t.Errorf("payment row has values it was not sent")
	}
}

// A request waits for another import on the same account and then sees
// its transaction.
func TestTransactions_RequestWaitsForAnotherImportOnTheAccount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	var res *TransactionsResult
	err := b.whileHeld(t, ean, func(tx *sqlx.Tx, id int64) {
		if _, err := tx.Exec(`INSERT INTO transactions (account_id, transaction_id, transaction_date, amount, type, reason)
			VALUES ($1, 'T1', '2025-06-02', 5, 'CHARGE', 'IMPORTED_CHARGE')`, id); err != nil {
			t.Fatal(err)
		}
	}, func() (err error) {
		res, err = b.svc.CreateTransactions(context.Background(), txBody(t, ean, charge("T1", "2025-06-02", "5")), nil, visible)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Status != TransactionAlreadyExists || b.txCount(t, ean) != 1 {
		t.Errorf("status %s with %d transactions, want TRANSACTION_ALREADY_EXISTS and 1", res.Results[0].Status, b.txCount(t, ean))
	}
}

// A request that waited for another import on the account decides on what
// that import wrote: its transactions, and the open period its statements
// moved. The request reads the account before the lock is granted, so each
// case would answer from the older state if the write did not check it.
func TestTransactions_RequestDecidesOnWhatTheImportItWaitedForWrote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	insertT1 := `INSERT INTO transactions (account_id, transaction_id, transaction_date, amount, type, reason)
		VALUES ($1, 'T1', '2025-06-02', 5, 'CHARGE', 'IMPORTED_CHARGE')`
	// The open period of an account billed to May starts on 2025-06-01;
	// this statement, billed to 2025-06-04 inclusive, moves it to 2025-06-05.
	insertStatement := `INSERT INTO historical_statements (account_id, statement_id, bill_period_from_date, bill_period_to_date)
		VALUES ($1, 'S1', '2025-05-01', '2025-06-04')`
	type stored struct{ Date, Original string }
	cases := []struct {
		name   string
		write  string
		query  string
		txs    []obj
		want   []want   // problems, or nil for a 201
		stored []stored // the transactions T2 and T3 as stored, in id order
		notes  int      // pinned notes
	}{
		{name: "a transaction it added is skipped", write: insertT1,
			txs: []obj{charge("T2", "2025-06-03", "1"), charge("T1", "2025-06-02", "5")}, stored: []stored{{"2025-06-03", ""}}},
		{name: "a moved open period moves the transactions before it", write: insertStatement,
			txs:    []obj{charge("T2", "2025-06-03", "1"), charge("T3", "2025-06-06", "1")},
			stored: []stored{{"2025-06-05", "2025-06-03"}, {"2025-06-06", ""}}, notes: 1},
		{name: "a moved open period refuses the transactions before it without force", write: insertStatement,
			query: "force_add_to_current_statement=false", txs: []obj{charge("T2", "2025-06-03", "1"), charge("T3", "2025-06-06", "1")},
			want: []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := b.newAccount(t, billedToMay)
			err := b.whileHeld(t, ean, func(tx *sqlx.Tx, id int64) {
				if _, err := tx.Exec(tc.write, id); err != nil {
					t.Fatal(err)
				}
			}, func() error {
				_, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, tc.txs...), query(tc.query), visible)
				return err
			})
			t.Logf("err: %v", err)
			if tc.want != nil {
				wantProblems(t, err, tc.want)
			} else if err != nil {
				t.Fatal(err)
			}
			var got []stored
			if err := b.db.Select(&got, `SELECT to_char(transaction_date, 'YYYY-MM-DD') AS date,
					COALESCE(to_char(original_transaction_date, 'YYYY-MM-DD'), '') AS original
				FROM transactions t JOIN accounts a ON a.id = t.account_id
				WHERE a.external_account_number = $1 AND t.transaction_id <> 'T1' ORDER BY t.id`, ean); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.stored, got); diff != "" {
				t.Errorf("stored transactions (-want +got):\n%s", diff)
			}
			if n := b.count(t, `SELECT count(*) FROM notes n JOIN accounts a ON a.id = n.account_id
				WHERE a.external_account_number = $1 AND n.is_pinned`, ean); n != tc.notes {
				t.Errorf("%d pinned notes, want %d", n, tc.notes)
			}
		})
	}
}

// Codes the spec lists only "in use" are open, and reference, note,
// display_note and payment_type are accepted on every type: all are stored
// as sent.
func TestTransactions_OpenCodesAndFieldsOnAnyTypeAreStoredAsSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	sc := with(supplyCharge("S1", "2025-06-02", "30"), "reason", "SUPPLY_ADJUSTMENT", "note", "internal", "payment_type", "DIRECT_CREDIT",
		"reference", "SC-1")
	sc["line_items"] = []obj{{"rate_band": "peak", "start_date": "2025-06-01", "end_date": "2025-06-02",
		"number_of_units": num("1"), "net_amount": num("30"), "price_per_unit": num("30")}}
	sc["tax_items"] = []obj{{"amount": num("0"), "tax_type": "G.S.T.", "value_taxed": num("30"), "rate": num("-0.2"), "unit_type": "basis points"}}
	txs := []obj{
		with(payment("P1", "2025-06-02", "71"), "reason", "general credit", "payment_type", "", "display_note", "Thank you", "note", "n"),
		with(charge("C1", "2025-06-02", "1"), "reason", "PREPAY_DEBT_ADJUSTMENT", "reference", "C-1", "payment_type", "CASH",
			"to_prepay_meter_serial_number", "Z16N389556"),
		with(charge("CR1", "2025-06-02", "1"), "type", "CREDIT", "reason", "GOODWILL", "reference", "CR-1", "payment_type", "Direct-Debit"),
		sc,
	}
	if _, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, txs...), nil, visible); err != nil {
		t.Fatal(err)
	}
	var rows []string
	if err := b.db.Select(&rows, `SELECT concat_ws(' | ', transaction_id, type, COALESCE(reason, '-'), COALESCE(reference, '-'),
			COALESCE(payment_type, '-'), COALESCE(display_note, '-'), COALESCE(note, '-'), COALESCE(to_prepay_meter_serial_number, '-'))
		FROM transactions ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"P1 | PAYMENT | general credit | PAY-P1 |  | Thank you | n | -",
		"C1 | CHARGE | PREPAY_DEBT_ADJUSTMENT | C-1 | CASH | Imported charge | from the old system | Z16N389556",
		"CR1 | CREDIT | GOODWILL | CR-1 | Direct-Debit | Imported charge | from the old system | -",
		"S1 | SUPPLY_CHARGE | SUPPLY_ADJUSTMENT | SC-1 | DIRECT_CREDIT | Electricity | internal | -",
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	var items string
	if err := b.db.Get(&items, `SELECT (SELECT rate_band FROM transaction_line_items) || ' ' || (SELECT tax_type || ' ' || unit_type || ' ' || rate FROM transaction_tax_items)`); err != nil {
		t.Fatal(err)
	}
	if items != "peak G.S.T. basis points -0.2" {
		t.Errorf("items stored as %q", items)
	}
}

// reason is required on no type, and product_code, line_items and
// tax_items are accepted on every type: spec 2.7 shows them with some types
// "in the usage shown", which is an example, not a rule.
func TestTransactions_FieldsShownWithSomeTypesAreAcceptedOnEveryType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	items := supplyCharge("X", "2025-06-02", "1")
	txs := []obj{
		with(charge("C1", "2025-06-02", "1"), "reason", nil),
		with(charge("CR1", "2025-06-02", "1"), "type", "CREDIT", "reason", nil),
		with(payment("P1", "2025-06-02", "30"), "reason", nil, "product_code", productCode, "line_items", items["line_items"], "tax_items", items["tax_items"]),
		with(payment("R1", "2025-06-02", "2"), "type", "REPAYMENT", "reason", nil, "line_items", []obj{}),
		with(charge("C2", "2025-06-02", "3"), "product_code", productCode),
	}
	if _, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, txs...), nil, visible); err != nil {
		p, _ := problem.As(err)
		t.Fatalf("refused: %v %+v", err, p)
	}
	var rows []string
	if err := b.db.Select(&rows, `SELECT concat_ws(' | ', t.transaction_id, COALESCE(t.reason, '-'), COALESCE(p.code, '-'),
			(SELECT count(*) FROM transaction_line_items l WHERE l.transaction_row_id = t.id),
			(SELECT count(*) FROM transaction_tax_items x WHERE x.transaction_row_id = t.id))
		FROM transactions t LEFT JOIN products p ON p.id = t.product_id ORDER BY t.id`); err != nil {
		t.Fatal(err)
	}
	want := []string{"C1 | - | - | 0 | 0", "CR1 | - | - | 0 | 0", "P1 | - | " + productCode + " | 1 | 1", "R1 | - | - | 0 | 0", "C2 | IMPORTED_CHARGE | " + productCode + " | 0 | 0"}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// The write of a request that was decided without the lock (post_transactions
// called on its own) locks the account and writes only when what the request
// was decided on still holds; otherwise it writes nothing, not even the
// ledger, and the caller decides again under the lock.
func TestTransactions_DirectWriteRechecksWhatTheRequestDecidedOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ts := []Transaction{
		{TransactionID: "D1", TransactionDate: "2025-06-02", Amount: Amount{Money{decimal.RequireFromString("10.50")}}, Type: TypeCharge},
		{TransactionID: "D2", TransactionDate: "2025-06-03", Amount: Amount{Money{decimal.RequireFromString("4")}}, Type: TypePayment},
	}
	cases := []struct {
		name         string
		before       string // run with the account's row id before the write, or ""
		firstOpenDay string
		wrote        bool
		count        int // the account's transactions after the write
		balance      string
	}{
		{name: "unchanged account", firstOpenDay: "2025-06-01", wrote: true, count: 2, balance: "6.50"},
		{name: "open period moved", firstOpenDay: "2025-06-01", count: 0, balance: "0.00",
			before: `INSERT INTO historical_statements (account_id, statement_id, bill_period_from_date, bill_period_to_date)
				VALUES ($1, 'S1', '2025-05-01', '2025-06-05')`},
		{name: "transaction id added since", firstOpenDay: "2025-06-01", count: 1, balance: "0.00",
			before: `INSERT INTO transactions (account_id, transaction_id, transaction_date, amount, type, reason)
				VALUES ($1, 'D2', '2025-06-02', 5, 'CHARGE', 'IMPORTED_CHARGE')`},
		{name: "decided on another period", firstOpenDay: "2025-05-20", count: 0, balance: "0.00"},
		{name: "decided without a lookup", wrote: true, count: 2, balance: "6.50"},
		{name: "decided without a lookup, a date before the open period", count: 0, balance: "0.00",
			before: `UPDATE accounts SET last_billed_to_date = '2025-06-02' WHERE id = $1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := b.newAccount(t, billedToMay)
			var id int64
			if err := b.db.Get(&id, `SELECT id FROM accounts WHERE external_account_number = $1`, ean); err != nil {
				t.Fatal(err)
			}
			if tc.before != "" {
				if _, err := b.db.Exec(tc.before, id); err != nil {
					t.Fatal(err)
				}
			}
			wrote, err := insertTransactions(ctx, b.svc.db, supplierCode, ean, ts, []int{0, 1}, tc.firstOpenDay, true)
			if err != nil {
				t.Fatal(err)
			}
			got := []any{wrote, b.txCount(t, ean), b.balance(t, ean)}
			if diff := cmp.Diff([]any{tc.wrote, tc.count, tc.balance}, got); diff != "" {
				t.Errorf("wrote, transactions, balance (-want +got):\n%s", diff)
			}
		})
	}
}

// A SUPPLY_CHARGE as the reference's example sends it is added, and so are
// line items whose net amount is the product rounded to the places it
// carries, a tie either way; the amount is compared with the items
// exactly, and a negative SUPPLY_CHARGE (a reversal) is the same rule with
// the signs turned.
func TestTransactions_SupplyChargeConsistentWithItsItemsIsAdded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name string
		tx   obj
	}{
		{"the reference's example", referenceSupplyCharge("S1", "2025-06-02")},
		{"its amount as a decimal string", with(referenceSupplyCharge("S1", "2025-06-02"), "amount", "53.240")},
		{"net amount rounded down from the product", with(supplyCharge("S1", "2025-06-02", "31.50"), "line_items", []obj{lineItem("123.456", "0.243012", "30.00")})},
		{"net amount without places, the product rounded to two", with(supplyCharge("S1", "2025-06-02", "31.50"), "line_items", []obj{lineItem("123.456", "0.243012", "30")})},
		{"a tie rounded half up", with(supplyCharge("S1", "2025-06-02", "1.63"), "line_items", []obj{lineItem("1", "0.125", "0.13")})},
		{"a tie rounded half even", with(supplyCharge("S1", "2025-06-02", "1.62"), "line_items", []obj{lineItem("1", "0.125", "0.12")})},
		{"a fractional-penny net amount exact to its places", with(supplyCharge("S1", "2025-06-02", "1.6190476"), "line_items", []obj{lineItem("1", "0.119047619", "0.1190476")})},
		{"a reversal", with(referenceSupplyCharge("S1", "2025-06-02"), "amount", num("-53.24"),
			"line_items", []obj{lineItem("-4.0", "11.0", "-44.0")},
			"tax_items", []obj{{"amount": num("-9.24"), "tax_type": "VAT", "value_taxed": num("-44.0"), "rate": num("0.21"), "unit_type": "PROPORTION"}})},
		{"two line items and no tax", with(supplyCharge("S1", "2025-06-02", "10.25"), "tax_items", nil,
			"line_items", []obj{lineItem("10", "0.5", "5"), lineItem("21", "0.25", "5.25")})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := b.newAccount(t, billedToMay)
			if _, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, tc.tx), nil, visible); err != nil {
				p, _ := problem.As(err)
				t.Fatalf("refused: %v %+v", err, p)
			}
			if n := b.txCount(t, ean); n != 1 {
				t.Errorf("%d transactions added, want 1", n)
			}
		})
	}
}

// A statement's bill_period_to_date is its last billed day (reference 3.5:
// "both inclusive"): a transaction dated on it is in a billed period, so it
// is refused without force and moved to the next day with it; a statement
// ending today leaves no open day until tomorrow.
func TestTransactions_DatedOnAStatementsLastDayIsInABilledPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	noForce := query("force_add_to_current_statement=false")

	ean := b.newAccount(t, acct{})
	if _, err := b.svc.CreateStatements(ctx, stBody(t, ean, statement("MAY", "2025-05-01", "2025-05-31")), visible); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("LAST", "2025-05-31", "1")), noForce, visible)
	wantProblems(t, err, []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}})
	res, err := b.svc.CreateTransactions(ctx, txBody(t, ean, charge("LAST", "2025-05-31", "1"), charge("NEXT", "2025-06-01", "1")), nil, visible)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Results {
		d := r.TransactionData
		orig := "-"
		if d.OriginalTransactionDate != nil {
			orig = string(*d.OriginalTransactionDate)
		}
		got = append(got, d.TransactionID+" "+string(d.TransactionDate)+" "+orig)
	}
	if diff := cmp.Diff([]string{"LAST 2025-06-01 2025-05-31", "NEXT 2025-06-01 -"}, got); diff != "" {
		t.Errorf("added (id, date, date sent) (-want +got):\n%s", diff)
	}

	today := b.newAccount(t, acct{})
	if _, err := b.svc.CreateStatements(ctx, stBody(t, today, statement("JUNE", "2025-06-01", "2025-06-15")), visible); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.CreateTransactions(ctx, txBody(t, today, charge("TODAY", "2025-06-15", "1")), nil, visible)
	wantProblems(t, err, []want{{CodeNotInOpenPeriod, "transactions.0.transaction_date"}})
}
