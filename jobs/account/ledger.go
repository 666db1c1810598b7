package account

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/lib/pq"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Ledger is the account's ledger as the payload carries it: spec 2.2 names
// `ledgers` and shows it empty; its shape is the reference's GB example
// (section 10) and its rules the reference's (3.5, 6 and 9). Its
// transactions are E7's, with E7's rules (postimport.TransactionChecks),
// and are stored as E7 stores them; its last statement closes the billed
// history, so that the account's open statement period starts the day
// after last_statement_closing_date.
//
// The two transaction lists are kept as sent (compact JSON): that is what
// the normalised payload writes, so that validating it again reads the
// same transactions, amounts exact as sent (postimport.Amount, E7's
// answer form, would round them to two places). Current and Historical
// hold them as validated.
type Ledger struct {
	CurrentStatementTransactions    []json.RawMessage `json:"current_statement_transactions,omitzero"`
	HistoricalStatementTransactions []json.RawMessage `json:"historical_statement_transactions,omitzero"`
	LastStatementClosingDate        *validate.Date    `json:"last_statement_closing_date,omitzero"`
	LastStatementIssueDate          *validate.Date    `json:"last_statement_issue_date,omitzero"`
	// LastStatementBalance and LedgerBalance are in the reference's sign:
	// credit positive, payments and credits adding, repayments and charges
	// subtracting; the opposite of the stored balance, which is what the
	// customer owes (ReferenceBalance).
	LastStatementBalance *postimport.Money `json:"last_statement_balance,omitzero"`
	LedgerBalance        *postimport.Money `json:"ledger_balance,omitzero"`

	Current    []postimport.Transaction `json:"-"`
	Historical []postimport.Transaction `json:"-"`
}

// Transactions returns the ledger's transactions, historical ones first,
// as they are stored.
func (l *Ledger) Transactions() []postimport.Transaction {
	return append(append(make([]postimport.Transaction, 0, len(l.Historical)+len(l.Current)), l.Historical...), l.Current...)
}

// ReferenceBalance is the signed sum of ts in the reference's sign
// (payments and credits add, repayments and charges subtract): minus E7's
// balance, which is what the customer owes.
func ReferenceBalance(ts []postimport.Transaction) decimal.Decimal {
	return postimport.LedgerBalance(ts).Neg()
}

// The codes of the ledger's own rules, each the reference's (section 9).
const (
	CodeDuplicateLedger           = "duplicate_ledger_entries_found"
	CodeHistoricalAfterClosing    = "historical_statement_transaction_after_last_statement_closing_date"
	CodeHistoricalWithoutClosing  = "historical_statement_transactions_without_last_statement_closing_date_or_last_billed_to_date"
	CodeHistoricalBalanceMismatch = "historical_statement_transactions_balance_mismatch"
	CodeCurrentBeforeOpening      = "current_statement_transaction_before_current_statement_opening_date"
	CodeCurrentBeforeLastBilled   = "current_statement_transaction_before_last_billed_to_date"
	CodeCurrentWithoutBilledDay   = "last_billed_to_date_not_found"
	CodeIssuedBeforeClosing       = "last_statement_issued_before_closing_date"
	CodeLedgerBalanceMismatch     = "balance_mismatch_on_ledger_balance"
)

// The ledger's lists of transactions, and their item limit: that of every
// list of the account payload (the parser keeps a Custom field's value with
// the limits of a free-form one).
const (
	ledgerTransactionsField         = "current_statement_transactions"
	ledgerHistoricalField           = "historical_statement_transactions"
	ledgerTransactionsPerListLimits = validate.DefaultMaxItems
)

// ledgerRules are the ledger's rows of RULES.md: its own rules, then the
// rules of each of its transactions, shared with E7.
func ledgerRules() []rule {
	out := []rule{
		{CodeDuplicateLedger, "`ledgers`", "An account has one ledger (the service keeps one per account, and spec 2.2 and the reference's examples name no ledger code that could tell two apart): a second item is refused, reported at `ledgers.N`. Source: reference 9 (`duplicate_ledger_entries_found`)."},
		{CodeHistoricalAfterClosing, "`ledgers[].historical_statement_transactions[].transaction_date`", "On or before the ledger's closing date: `last_statement_closing_date`, or where it is omitted the account's `last_billed_to_date` (the latest of its supply points'), as the reference takes it. Source: reference 3.5 (\"historical transactions can be on or before this date\") and 9."},
		{CodeHistoricalWithoutClosing, "`ledgers[].historical_statement_transactions`", "Historical transactions need a closing date: `last_statement_closing_date`, or a `last_billed_to_date` on a supply point. Source: reference 9 (`historical_statement_transactions_without_last_statement_closing_date_or_last_billed_to_date`)."},
		{CodeHistoricalBalanceMismatch, "`ledgers[].last_statement_balance`", "The historical transactions sum to `last_statement_balance` (omitted: 0), in the reference's sign: payments and credits add, repayments and charges (SUPPLY_CHARGE too) subtract. Compared exactly, with no rounding; not checked while a transaction's amount or type has a problem of its own. Source: reference 3.5 (`historical_statement_transactions_balance_mismatch`)."},
		{CodeIssuedBeforeClosing, "`ledgers[].last_statement_issue_date`", "Not before the closing date (explicit or the account's `last_billed_to_date`): a statement is issued once its period has closed. Source: reference 9 (`last_statement_issued_before_closing_date`)."},
		{CodeCurrentBeforeOpening, "`ledgers[].current_statement_transactions[].transaction_date`", "After every billed day: the current statement opens the day after `last_statement_closing_date`, and after the last day (inclusive) of the account's latest statement (`statements[]`). Source: reference 3.5 (current transactions \"must be strictly after this date\"; the opening date \"is one day after the last statement closing date\") and docs/decisions.md (statement periods are inclusive)."},
		{CodeCurrentBeforeLastBilled, "`ledgers[].current_statement_transactions[].transaction_date`", "After the account's `last_billed_to_date` (inclusive, the last day billed), when that is later than the closing date or there is none. Source: reference 9 (`current_statement_transaction_before_last_billed_to_date`)."},
		{CodeCurrentWithoutBilledDay, "`ledgers[].current_statement_transactions`", "Current transactions need a day their statement opens after: `last_statement_closing_date`, a `last_billed_to_date` on a supply point, or a statement in `statements[]`. Source: reference 3.5 (the opening date is the day after the closing date, \"otherwise it is based on the last billed to date\") and 9 (`last_billed_to_date_not_found`); docs/decisions.md argues the refusal."},
		{postimport.CodeBalanceOutOfRange, "`ledgers[]`", "The balance the ledger's transactions make stays below 1,000,000,000,000 in absolute value, as E7's. Source: storage (the check `ledgers_balance_range`); no real account comes near it."},
		{CodeLedgerBalanceMismatch, "`ledgers[].ledger_balance`", "When given, `ledger_balance` is `last_statement_balance` plus the current transactions, in the reference's sign, compared exactly. The reference compares this sum with the account's `transfer_balance` (`balance_mismatch_on_transfer_balance`), a field the spec does not have; in both of its examples `ledger_balance` equals `transfer_balance`, and the service compares with it instead (docs/decisions.md). Source: reference 3.5 and 9 (`balance_mismatch_on_ledger_balance`)."},
	}
	for _, r := range postimport.TransactionItemRules {
		at := fmt.Sprintf("`ledgers[].%s[].%s`, `ledgers[].%s[].%s`", ledgerHistoricalField, r.Field, ledgerTransactionsField, r.Field)
		out = append(out, rule{r.Code, at, r.Text})
	}
	return out
}

// ledgerTransactionList is a field of a ledger holding a list of E7's
// transactions of schema: it binds each as E7 does, and keeps each as sent
// (compact JSON) for the normalised payload. It is a Custom field, so the
// body parser keeps the list whole, with the item limit of every list in a
// free-form value.
func ledgerTransactionList(name string, schema *validate.Object[postimport.Transaction],
	at func(*Ledger) (*[]postimport.Transaction, *[]json.RawMessage), note string) validate.Field[Ledger] {
	spec := &validate.Spec{Name: name, Type: validate.TypeObjectList, Object: schema.Spec(), MaxItems: ledgerTransactionsPerListLimits,
		Codes: []string{validate.CodeTooManyItems}, Note: note}
	return validate.Custom(spec, func(w *validate.Walker, val *validate.Value, dst *Ledger) {
		switch val.Kind {
		case validate.KindArray:
		case validate.KindNull:
			w.Add(validate.CodeInvalid, "This field may not be null.")
			return
		default:
			w.Add(validate.CodeInvalid, "Expected an array but got %s.", val.Kind)
			return
		}
		if val.Truncated {
			w.Add(validate.CodeTooManyItems, "Ensure this field has no more than %d elements.", ledgerTransactionsPerListLimits)
		}
		ts, raw := make([]postimport.Transaction, len(val.Items)), make([]json.RawMessage, len(val.Items))
		for i := range val.Items {
			w.PushIndex(i)
			it := &val.Items[i]
			if it.Kind == validate.KindObject {
				schema.Bind(w, it, &ts[i])
			} else {
				w.Add(validate.CodeInvalid, "Expected an object but got %s.", it.Kind)
			}
			raw[i] = compact(it.Raw)
			w.Pop()
		}
		typed, kept := at(dst)
		*typed, *kept = ts, raw
	})
}

// compact is raw, which the parser accepted, without spaces: the form the
// normalised payload writes, so that validating it again keeps the same
// bytes.
func compact(raw string) json.RawMessage {
	var b bytes.Buffer
	_ = json.Compact(&b, []byte(raw)) // cannot fail: the parser accepted it
	return b.Bytes()
}

// ledgerMoney is an optional money field of a ledger, read as E7 reads an
// amount.
func ledgerMoney(name string, at func(*Ledger) **postimport.Money, note string, codes ...string) validate.Field[Ledger] {
	spec := &validate.Spec{Name: name, Type: validate.TypeDecimal, Note: note,
		Codes: append([]string{postimport.CodeAmountPrecision, postimport.CodeAmountOutOfRange}, codes...)}
	return validate.Custom(spec, func(w *validate.Walker, val *validate.Value, dst *Ledger) {
		if m, ok := postimport.ParseMoney(w, val); ok {
			*at(dst) = &m
		}
	})
}

var ledgerSchema = validate.NewObject(
	ledgerTransactionList(ledgerTransactionsField,
		postimport.LedgerTransactionSchema("After every billed day of the account: the ledger's closing date, its last_billed_to_date and its statements' last days.",
			CodeCurrentBeforeOpening, CodeCurrentBeforeLastBilled),
		func(l *Ledger) (*[]postimport.Transaction, *[]json.RawMessage) {
			return &l.Current, &l.CurrentStatementTransactions
		},
		"The transactions of the open statement period (\"meant to be billed\", reference 3.5), each an E7 transaction (spec 2.7) with E7's rules; stored as E7 stores them. At most 1000."),
	ledgerTransactionList(ledgerHistoricalField,
		postimport.LedgerTransactionSchema("On or before the ledger's closing date.", CodeHistoricalAfterClosing),
		func(l *Ledger) (*[]postimport.Transaction, *[]json.RawMessage) {
			return &l.Historical, &l.HistoricalStatementTransactions
		},
		"The transactions of the closed statements (\"not meant to be billed\", reference 3.5), each an E7 transaction with E7's rules; stored as E7 stores them. At most 1000."),
	validate.Opt("last_statement_closing_date", validate.DateValue, func(l *Ledger) **validate.Date { return &l.LastStatementClosingDate },
		validate.Note("The last day of the last closed statement, inclusive. The account's open statement period starts the day after it (or after a later billed day). Omitted: the account's last_billed_to_date stands in for it, as in the reference.")),
	validate.Opt("last_statement_issue_date", validate.DateValue, func(l *Ledger) **validate.Date { return &l.LastStatementIssueDate },
		validate.Codes(CodeIssuedBeforeClosing), validate.Note("Stored as sent.")),
	ledgerMoney("last_statement_balance", func(l *Ledger) **postimport.Money { return &l.LastStatementBalance },
		"The balance of the last closed statement in the reference's sign (credit positive); omitted is 0. Exact, as E7's amounts; stored as sent.",
		CodeHistoricalBalanceMismatch),
	ledgerMoney("ledger_balance", func(l *Ledger) **postimport.Money { return &l.LedgerBalance },
		"The ledger's balance in the reference's sign (credit positive), checked and not stored: the service keeps the balance E7 keeps, what the customer owes, which is minus this.",
		CodeLedgerBalanceMismatch),
)

// ledgersNote is the note of the payload's ledgers field.
const ledgersNote = "The account's ledger: spec 2.2 shows ledgers empty, and the reference's GB example (section 10) gives an item's shape, which is accepted as written. At most one item. Stored with the account, in the same transaction: its transactions as E7 stores them (they move the balance, and E7 later skips their ids), its last statement's dates and balance. Its last_statement_closing_date ends the billed history: the open statement period starts the day after it."

// LastBilledToDate is the latest last_billed_to_date of the account's
// supply points, or nil when none has one: the day the account is billed to,
// which account creation stores.
func (a *Account) LastBilledToDate() *validate.Date {
	var latest *validate.Date
	for _, sa := range a.SupplyAddresses {
		for _, sp := range sa.SupplyPoints {
			if d := sp.LastBilledToDate; d != nil && *d != "" && (latest == nil || *d > *latest) {
				latest = d
			}
		}
	}
	return latest
}

// latestStatementEnd is the latest bill_period_to_date of the payload's
// statements, or "".
func (a *Account) latestStatementEnd() validate.Date {
	var latest validate.Date
	for _, st := range a.Statements {
		latest = max(latest, st.BillPeriodToDate)
	}
	return latest
}

// ProductCatalog is a Catalog that knows the products, for the product
// codes of the ledger's transactions (product_code_does_not_exist). A
// Catalog without it takes every product to exist, as it is asked nothing.
type ProductCatalog interface {
	// MissingProducts returns those of codes that are not products.
	MissingProducts(ctx context.Context, codes []string) ([]string, error)
}

// missingProductsSQL keeps the order of the codes asked for.
const missingProductsSQL = `SELECT c FROM unnest($1::text[]) WITH ORDINALITY AS u(c, n)
	WHERE NOT EXISTS (SELECT 1 FROM products p WHERE p.code = u.c) ORDER BY n`

func (c *pgCatalog) MissingProducts(ctx context.Context, codes []string) ([]string, error) {
	if len(codes) == 0 {
		return nil, nil
	}
	var missing []string
	if err := c.db.SelectContext(ctx, &missing, missingProductsSQL, pq.Array(codes)); err != nil {
		return nil, fmt.Errorf("query products: %w", err)
	}
	return missing, nil
}

// MissingProducts asks the database each time: only a payload with a
// ledger whose transactions name products asks, and products, like
// tariffs, may have been created a moment ago.
func (v cacheView) MissingProducts(ctx context.Context, codes []string) ([]string, error) {
	if pc, ok := v.c.inner.(ProductCatalog); ok {
		return pc.MissingProducts(ctx, codes)
	}
	return nil, nil
}

// lookupProducts asks the catalogue, when it knows products, which of the
// ledger's product codes are missing.
func (c *checker) lookupProducts(ctx context.Context, cat Catalog) error {
	pc, ok := cat.(ProductCatalog)
	if !ok {
		return nil
	}
	var codes []string
	for i := range c.a.Ledgers {
		codes = postimport.ProductCodes(codes, c.a.Ledgers[i].Historical, c.a.Ledgers[i].Current)
	}
	if len(codes) == 0 {
		return nil
	}
	missing, err := pc.MissingProducts(ctx, codes)
	c.missingProducts = missing
	return err
}

// checkLedgers runs the ledger's rules and its transactions' (E7's).
func (c *checker) checkLedgers() {
	lastBilled := c.a.LastBilledToDate()
	statementEnd := c.a.latestStatementEnd()
	checks := postimport.TransactionChecks{Today: c.today()}
	for i := range c.a.Ledgers {
		l := &c.a.Ledgers[i]
		at := func(parts ...any) string { return validate.Attr(append([]any{"ledgers", i}, parts...)...) }
		if i > 0 {
			c.w.AddAt(at(), CodeDuplicateLedger, "An account has one ledger; this is a second one.")
		}
		historical, current := at(ledgerHistoricalField), at(ledgerTransactionsField)
		checks.Check(&c.w, historical, l.Historical)
		checks.Check(&c.w, current, l.Current)
		postimport.CheckProducts(&c.w, historical, l.Historical, c.missingProducts)
		postimport.CheckProducts(&c.w, current, l.Current, c.missingProducts)

		closing := l.LastStatementClosingDate
		if closing == nil {
			closing = lastBilled
		}
		if len(l.Historical) > 0 && closing == nil {
			c.w.AddAt(historical, CodeHistoricalWithoutClosing,
				"Historical transactions need last_statement_closing_date, or a last_billed_to_date on a supply point, to close their statement.")
		}
		for k, t := range l.Historical {
			if closing != nil && t.TransactionDate != "" && t.TransactionDate > *closing {
				c.w.AddAt(validate.Attr(historical, k, "transaction_date"), CodeHistoricalAfterClosing,
					"A historical transaction is dated on or before the last statement's closing date, %s; this one is dated %s.", *closing, t.TransactionDate)
			}
		}
		if issued := l.LastStatementIssueDate; issued != nil && closing != nil && *issued < *closing {
			c.w.AddAt(at("last_statement_issue_date"), CodeIssuedBeforeClosing,
				"The last statement is issued (%s) before it closes (%s).", *issued, *closing)
		}
		c.checkCurrent(l, current, lastBilled, statementEnd)
		c.checkLedgerBalances(l, at)
	}
}

// checkCurrent checks that the current transactions are after every billed
// day: the closing date sent, the account's last_billed_to_date and its
// statements' last days (all inclusive).
func (c *checker) checkCurrent(l *Ledger, current string, lastBilled *validate.Date, statementEnd validate.Date) {
	var explicit, billed validate.Date
	if l.LastStatementClosingDate != nil {
		explicit = *l.LastStatementClosingDate
	}
	if lastBilled != nil {
		billed = *lastBilled
	}
	latest := max(explicit, billed, statementEnd)
	if len(l.Current) > 0 && latest == "" {
		c.w.AddAt(current, CodeCurrentWithoutBilledDay,
			"Current transactions need a day their statement opens after: send last_statement_closing_date, a last_billed_to_date on a supply point, or the account's statements.")
		return
	}
	for k, t := range l.Current {
		d, attr := t.TransactionDate, validate.Attr(current, k, "transaction_date")
		switch {
		case d == "" || d > latest:
		case d <= explicit:
			c.w.AddAt(attr, CodeCurrentBeforeOpening,
				"The current statement opens on the day after last_statement_closing_date (%s); this transaction is dated %s.", explicit, d)
		case d <= billed:
			c.w.AddAt(attr, CodeCurrentBeforeLastBilled,
				"The account is billed up to and including %s (last_billed_to_date); a current transaction is dated after it, not %s.", billed, d)
		default:
			c.w.AddAt(attr, CodeCurrentBeforeOpening,
				"The account's statements are billed up to and including %s, so the current statement opens the day after; this transaction is dated %s.", statementEnd, d)
		}
	}
}

// maxLedgerBalance bounds the balance a ledger's transactions make
// (exclusive), as the check ledgers_balance_range does for E7.
var maxLedgerBalance = decimal.New(1, 12)

// checkLedgerBalances compares the ledger's balances with its transactions,
// exactly, in the reference's sign; a list with a problem in an amount or a
// type is not summed, as its sum would mean nothing.
func (c *checker) checkLedgerBalances(l *Ledger, at func(parts ...any) string) {
	summable := func(list string, ts []postimport.Transaction) bool {
		for k := range ts {
			if ts[k].Type == "" || c.w.HasErrorAt(validate.Attr(list, k, "amount")) || c.w.HasErrorAt(validate.Attr(list, k, "type")) ||
				c.w.HasErrorAt(validate.Attr(list, k)) {
				return false
			}
		}
		return true
	}
	if summable(at(ledgerHistoricalField), l.Historical) && summable(at(ledgerTransactionsField), l.Current) &&
		postimport.LedgerBalance(l.Transactions()).Abs().GreaterThanOrEqual(maxLedgerBalance) {
		c.w.AddAt(at(), postimport.CodeBalanceOutOfRange,
			"These transactions would take the account's ledger balance beyond what it can hold (below 1,000,000,000,000 in absolute value).")
	}
	if c.w.HasErrorAt(at("last_statement_balance")) {
		return
	}
	last := decimal.Zero
	if l.LastStatementBalance != nil {
		last = l.LastStatementBalance.Decimal()
	}
	if summable(at(ledgerHistoricalField), l.Historical) {
		if sum := ReferenceBalance(l.Historical); !sum.Equal(last) {
			c.w.AddAt(at("last_statement_balance"), CodeHistoricalBalanceMismatch,
				"The historical transactions sum to %s (payments and credits add, repayments and charges subtract), not to last_statement_balance %s.",
				postimport.MoneyOf(sum), postimport.MoneyOf(last))
		}
	}
	if l.LedgerBalance == nil || c.w.HasErrorAt(at("ledger_balance")) || !summable(at(ledgerTransactionsField), l.Current) {
		return
	}
	if want := last.Add(ReferenceBalance(l.Current)); !want.Equal(l.LedgerBalance.Decimal()) {
		c.w.AddAt(at("ledger_balance"), CodeLedgerBalanceMismatch,
			"last_statement_balance %s and the current transactions make %s (payments and credits add, repayments and charges subtract), not ledger_balance %s.",
			postimport.MoneyOf(last), postimport.MoneyOf(want), l.LedgerBalance)
	}
}

// ledger writes what encoding/json writes for l.
func (e *encoder) ledger(l *Ledger) {
	o := e.open()
	listField(&o, ledgerTransactionsField, l.CurrentStatementTransactions, func(e *encoder, m *json.RawMessage) { e.raw(*m) })
	listField(&o, ledgerHistoricalField, l.HistoricalStatementTransactions, func(e *encoder, m *json.RawMessage) { e.raw(*m) })
	o.datePtr("last_statement_closing_date", l.LastStatementClosingDate)
	o.datePtr("last_statement_issue_date", l.LastStatementIssueDate)
	if m := l.LastStatementBalance; m != nil {
		o.key("last_statement_balance").str(m.String())
	}
	if m := l.LedgerBalance; m != nil {
		o.key("ledger_balance").str(m.String())
	}
	o.close()
}
