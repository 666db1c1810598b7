package postimport

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// TransactionsRequest is the body of E7.
type TransactionsRequest struct {
	ImportSupplier        string        `json:"import_supplier"`
	ExternalAccountNumber string        `json:"external_account_number"`
	Transactions          []Transaction `json:"transactions"`
	// DryRun, when true, checks the request in full, against the account
	// too, and answers as a real run would, but writes nothing.
	DryRun *bool `json:"dry_run,omitzero"`

	// raw is each transaction's input text, echoed in a refusal.
	raw []json.RawMessage
}

// Transaction is one financial transaction (spec 2.7). Optional fields stay
// nil when omitted; which of them a type accepts is in RULES.md.
type Transaction struct {
	TransactionID   string     `json:"transaction_id"`
	TransactionDate v.Date     `json:"transaction_date"`
	Amount          Amount     `json:"amount"`
	Type            string     `json:"type"`
	Reason          *string    `json:"reason,omitzero"`
	DisplayNote     *string    `json:"display_note,omitzero"`
	Note            *string    `json:"note,omitzero"`
	Reference       *string    `json:"reference,omitzero"`
	PaymentType     *string    `json:"payment_type,omitzero"`
	ProductCode     *string    `json:"product_code,omitzero"`
	LineItems       []LineItem `json:"line_items,omitzero"`
	TaxItems        []TaxItem  `json:"tax_items,omitzero"`
	// ToPrepayMeterSerialNumber is in the reference's example (a CHARGE
	// with reason PREPAY_DEBT_ADJUSTMENT); it is stored and echoed as sent.
	ToPrepayMeterSerialNumber *string `json:"to_prepay_meter_serial_number,omitzero"`

	// OriginalTransactionDate and Description are set by the import when
	// force_add_to_current_statement moved the transaction into the open
	// statement period; they are not accepted in requests.
	OriginalTransactionDate *v.Date `json:"original_transaction_date,omitzero"`
	Description             *string `json:"description,omitzero"`
}

// LineItem is one priced line of a charge.
type LineItem struct {
	RateBand      string      `json:"rate_band"`
	StartDate     v.Date      `json:"start_date"`
	EndDate       v.Date      `json:"end_date"`
	NumberOfUnits v.Decimal   `json:"number_of_units"`
	NetAmount     Money       `json:"net_amount"`
	PricePerUnit  v.Decimal   `json:"price_per_unit"`
	Units         []v.Decimal `json:"units,omitzero"`
}

// TaxItem is one tax on a charge.
type TaxItem struct {
	Amount     Money     `json:"amount"`
	TaxType    string    `json:"tax_type"`
	ValueTaxed Money     `json:"value_taxed"`
	Rate       v.Decimal `json:"rate"`
	UnitType   *string   `json:"unit_type,omitzero"`
}

// TransactionOptions are E7's query parameters. Both default to true.
type TransactionOptions struct {
	// CheckPreviouslyAdded skips a transaction whose transaction_id the
	// account has already (TRANSACTION_ALREADY_EXISTS). When false, the
	// service does not look, and such a transaction is added again.
	CheckPreviouslyAdded bool
	// ForceAddToCurrentStatement moves a transaction dated before the open
	// statement period to the period's first day instead of refusing it.
	ForceAddToCurrentStatement bool
}

// TransactionsResult is the 201 answer of E7: one result per posted
// transaction, in the order posted. DryRun is true, and nothing was
// written, when the request asked for a dry run; the results are then what
// the same request would have answered without it.
type TransactionsResult struct {
	Results []TransactionResult `json:"results"`
	DryRun  bool                `json:"dry_run,omitzero"`
}

// TransactionResult is the outcome for one transaction.
type TransactionResult struct {
	Status          string          `json:"status"`
	TransactionData TransactionData `json:"transaction_data"`
}

// TransactionData echoes a transaction as imported (amounts as strings with
// two places), with its own status.
type TransactionData struct {
	Transaction
	Status string `json:"status"`
}

var lineItemSchema = v.NewObject(
	v.Req("rate_band", v.StringValue, func(l *LineItem) *string { return &l.RateBand }, v.OpenCode(),
		v.Note("CONSUMPTION_STANDARD is in use; any code is kept as sent.")),
	v.Req("start_date", v.DateValue, func(l *LineItem) *v.Date { return &l.StartDate }, v.Codes(CodeStartAfterEnd)),
	v.Req("end_date", v.DateValue, func(l *LineItem) *v.Date { return &l.EndDate }, v.Note("Inclusive.")),
	v.Req("number_of_units", v.DecimalValue, func(l *LineItem) *v.Decimal { return &l.NumberOfUnits }),
	moneyField("net_amount", moneyNote, func(l *LineItem) *Money { return &l.NetAmount }),
	v.Req("price_per_unit", v.DecimalValue, func(l *LineItem) *v.Decimal { return &l.PricePerUnit },
		v.Note("Any number of decimal places.")),
	decimalListField("units", func(l *LineItem) *[]v.Decimal { return &l.Units },
		"An array of numbers, kept exactly as written (in plain form when written with an exponent)."),
)

var taxItemSchema = v.NewObject(
	moneyField("amount", moneyNote, func(t *TaxItem) *Money { return &t.Amount }),
	v.Req("tax_type", v.StringValue, func(t *TaxItem) *string { return &t.TaxType }, v.OpenCode(),
		v.Note("VAT is in use; any code is kept as sent.")),
	moneyField("value_taxed", moneyNote, func(t *TaxItem) *Money { return &t.ValueTaxed }),
	v.Req("rate", v.DecimalValue, func(t *TaxItem) *v.Decimal { return &t.Rate }),
	v.Opt("unit_type", v.StringValue, func(t *TaxItem) **string { return &t.UnitType }, v.OpenCode(),
		v.Note("PROPORTION is in use; any code is kept as sent.")),
)

// The spec shows reason, product_code, line_items and tax_items with some
// types "in the usage shown" (2.7): an example, not a rule. Every type
// accepts them; reason is required on none. product_code is required on a
// SUPPLY_CHARGE only, which the reference says needs one (3.5); elsewhere
// it is optional and, when given, names a product of the catalogue. Both
// product_code fields bind to the same place.
var (
	productCodeOptional = v.Opt("product_code", v.StringValue, func(t *Transaction) **string { return &t.ProductCode },
		v.MaxLength(maxCode), v.Codes(CodeProductNotFound), v.Note("A product of the catalogue (importctl product create). "+usageNote))
	productCodeRequired = v.Opt("product_code", v.StringValue, func(t *Transaction) **string { return &t.ProductCode }, v.Required(),
		v.MaxLength(maxCode), v.Codes(CodeProductNotFound),
		v.Note("A product of the catalogue (importctl product create). Required: the reference says a SUPPLY_CHARGE needs one (3.5)."))
)

const reasonNote = "IMPORTED_CHARGE, IMPORTED_CREDIT, ACCOUNT_CHARGE_PAYMENT, FULL_CREDIT_REFUND, GENERAL_CREDIT and PREPAY_DEBT_ADJUSTMENT are in use, with any type; any code is kept as sent. Optional on every type: spec 2.7 lists reasons \"in use\" and makes none required."

// usageNote is the note of the fields the spec shows with some types only.
const usageNote = "Accepted on every type: spec 2.7 shows it with some types \"in the usage shown\", an example, not a rule."

var transactionSchema = v.NewUnion("type",
	[]v.Field[Transaction]{
		v.Req("transaction_id", v.StringValue, func(t *Transaction) *string { return &t.TransactionID }, v.MaxLength(maxCode),
			v.Codes(CodeDuplicateTransactionIDs), v.Note("Unique within a request; a known one is skipped, unless check_previously_added=false.")),
		v.Req("transaction_date", v.DateValue, func(t *Transaction) *v.Date { return &t.TransactionDate },
			v.Codes(CodeTransactionInFuture, CodeNotInOpenPeriod), v.Note("In the open statement period, unless moved by force_add_to_current_statement.")),
		moneyField("amount", amountNote, func(t *Transaction) *Money { return &t.Amount.Money }, CodeAmountNotPositive),
		v.Req("type", v.StringValue, func(t *Transaction) *string { return &t.Type },
			v.Note("Decides the sign of the amount in the ledger, and whether product_code is required.")),
		v.Opt("reason", v.StringValue, func(t *Transaction) **string { return &t.Reason }, v.OpenCode(), v.Note(reasonNote)),
		v.Opt("display_note", v.StringValue, func(t *Transaction) **string { return &t.DisplayNote },
			v.MaxLength(maxLongText), v.AllowBlank(), v.Note("Shown to the customer.")),
		v.Opt("note", v.StringValue, func(t *Transaction) **string { return &t.Note },
			v.MaxLength(maxLongText), v.AllowBlank(), v.Note("Internal.")),
		v.Opt("reference", v.StringValue, func(t *Transaction) **string { return &t.Reference }, v.MaxLength(maxCode)),
		v.Opt("payment_type", v.StringValue, func(t *Transaction) **string { return &t.PaymentType }, v.OpenCode(), v.AllowBlank(),
			v.Note("DD_REGULAR_COLLECTION, DIRECT_CREDIT and DEBIT_CARD are in use; any code is kept as sent. \"\" (in the reference's account example) is kept too.")),
		v.Opt("to_prepay_meter_serial_number", v.StringValue, func(t *Transaction) **string { return &t.ToPrepayMeterSerialNumber },
			v.MaxLength(maxCode), v.Note("In the reference's example of a prepay debt adjustment; kept as sent.")),
		v.List("line_items", lineItemSchema, func(t *Transaction) *[]LineItem { return &t.LineItems }, v.Note(usageNote)),
		v.List("tax_items", taxItemSchema, func(t *Transaction) *[]TaxItem { return &t.TaxItems }, v.Note(usageNote)),
	},
	v.Variant[Transaction]{Values: []string{TypeCharge, TypeCredit, TypePayment, TypeRepayment}, Fields: []v.Field[Transaction]{
		productCodeOptional,
	}},
	v.Variant[Transaction]{Values: []string{TypeSupplyCharge}, Fields: []v.Field[Transaction]{
		productCodeRequired,
	}},
)

var transactionsSchema = v.NewObject(
	v.Req("import_supplier", v.StringValue, func(r *TransactionsRequest) *string { return &r.ImportSupplier }, v.MaxLength(maxCode),
		v.Codes(CodeAccountNotFound)),
	v.Req("external_account_number", v.StringValue, func(r *TransactionsRequest) *string { return &r.ExternalAccountNumber },
		v.MaxLength(maxAccountRef), v.Codes(CodeAccountNotFound)),
	v.List("transactions", transactionSchema, func(r *TransactionsRequest) *[]Transaction { return &r.Transactions }, v.Required(),
		v.MaxItems(MaxTransactions), v.Note(fmt.Sprintf("At most %d transactions; all are added, or none.", MaxTransactions))),
	v.Opt("dry_run", v.BooleanValue, func(r *TransactionsRequest) **bool { return &r.DryRun },
		v.Note("Default false. When true the request is checked in full and answered as usual, with \"dry_run\": true, but nothing is written.")),
)

// ledgerSign is the sign each type's amount takes in the ledger balance,
// which is what the customer owes: charges and refunds paid out raise it,
// credits and payments received lower it.
func ledgerSign(typ string) int64 {
	switch typ {
	case TypeCredit, TypePayment:
		return -1
	}
	return 1
}

// parseOptions reads E7's query parameters. An empty value is the default.
func parseOptions(q url.Values, errs *problem.List) TransactionOptions {
	o := TransactionOptions{CheckPreviouslyAdded: true, ForceAddToCurrentStatement: true}
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"check_previously_added", &o.CheckPreviouslyAdded}, {"force_add_to_current_statement", &o.ForceAddToCurrentStatement}} {
		vals := q[p.name]
		if len(vals) == 0 {
			continue
		}
		if len(vals) > 1 {
			errs.Add(p.name, v.CodeInvalid, "Give %s at most once.", p.name)
			continue
		}
		switch strings.ToLower(vals[0]) {
		case "":
		case "true", "1":
			*p.dst = true
		case "false", "0":
			*p.dst = false
		default:
			errs.Add(p.name, v.CodeInvalid, "%s must be true or false.", p.name)
		}
	}
	return o
}

// ParseTransactions decodes and checks the body and query of E7 with every
// rule that needs no database; today is the date transactions may not be
// after. A refusal is a *problem.Error of Kind Invalid in E7's form (see
// TransactionsFailure).
func ParseTransactions(body []byte, query url.Values, today time.Time) (*TransactionsRequest, TransactionOptions, error) {
	var errs problem.List
	opts := parseOptions(query, &errs)
	r, perr := parseTransactions(body, func(string) v.Date { return v.DateOf(today.UTC()) }, &errs)
	if perr != nil {
		return nil, opts, transactionsParseFailure(perr)
	}
	if len(errs) > 0 {
		return nil, opts, TransactionsFailure(errs, r.raw)
	}
	return r, opts, nil
}

// parseTransactions decodes and checks the body; todayFor dates "today" for
// the request's supplier, once that is read from the body.
func parseTransactions(body []byte, todayFor func(supplier string) v.Date, errs *problem.List) (*TransactionsRequest, *problem.Error) {
	root, perr := transactionsSchema.ParseBody(body)
	if perr != nil {
		return nil, perr
	}
	var r TransactionsRequest
	w := v.Walker{Errors: *errs}
	transactionsSchema.Bind(&w, root, &r)
	for _, m := range root.Members {
		if m.Key == "transactions" {
			if m.Value.Kind == v.KindArray {
				for _, it := range m.Value.Items {
					r.raw = append(r.raw, json.RawMessage(it.Raw))
				}
			}
			break // Bind used the first; a repeated key is a problem of its own
		}
	}
	seen := make(map[string]bool, len(r.Transactions))
	today := todayFor(r.ImportSupplier)
	for i := range r.Transactions {
		t := &r.Transactions[i]
		at := func(parts ...any) string { return v.Attr(append([]any{"transactions", i}, parts...)...) }
		if id := t.TransactionID; id != "" {
			if seen[id] {
				w.AddAt(at("transaction_id"), CodeDuplicateTransactionIDs, "Transaction id %q appears more than once in the request.", id)
			}
			seen[id] = true
		}
		if t.TransactionDate != "" && t.TransactionDate > today {
			w.AddAt(at("transaction_date"), CodeTransactionInFuture, "The transaction date %s is after today (%s).", t.TransactionDate, today)
		}
		if (t.Type == TypePayment || t.Type == TypeRepayment) && !w.HasErrorAt(at("amount")) && t.Amount.Decimal().Sign() <= 0 {
			w.AddAt(at("amount"), CodeAmountNotPositive, "A %s is a positive amount.", t.Type)
		}
		for k, l := range t.LineItems {
			if l.StartDate != "" && l.EndDate != "" && l.StartDate > l.EndDate {
				w.AddAt(at("line_items", k, "start_date"), CodeStartAfterEnd,
					"start_date (%s) is later than end_date (%s).", l.StartDate, l.EndDate)
			}
		}
	}
	*errs = w.Errors
	return &r, nil
}

const detailTransactionsFailed = "Could not import the transactions; none was added."

// TransactionsFailure is E7's refusal: the section 7 fields (code
// transactions_failed_validation, every problem in errors) plus the spec's
// status TRANSACTION_IMPORT_ERROR, error_detail (the first problem of the
// first failing transaction) and transaction_data (that transaction as
// sent, or null when no transaction is at fault). raw holds the
// transactions as sent.
func TransactionsFailure(errs problem.List, raw []json.RawMessage) *problem.Error {
	e := errs.Err(CodeTransactionsFailed, detailTransactionsFailed)
	first, detail := -1, errs[0].Detail
	for _, fe := range errs {
		if i, ok := transactionIndex(fe.Attr); ok && (first < 0 || i < first) {
			first, detail = i, fe.Detail
		}
	}
	var data any
	if first >= 0 && first < len(raw) {
		data = echoTransaction(raw[first])
	}
	return e.With("status", TransactionImportError).With("error_detail", detail).With("transaction_data", data)
}

// echoTransaction returns a transaction as sent, with each money field
// that is a valid amount written as it is answered on success: amount as a
// string with two places, as the spec's 400 example shows it ("amount":
// "71.00"), and line_items[].net_amount, tax_items[].amount and value_taxed
// as exact strings (Money.String). Everything else, and a money field that
// is not a valid amount, stays exactly as sent.
func echoTransaction(raw json.RawMessage) json.RawMessage {
	val, err := v.Parse(raw)
	if err != nil || val.Kind != v.KindObject {
		return raw
	}
	var b strings.Builder
	writeEcho(&b, val, map[string]map[string]bool{"": {"amount": true},
		"line_items": {"net_amount": true}, "tax_items": {"amount": true, "value_taxed": true}}, "")
	return json.RawMessage(b.String())
}

// writeEcho writes the object val with the money fields of its level (the
// key of money) as strings, and recurses into the item lists named there.
func writeEcho(b *strings.Builder, val *v.Value, money map[string]map[string]bool, level string) {
	b.WriteByte('{')
	for i := range val.Members {
		m := &val.Members[i]
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		_, isList := money[m.Key]
		switch {
		case money[level][m.Key]:
			if mv, ok := parseMoney(&v.Walker{}, &m.Value); ok && level == "" {
				b.WriteString(`"` + Amount{mv}.Answer() + `"`)
			} else if ok {
				b.WriteString(`"` + mv.String() + `"`)
			} else {
				b.WriteString(m.Value.Raw)
			}
		case level == "" && isList && m.Key != "" && m.Value.Kind == v.KindArray:
			b.WriteByte('[')
			for j := range m.Value.Items {
				if j > 0 {
					b.WriteByte(',')
				}
				if it := &m.Value.Items[j]; it.Kind == v.KindObject {
					writeEcho(b, it, money, m.Key)
				} else {
					b.WriteString(it.Raw)
				}
			}
			b.WriteByte(']')
		default:
			b.WriteString(m.Value.Raw)
		}
	}
	b.WriteByte('}')
}

// transactionsParseFailure gives a body that is not a JSON object E7's form.
func transactionsParseFailure(p *problem.Error) *problem.Error {
	return p.With("status", TransactionImportError).With("error_detail", p.Detail).With("transaction_data", nil)
}

// transactionIndex returns N of an attr "transactions.N...".
func transactionIndex(attr string) (int, bool) {
	rest, ok := strings.CutPrefix(attr, "transactions.")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	return i, err == nil
}

// CreateTransactions is E7: it adds the posted transactions to the account
// and its ledger balance, all or none, in one database transaction. query
// holds the options (check_previously_added, force_add_to_current_statement).
//
// Errors: *problem.Error of Kind Invalid (400) in E7's form (see
// TransactionsFailure), or NotFound (404, account_not_found) when the
// account is not an imported account the caller may see.
func (s *Service) CreateTransactions(ctx context.Context, body []byte, query url.Values, visible func(string) bool) (*TransactionsResult, error) {
	now := s.now().UTC()
	var errs problem.List
	opts := parseOptions(query, &errs)
	var today v.Date
	r, perr := parseTransactions(body, func(supplier string) v.Date {
		today = s.zones.today(ctx, supplier, now)
		return today
	}, &errs)
	if perr != nil {
		return nil, transactionsParseFailure(perr)
	}
	v.NoteSubject(ctx, r.ImportSupplier, r.ExternalAccountNumber)
	if hasErrorAt(errs, "import_supplier", "external_account_number") {
		return nil, TransactionsFailure(errs, r.raw)
	}
	if res, done, err := s.addTransactionsDirect(ctx, r, opts, now, today, errs, visible); done {
		return res, err
	}
	var res *TransactionsResult
	err := s.inTx(ctx, func(tx preparedTx) error {
		var err error
		res, err = addTransactions(ctx, tx, r, opts, now, today, errs, visible)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// lookup is what the checks against the account need.
type lookup struct {
	FirstOpenDay    string         `db:"first_open_day"`
	Existing        pq.StringArray `db:"existing"`
	MissingProducts pq.StringArray `db:"missing_products"`
}

// lookupColumns returns the columns that read a lookup of the account a;
// ids and codes are the parameters that hold the posted transaction ids and
// product codes.
func lookupColumns(ids, codes string) string {
	return firstOpenDayExpr + ` AS first_open_day,
	ARRAY(SELECT t.transaction_id FROM transactions t WHERE t.account_id = a.id AND t.transaction_id = ANY(` + ids + `::text[])) AS existing,
	ARRAY(SELECT c FROM unnest(` + codes + `::text[]) AS c WHERE NOT EXISTS (SELECT 1 FROM products p WHERE p.code = c)) AS missing_products`
}

// lockLookupSQL locks the account (see lockAccount) and reads its lookup in
// the same round trip. The lookup comes from the statement's snapshot,
// taken before a wait for the lock: when another import held the account,
// it may miss what that import wrote. Only a request that then writes uses
// it, and its insert checks that nothing it relied on changed (see
// insertTransactionsSQL); every other answer is decided on a lookup read
// after the lock.
var lockLookupSQL = `SELECT a.id, s.document_root, s.require_documents, ` + lookupColumns("$3", "$4") + `
	FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
	WHERE s.code = $1 AND a.external_account_number = $2
	FOR NO KEY UPDATE OF a`

// lookupSQL reads the lookup of the locked account $1 in a statement of its
// own, whose snapshot is taken with the lock held.
var lookupSQL = `SELECT ` + lookupColumns("$2", "$3") + ` FROM accounts a WHERE a.id = $1`

// lookupArgs returns the posted transaction ids and the distinct product
// codes, the arguments of a lookup.
func lookupArgs(r *TransactionsRequest) (ids, codes []string) {
	ids = make([]string, 0, len(r.Transactions))
	for _, t := range r.Transactions {
		if t.TransactionID != "" {
			ids = append(ids, t.TransactionID)
		}
		if t.ProductCode != nil && !slices.Contains(codes, *t.ProductCode) {
			codes = append(codes, *t.ProductCode)
		}
	}
	return ids, codes
}

// addTransactionsDirect is the common case of E7, a request that adds all
// its transactions as posted, in one round trip without BEGIN and COMMIT:
// it is decided as if the account had none of the transactions and its open
// period started before all of them, and post_transactions, in one
// implicit transaction, locks the account, checks that this holds and
// writes. done is false, and nothing was written, when the request is
// another case (a problem, a dry run, an account the caller may not see) or
// the check failed (a known transaction id, a date before the open period,
// an unknown product, no such account); addTransactions then decides it on
// a lookup read under the lock.
func (s *Service) addTransactionsDirect(ctx context.Context, r *TransactionsRequest, opts TransactionOptions,
	now time.Time, today v.Date, errs problem.List, visible func(string) bool) (res *TransactionsResult, done bool, err error) {
	if len(errs) > 0 || (r.DryRun != nil && *r.DryRun) || (visible != nil && !visible(r.ImportSupplier)) {
		return nil, false, nil
	}
	d := decideTransactions(r, opts, lookup{}, today, errs)
	if len(d.errs) > 0 || len(d.add) == 0 || len(d.moved) > 0 {
		return nil, false, nil
	}
	wrote, err := insertTransactions(ctx, s.stmts, r.ImportSupplier, r.ExternalAccountNumber, d.ts, d.add, "", opts.CheckPreviouslyAdded)
	if err != nil || !wrote {
		return nil, err != nil, err
	}
	return d.res, true, nil
}

// addTransactions locks the account, runs the checks that need the
// database and writes the transactions. errs holds the problems found so
// far; any problem refuses the whole request.
func addTransactions(ctx context.Context, tx preparedTx, r *TransactionsRequest, opts TransactionOptions,
	now time.Time, today v.Date, errs problem.List, visible func(string) bool) (*TransactionsResult, error) {
	if visible != nil && !visible(r.ImportSupplier) {
		return nil, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	}
	ids, codes := lookupArgs(r)
	var locked struct {
		account
		lookup
	}
	err := tx.GetContext(ctx, &locked, lockLookupSQL, r.ImportSupplier, r.ExternalAccountNumber, pq.Array(ids), pq.Array(codes))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	}
	if err != nil {
		return nil, fmt.Errorf("add transactions: lock and look up: %w", err)
	}
	accountID, l := locked.ID, locked.lookup
	dryRun := r.DryRun != nil && *r.DryRun
	for fresh := false; ; fresh = true {
		d := decideTransactions(r, opts, l, today, errs)
		inserted := false
		if len(d.errs) == 0 && !dryRun && len(d.add) > 0 {
			inserted, err = insertTransactions(ctx, tx, r.ImportSupplier, r.ExternalAccountNumber, d.ts, d.add, l.FirstOpenDay,
				opts.CheckPreviouslyAdded)
			if err != nil {
				return nil, err
			}
		}
		switch {
		case inserted:
			if len(d.moved) > 0 {
				if err := pinMoveNote(ctx, tx, accountID, d.period, d.moved, now); err != nil {
					return nil, err
				}
			}
			return d.res, nil
		case !fresh:
			// Decide again on what the account holds now that it is
			// locked.
			if err := tx.GetContext(ctx, &l, lookupSQL, accountID, pq.Array(ids), pq.Array(codes)); err != nil {
				return nil, fmt.Errorf("add transactions: lookup: %w", err)
			}
			continue
		case len(d.errs) > 0:
			return nil, TransactionsFailure(d.errs, r.raw)
		case dryRun:
			d.res.DryRun = true
			return d.res, nil
		case len(d.add) == 0:
			return d.res, nil
		}
		return nil, errors.New("add transactions: the account changed while locked")
	}
}

// decision is what a request does with an account's lookup.
type decision struct {
	res *TransactionsResult
	// ts are the request's transactions as they are to be stored (moved
	// into the open period where forced); add indexes those to insert.
	ts     []Transaction
	add    []int
	moved  []string
	period Period
	// errs are the request's problems: the parser's and the lookup's.
	errs problem.List
}

// decideTransactions checks r's transactions against the account's lookup
// l. It changes neither r nor errs, so that a request can decide again on a
// newer lookup.
func decideTransactions(r *TransactionsRequest, opts TransactionOptions, l lookup, today v.Date, errs problem.List) decision {
	d := decision{
		res:    &TransactionsResult{Results: make([]TransactionResult, len(r.Transactions))},
		ts:     slices.Clone(r.Transactions),
		period: Period{From: v.Date(l.FirstOpenDay), To: today},
		errs:   slices.Clone(errs),
	}
	period := d.period
	existing := make(map[string]bool, len(l.Existing))
	for _, id := range l.Existing {
		existing[id] = true
	}
	for i := range d.ts {
		t := &d.ts[i]
		at := func(field string) string { return v.Attr("transactions", i, field) }
		if existing[t.TransactionID] && opts.CheckPreviouslyAdded {
			d.res.Results[i] = TransactionResult{Status: TransactionAlreadyExists,
				TransactionData: TransactionData{Transaction: *t, Status: TransactionImportSuccess}}
			continue
		}
		if t.ProductCode != nil && slices.Contains(l.MissingProducts, *t.ProductCode) {
			d.errs.Add(at("product_code"), CodeProductNotFound, "Product %q does not exist.", *t.ProductCode)
		}
		// Dates after today were refused already, so a date outside the
		// period is before it. When the period is empty (billed to today
		// or later) there is no day to move to that is not in the future.
		if dt := t.TransactionDate; dt != "" && dt < period.From {
			switch {
			case period.Empty():
				d.errs.Add(at("transaction_date"), CodeNotInOpenPeriod,
					"The transaction date %s is not within the open statement period, which starts on %s, after today; the account is billed to that day, and force_add_to_current_statement never moves a transaction into the future.",
					dt, period.From)
			case opts.ForceAddToCurrentStatement:
				t.OriginalTransactionDate = &dt
				t.TransactionDate = period.From
				desc := fmt.Sprintf("Dated %s in the migrated data; moved to %s, the first day of the open statement period, because force_add_to_current_statement was set.", dt, period.From)
				t.Description = &desc
				d.moved = append(d.moved, fmt.Sprintf("%s (dated %s)", t.TransactionID, dt))
			default:
				d.errs.Add(at("transaction_date"), CodeNotInOpenPeriod,
					"The transaction date %s is not within the open statement period (%s to %s); send force_add_to_current_statement=true to move it into the period.",
					dt, period.From, period.To)
			}
		}
		d.add = append(d.add, i)
		d.res.Results[i] = TransactionResult{Status: TransactionAdded,
			TransactionData: TransactionData{Transaction: *t, Status: TransactionImportSuccess}}
	}
	return d
}

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

// rowQuerier runs a query that answers one row: a preparedTx, or the pool's
// prepared statements.
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
		pt := postTransaction{
			ID: t.TransactionID, Date: t.TransactionDate, OriginalDate: t.OriginalTransactionDate,
			Amount: t.Amount.String(), Type: t.Type, Reason: t.Reason, DisplayNote: t.DisplayNote, Note: t.Note,
			Reference: t.Reference, PaymentType: t.PaymentType, ProductCode: t.ProductCode,
			Description: t.Description, PrepayMeter: t.ToPrepayMeterSerialNumber,
		}
		delta = delta.Add(t.Amount.Decimal().Mul(decimal.NewFromInt(ledgerSign(t.Type))))
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
		doc.Transactions = append(doc.Transactions, pt)
	}
	doc.Delta = delta.String()
	return doc
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
func pinMoveNote(ctx context.Context, tx preparedTx, accountID int64, period Period, moved []string, now time.Time) error {
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
