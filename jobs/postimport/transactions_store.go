package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// insertTransactionsSQL calls post_transactions (db/migrations), which
// locks the account, checks what the request was decided on (see
// insertTransactions), and then writes the transactions, their line and tax
// items and the ledger balance in one statement. Its document holds every
// transaction, so the statement is the same for 1 or 10,000 transactions.
// Called outside a transaction it is one round trip and one implicit
// transaction; inside one that holds the lock already it writes under that
// lock. It answers false, having written nothing, when one of its checks
// failed, and the caller decides again.
const insertTransactionsSQL = `SELECT post_transactions($1, $2, $3, $4, $5)`

// rowQuerier runs a query that answers one row: a *db.Tx, or the pool (a
// *db.DB).
type rowQuerier interface {
	QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row
}

// postDoc is post_transactions' document. Every number is a decimal string,
// so that no value passes through a float and none is rounded on the way.
type postDoc struct {
	Delta        string            `json:"delta"`
	Transactions []postTransaction `json:"transactions"`
}

type postTransaction struct {
	ID           string         `json:"id"`
	Date         v.Date         `json:"date"`
	OriginalDate *v.Date        `json:"original_date,omitempty"`
	Amount       string         `json:"amount"`
	Type         string         `json:"type"`
	Reason       *string        `json:"reason,omitempty"`
	DisplayNote  *string        `json:"display_note,omitempty"`
	Note         *string        `json:"note,omitempty"`
	Reference    *string        `json:"reference,omitempty"`
	PaymentType  *string        `json:"payment_type,omitempty"`
	ProductCode  *string        `json:"product_code,omitempty"`
	Description  *string        `json:"description,omitempty"`
	PrepayMeter  *string        `json:"prepay_meter,omitempty"`
	LineItems    []postLineItem `json:"line_items,omitempty"`
	TaxItems     []postTaxItem  `json:"tax_items,omitempty"`
}

type postLineItem struct {
	Position      int      `json:"position"`
	RateBand      string   `json:"rate_band"`
	StartDate     v.Date   `json:"start_date"`
	EndDate       v.Date   `json:"end_date"`
	NumberOfUnits string   `json:"number_of_units"`
	NetAmount     string   `json:"net_amount"`
	PricePerUnit  string   `json:"price_per_unit"`
	Units         []string `json:"units,omitzero"`
}

type postTaxItem struct {
	Position   int     `json:"position"`
	Amount     string  `json:"amount"`
	TaxType    string  `json:"tax_type"`
	ValueTaxed string  `json:"value_taxed"`
	Rate       string  `json:"rate"`
	UnitType   *string `json:"unit_type,omitempty"`
}

// toPostDoc is post_transactions' document for ts[add...]: the transactions
// and the signed sum that moves the ledger balance.
func toPostDoc(ts []Transaction, add []int) postDoc {
	doc := postDoc{Transactions: make([]postTransaction, 0, len(add))}
	delta := decimal.Zero
	for _, i := range add {
		t := &ts[i]
		delta = delta.Add(t.Signed())
		doc.Transactions = append(doc.Transactions, toPostTransaction(t))
	}
	doc.Delta = delta.String()
	return doc
}

// toPostTransaction is t as a row of insert_transactions' document.
func toPostTransaction(t *Transaction) postTransaction {
	pt := postTransaction{
		ID: t.TransactionID, Date: t.TransactionDate, OriginalDate: t.OriginalTransactionDate,
		Amount: t.Amount.String(), Type: t.Type, Reason: t.Reason, DisplayNote: t.DisplayNote, Note: t.Note,
		Reference: t.Reference, PaymentType: t.PaymentType, ProductCode: t.ProductCode,
		Description: t.Description, PrepayMeter: t.ToPrepayMeterSerialNumber,
	}
	for k, l := range t.LineItems {
		pl := postLineItem{
			Position: k, RateBand: l.RateBand, StartDate: l.StartDate, EndDate: l.EndDate,
			NumberOfUnits: l.NumberOfUnits.String(), NetAmount: l.NetAmount.String(),
			PricePerUnit: l.PricePerUnit.String(),
		}
		if l.Units != nil {
			pl.Units = make([]string, len(l.Units))
			for j, u := range l.Units {
				pl.Units[j] = u.String()
			}
		}
		pt.LineItems = append(pt.LineItems, pl)
	}
	for k, x := range t.TaxItems {
		pt.TaxItems = append(pt.TaxItems, postTaxItem{
			Position: k, Amount: x.Amount.String(), TaxType: x.TaxType, ValueTaxed: x.ValueTaxed.String(),
			Rate: x.Rate.String(), UnitType: x.UnitType,
		})
	}
	return pt
}

// InsertDocument is the document of the SQL function insert_transactions
// (db/migrations), which writes transactions with their line and tax items
// onto an account, as E7 does: account creation (jobs/creation) writes the
// payload ledger's transactions with it, so that a transaction is stored
// the same way whichever endpoint brought it. The balance is not moved:
// LedgerBalance gives what the transactions add to it.
func InsertDocument(ts []Transaction) (json.RawMessage, error) {
	rows := make([]postTransaction, len(ts))
	for i := range ts {
		rows[i] = toPostTransaction(&ts[i])
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("transactions document: %w", err)
	}
	return b, nil
}

// LedgerBalance is the signed sum of ts, E7's rule (RULES.md, "The
// ledger"): what the transactions add to what the customer owes.
func LedgerBalance(ts []Transaction) decimal.Decimal {
	sum := decimal.Zero
	for i := range ts {
		sum = sum.Add(ts[i].Signed())
	}
	return sum
}

// Signed is t's amount with the sign its type takes in the ledger balance
// (ledgerSign).
func (t *Transaction) Signed() decimal.Decimal {
	return t.Amount.Decimal().Mul(decimal.NewFromInt(ledgerSign(t.Type)))
}

// insertTransactions writes ts[add...] onto the account ean of supplier and
// moves the ledger balance by their signed sum, when none of them exists
// (not checked when checkPreviouslyAdded is false), their products exist,
// and the account's open period still starts on
// firstOpenDay, or, when firstOpenDay is "", starts on or before all their
// dates; it reports whether it wrote.
func insertTransactions(ctx context.Context, tx rowQuerier, supplier, ean string, ts []Transaction, add []int,
	firstOpenDay string, checkPreviouslyAdded bool) (bool, error) {
	var openDay *string
	if firstOpenDay != "" {
		openDay = &firstOpenDay
	}
	doc, err := json.Marshal(toPostDoc(ts, add))
	if err != nil {
		return false, fmt.Errorf("add transactions: encode: %w", err)
	}
	var wrote bool
	err = tx.QueryRowxContext(ctx, insertTransactionsSQL, supplier, ean, doc, openDay, checkPreviouslyAdded).Scan(&wrote)
	switch {
	case err == nil:
		return wrote, nil
	case db.IsNumericOverflow(err) || db.IsCheckViolation(err, "ledgers_balance_range"):
		var errs problem.List
		errs.Add("transactions", CodeBalanceOutOfRange,
			"These transactions would take the account's ledger balance beyond what it can hold (below 1,000,000,000,000 in absolute value).")
		return false, TransactionsFailure(errs, nil)
	}
	return false, fmt.Errorf("add transactions: insert: %w", err)
}

// maxListedMoves bounds the transactions a move note names one by one; each
// moved transaction's description says where it came from anyway.
const maxListedMoves = 100

// pinMoveNote pins one note to the account that says which transactions
// force_add_to_current_statement moved, so that the support team sees why
// their dates differ from the old system's.
func pinMoveNote(ctx context.Context, tx *db.Tx, accountID int64, period Period, moved []string, now time.Time) error {
	listed := moved
	more := ""
	if len(listed) > maxListedMoves {
		listed = listed[:maxListedMoves]
		more = fmt.Sprintf(" and %d more", len(moved)-maxListedMoves)
	}
	body := fmt.Sprintf("Migration: %d imported transaction(s) dated before the open statement period were moved to its first day, %s, because force_add_to_current_statement was set: %s%s.",
		len(moved), period.From, strings.Join(listed, ", "), more)
	pinned := true
	if err := note.Add(ctx, tx, accountID, []note.Note{{Body: &body, IsPinned: &pinned}}, now.Truncate(time.Second)); err != nil {
		return fmt.Errorf("add transactions: pin note: %w", err)
	}
	return nil
}
