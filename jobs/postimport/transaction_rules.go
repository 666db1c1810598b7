package postimport

import (
	"slices"
	"strings"

	"github.com/shopspring/decimal"

	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// Codes of the rules of one transaction that the reference gives for a
// SUPPLY_CHARGE's line and tax items (3.5 and 9).
const (
	// CodeIncorrectNetAmount: a line item's net_amount is not its
	// number_of_units times its price_per_unit.
	CodeIncorrectNetAmount = "incorrect_line_item_net_amount"
	// CodeUnitsNotTwoValues: a line item's units is not a pair.
	CodeUnitsNotTwoValues = "line_item_units_must_be_two_values"
	// CodeAmountNotItemsSum: a SUPPLY_CHARGE's amount is not the sum of its
	// line items' net amounts and its tax items' amounts.
	CodeAmountNotItemsSum = "ledger_transaction_amount_does_not_match_with_line_item_net_amount_and_tax_amount"
)

// TransactionRule is a rule of one transaction that E7 and the account
// payload's ledgers both check (TransactionChecks, and the product lookup):
// Field is where it is reported, relative to the transaction, with [] for
// an array's index ("line_items[].net_amount").
type TransactionRule struct {
	Code, Field, Text string
}

// netAmountRule says how a line item's net_amount is compared with
// number_of_units times price_per_unit.
const netAmountRule = "`net_amount` is `number_of_units` × `price_per_unit`, multiplied exactly, then rounded to the decimal places that `net_amount` carries (at least two, the currency's minor unit; trailing zeros do not count, so `44.0` carries two): `net_amount` may differ from the exact product by at most half a unit in that last place, so a tie rounded either way (half up, half even) is accepted and nothing else is. `4.0` × `11.0` = `44` is `44.0`; `123.456` × `0.243012` = `30.001289...` is `30.00`, but not `30.01` nor `30`; a fractional-penny `0.1190476` must match to seven places. On every line item, of any type. Source: reference 3.5 (`incorrect_line_item_net_amount`), which does not say how it rounds; the reading is argued in docs/decisions.md (\"A SUPPLY_CHARGE's items and amount\")."

// TransactionItemRules are the rules of one transaction that E7 and the
// account payload's ledgers share, in the words of both RULES.md files.
// TestRules_EveryRuleIsTested here and the account's
// TestRules_EverySemanticCodeIsTested keep each one tested.
var TransactionItemRules = []TransactionRule{
	{CodeDuplicateTransactionIDs, "transaction_id", "A transaction id appears once in a request (reported at the second occurrence). Source: reference 3.5 (`duplicate_transaction_ids`)."},
	{CodeTransactionInFuture, "transaction_date", "Not after today, dated in the supplier's time zone (UTC unless the operator set one), with or without force. Source: reference 3.5 (`transaction_in_future`)."},
	{CodeProductNotFound, "product_code", "A product code names a product of the catalogue (required on a SUPPLY_CHARGE, optional on the other types). Source: reference 3.5 (`product_code_does_not_exist`)."},
	{CodeAmountNotPositive, "amount", "A PAYMENT or REPAYMENT is a positive amount. CHARGE, CREDIT and SUPPLY_CHARGE may be negative (a reversal) or zero. Source: reference 3.5 (\"Payments and repayments must be positive numbers\")."},
	{CodeAmountPrecision, "amount", "Every amount (also `net_amount`, a tax item's `amount` and `value_taxed`) has at most 10 decimal places. Trailing zeros do not count (`71.00000000000` is `71`); nothing is ever rounded on the way in. Source: reference 3.5 (pattern `^-?\\d{0,10}(?:\\.\\d{0,10})?$`)."},
	{CodeAmountOutOfRange, "amount", "Every amount is below 10,000,000,000 in absolute value. Source: reference 3.5 (at most 10 digits before the point)."},
	{v.CodeInvalid, "amount", "Every amount is a JSON number (exponents included, read exactly), or a JSON string holding a decimal number in the reference's form: an optional minus sign, digits, an optional point (`\"10.00\"`, `\"00512.5\"`, `\".5\"`, `\"5.\"`); no exponent, plus sign or spaces in a string. Both forms are read exactly, never through a binary float, and give the same amount. Source: reference 3.5 (`amount` is a decimal string; its example sends `\"10.00\"`) and spec 2.7 (\"number in requests\")."},
	{v.CodeRequired, "line_items", "A SUPPLY_CHARGE has at least one line item: omitted or `[]` is refused. Source: reference 3.5 (a SUPPLY_CHARGE needs `line_items`)."},
	{CodeStartAfterEnd, "line_items[].start_date", "Not after the line item's `end_date` (both inclusive). Source: reference 3.5 (`start_date_later_than_end_date`)."},
	{CodeIncorrectNetAmount, "line_items[].net_amount", netAmountRule},
	{CodeUnitsNotTwoValues, "line_items[].units", "When given, `units` holds exactly two numbers (the reference's example: `[4.0, 8.0]`). On every line item, of any type. Source: reference 9 (`line_item_units_must_be_two_values`)."},
	{CodeAmountNotItemsSum, "amount", "A SUPPLY_CHARGE's `amount` equals the sum of its line items' `net_amount` and its tax items' `amount`, compared exactly (no rounding: all of them are money as sent): `44.0` + `9.24` = `53.24` in the reference's example. Not checked while one of those amounts has a problem of its own. Other types keep their line and tax items as sent (the reference ties them to the amount on a SUPPLY_CHARGE only). Source: reference 3.5 (`ledger_transaction_amount_does_not_match_with_line_item_net_amount_and_tax_amount`)."},
	{v.CodeRequired, "tax_items[].unit_type", "A tax item names its unit type (PROPORTION and CURRENCY_PER_KWH in the reference; any code is kept). Source: reference 3.5 (tax items require `amount, rate, tax_type, unit_type, value_taxed`)."},
}

// transactionItemRules writes TransactionItemRules as rows reported under
// prefix (such as "transactions.N."), with each [] of a field written as
// index ("K").
func transactionItemRules(prefix, index string) []rule {
	out := make([]rule, len(TransactionItemRules))
	for i, r := range TransactionItemRules {
		out[i] = rule{r.Code, "`" + prefix + strings.ReplaceAll(r.Field, "[]", "."+index) + "`", r.Text}
	}
	return out
}

// TransactionChecks runs the rules of TransactionItemRules that need
// neither the database nor the account: E7 calls it on its transactions,
// the account payload on each ledger's two lists. Transaction ids are
// remembered across calls, so that a ledger's historical and current
// transactions are one namespace, as a request's transactions are. The
// zero value is ready to use once Today is set.
type TransactionChecks struct {
	// Today is the date no transaction may be after, in the supplier's
	// time zone.
	Today v.Date
	seen  map[string]bool
}

// Check checks ts, the transactions at the list path list (such as
// "transactions"), reporting each problem at list.N.field. It reads what
// the schema bound: a field with a problem of its own is zero, or has a
// problem at its attr, and the rules that need it are skipped.
func (c *TransactionChecks) Check(w *v.Walker, list string, ts []Transaction) {
	if c.seen == nil {
		c.seen = make(map[string]bool, len(ts))
	}
	for i := range ts {
		t := &ts[i]
		at := func(parts ...any) string { return v.Attr(append([]any{list, i}, parts...)...) }
		if id := t.TransactionID; id != "" {
			if c.seen[id] {
				w.AddAt(at("transaction_id"), CodeDuplicateTransactionIDs, "Transaction id %q appears more than once.", id)
			}
			c.seen[id] = true
		}
		if t.TransactionDate != "" && t.TransactionDate > c.Today {
			w.AddAt(at("transaction_date"), CodeTransactionInFuture, "The transaction date %s is after today (%s).", t.TransactionDate, c.Today)
		}
		if (t.Type == TypePayment || t.Type == TypeRepayment) && !w.HasErrorAt(at("amount")) && t.Amount.Decimal().Sign() <= 0 {
			w.AddAt(at("amount"), CodeAmountNotPositive, "A %s is a positive amount.", t.Type)
		}
		for k := range t.LineItems {
			checkLineItem(w, &t.LineItems[k], func(field string) string { return at("line_items", k, field) })
		}
		if t.Type == TypeSupplyCharge {
			checkSupplyCharge(w, t, at)
		}
	}
}

// checkLineItem checks one line item; at gives the attr of its fields.
func checkLineItem(w *v.Walker, l *LineItem, at func(field string) string) {
	if l.StartDate != "" && l.EndDate != "" && l.StartDate > l.EndDate {
		w.AddAt(at("start_date"), CodeStartAfterEnd, "start_date (%s) is later than end_date (%s).", l.StartDate, l.EndDate)
	}
	if l.Units != nil && len(l.Units) != 2 {
		w.AddAt(at("units"), CodeUnitsNotTwoValues, "units holds exactly two numbers; it has %d.", len(l.Units))
	}
	if l.NumberOfUnits.String() == "" || l.PricePerUnit.String() == "" || w.HasErrorAt(at("net_amount")) {
		return
	}
	product := l.NumberOfUnits.Decimal().Mul(l.PricePerUnit.Decimal())
	if !netAmountMatches(l.NetAmount, product) {
		w.AddAt(at("net_amount"), CodeIncorrectNetAmount,
			"net_amount %s is not number_of_units %s × price_per_unit %s = %s, rounded to %d decimal places (%s).",
			l.NetAmount, l.NumberOfUnits, l.PricePerUnit, product.String(), netPlaces(l.NetAmount), product.StringFixed(netPlaces(l.NetAmount)))
	}
}

// netPlaces is the number of decimal places net carries: those of its
// exact value without trailing zeros, at least two.
func netPlaces(net Money) int32 { return max(2, -net.Decimal().Normalize().Exponent()) }

// netAmountMatches reports whether net is product rounded to the places
// net carries, a tie rounded either way: the two differ by at most half a
// unit in that place.
func netAmountMatches(net Money, product decimal.Decimal) bool {
	half := decimal.New(5, -netPlaces(net)-1)
	return net.Decimal().Sub(product).Abs().LessThanOrEqual(half)
}

// checkSupplyCharge checks what the reference asks of a SUPPLY_CHARGE's
// items: there are line items, and the amount is what they and the taxes
// add up to.
func checkSupplyCharge(w *v.Walker, t *Transaction, at func(parts ...any) string) {
	if len(t.LineItems) == 0 && !w.HasErrorAt(at("line_items")) {
		w.AddAt(at("line_items"), v.CodeRequired, "A SUPPLY_CHARGE has at least one line item.")
	}
	if len(t.LineItems) == 0 || w.HasErrorAt(at("amount")) {
		return
	}
	sum := decimal.Zero
	for k, l := range t.LineItems {
		if w.HasErrorAt(at("line_items", k, "net_amount")) || w.HasErrorAt(at("line_items", k)) {
			return
		}
		sum = sum.Add(l.NetAmount.Decimal())
	}
	for k, x := range t.TaxItems {
		if w.HasErrorAt(at("tax_items", k, "amount")) || w.HasErrorAt(at("tax_items", k)) {
			return
		}
		sum = sum.Add(x.Amount.Decimal())
	}
	if !t.Amount.Decimal().Equal(sum) {
		w.AddAt(at("amount"), CodeAmountNotItemsSum,
			"amount %s is not the sum of the line items' net_amount and the tax items' amount, %s.", t.Amount.String(), Money{sum}.String())
	}
}

// CheckProducts reports product_code_does_not_exist for each transaction of
// ts, at the list path list, that names one of missing, the product codes
// a lookup did not find.
func CheckProducts(w *v.Walker, list string, ts []Transaction, missing []string) {
	if len(missing) == 0 {
		return
	}
	for i, t := range ts {
		if namesMissingProduct(t, missing) {
			w.AddAt(v.Attr(list, i, "product_code"), CodeProductNotFound, productNotFound, *t.ProductCode)
		}
	}
}

// namesMissingProduct reports whether t names a product code of missing:
// the one rule of product_code_does_not_exist, for E7 and the ledger.
func namesMissingProduct(t Transaction, missing []string) bool {
	return t.ProductCode != nil && slices.Contains(missing, *t.ProductCode)
}

// productNotFound is the detail of product_code_does_not_exist, of the
// product code.
const productNotFound = "Product %q does not exist."

// ProductCodes appends to codes the distinct product codes that the lists
// of transactions name and codes does not hold yet, in order, for a product
// lookup (CheckProducts).
func ProductCodes(codes []string, lists ...[]Transaction) []string {
	for _, ts := range lists {
		for _, t := range ts {
			if t.ProductCode != nil && *t.ProductCode != "" && !slices.Contains(codes, *t.ProductCode) {
				codes = append(codes, *t.ProductCode)
			}
		}
	}
	return codes
}
