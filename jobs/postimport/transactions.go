package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

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
	moneyField("net_amount", moneyNote, func(l *LineItem) *Money { return &l.NetAmount }, CodeIncorrectNetAmount),
	v.Req("price_per_unit", v.DecimalValue, func(l *LineItem) *v.Decimal { return &l.PricePerUnit },
		v.Note("Any number of decimal places.")),
	decimalListField("units", func(l *LineItem) *[]v.Decimal { return &l.Units },
		"Two numbers, kept exactly as written (in plain form when written with an exponent).", CodeUnitsNotTwoValues),
)

var taxItemSchema = v.NewObject(
	moneyField("amount", moneyNote, func(t *TaxItem) *Money { return &t.Amount }),
	v.Req("tax_type", v.StringValue, func(t *TaxItem) *string { return &t.TaxType }, v.OpenCode(),
		v.Note("VAT is in use; any code is kept as sent.")),
	moneyField("value_taxed", moneyNote, func(t *TaxItem) *Money { return &t.ValueTaxed }),
	v.Req("rate", v.DecimalValue, func(t *TaxItem) *v.Decimal { return &t.Rate }),
	v.Opt("unit_type", v.StringValue, func(t *TaxItem) **string { return &t.UnitType }, v.OpenCode(), v.Required(),
		v.Note("PROPORTION is in use, and the reference names CURRENCY_PER_KWH too; any code is kept as sent. Required: the reference's tax items require it (3.5).")),
)

// The spec shows reason, product_code, line_items and tax_items with some
// types "in the usage shown" (2.7): an example, not a rule. Every type
// accepts them; reason is required on none. product_code and line_items
// are required on a SUPPLY_CHARGE only, which the reference says needs
// both (3.5); elsewhere they are optional, and a product code, when given,
// names a product of the catalogue. Both product_code fields bind to the
// same place; line_items is one field, whose requirement on a SUPPLY_CHARGE
// TransactionChecks enforces, so that the line items' own rows appear once
// in RULES.md.
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

// transactionSchema is E7's transaction.
var transactionSchema = newTransactionSchema(
	v.Req("transaction_id", v.StringValue, func(t *Transaction) *string { return &t.TransactionID }, v.MaxLength(maxCode),
		v.Codes(CodeDuplicateTransactionIDs), v.Note("Unique within a request; a known one is skipped, unless check_previously_added=false.")),
	v.Req("transaction_date", v.DateValue, func(t *Transaction) *v.Date { return &t.TransactionDate },
		v.Codes(CodeTransactionInFuture, CodeNotInOpenPeriod), v.Note("In the open statement period, unless moved by force_add_to_current_statement.")))

// LedgerTransactionSchema is the schema of a transaction of the account
// payload's ledger (jobs/account): E7's fields, types and notes, except its
// date, which the ledger's last statement rules instead of the open
// statement period; dateNote and dateCodes describe that. Its transactions
// run TransactionChecks too, so that a transaction is the same wherever it
// is sent.
func LedgerTransactionSchema(dateNote string, dateCodes ...string) *v.Object[Transaction] {
	return newTransactionSchema(
		v.Req("transaction_id", v.StringValue, func(t *Transaction) *string { return &t.TransactionID }, v.MaxLength(maxCode),
			v.Codes(CodeDuplicateTransactionIDs), v.Note("Unique across the ledger's transactions, historical and current; E7 skips a transaction the account has by this id (check_previously_added).")),
		v.Req("transaction_date", v.DateValue, func(t *Transaction) *v.Date { return &t.TransactionDate },
			v.Codes(append([]string{CodeTransactionInFuture}, dateCodes...)...), v.Note(dateNote)))
}

// newTransactionSchema is the schema of a transaction whose id and date
// are the fields given, which say where the transaction goes: E7's and a
// ledger's differ only there (see LedgerTransactionSchema).
func newTransactionSchema(id, date v.Field[Transaction]) *v.Object[Transaction] {
	return v.NewUnion("type", []v.Field[Transaction]{
		id,
		date,
		moneyField("amount", amountNote, func(t *Transaction) *Money { return &t.Amount.Money }, CodeAmountNotPositive, CodeAmountNotItemsSum),
		v.Req("type", v.StringValue, func(t *Transaction) *string { return &t.Type },
			v.Note("Decides the sign of the amount in the ledger, and whether product_code and line_items are required.")),
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
		v.List("line_items", lineItemSchema, func(t *Transaction) *[]LineItem { return &t.LineItems }, v.Codes(v.CodeRequired),
			v.Note("Required on a SUPPLY_CHARGE, with at least one item: the reference says a SUPPLY_CHARGE needs line items (3.5); its amount is their net amounts plus the tax items' amounts. "+usageNote+" On the other types they are kept as sent, and the amount is not compared with them.")),
		v.List("tax_items", taxItemSchema, func(t *Transaction) *[]TaxItem { return &t.TaxItems }, v.Note(usageNote)),
	},
		v.Variant[Transaction]{Values: []string{TypeCharge, TypeCredit, TypePayment, TypeRepayment}, Fields: []v.Field[Transaction]{
			productCodeOptional,
		}},
		v.Variant[Transaction]{Values: []string{TypeSupplyCharge}, Fields: []v.Field[Transaction]{
			productCodeRequired,
		}},
	)
}

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
	r, err := parseTransactions(context.Background(), body, func(string) v.Date { return v.DateOf(today.UTC()) }, &errs)
	if err != nil {
		return nil, opts, err
	}
	if len(errs) > 0 {
		return nil, opts, TransactionsFailure(errs, r.raw)
	}
	return r, opts, nil
}

// parseTransactions decodes and checks the body; todayFor dates "today" for
// the request's supplier, once that is read from the body. It fails for a
// body that is not a JSON object (E7's form of a parse_error), or for a
// request whose client hung up: it stops between its phases
// (validate.Checkpoint).
func parseTransactions(ctx context.Context, body []byte, todayFor func(supplier string) v.Date, errs *problem.List) (*TransactionsRequest, error) {
	var r TransactionsRequest
	w := v.Walker{Errors: *errs}
	root, err := transactionsSchema.Decode(ctx, body, &w, &r)
	if p, ok := problem.As(err); ok {
		return nil, transactionsParseFailure(p)
	}
	if err != nil {
		return nil, fmt.Errorf("transactions: %w", err)
	}
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
	today := todayFor(r.ImportSupplier)
	if err := v.Checkpoint(ctx, v.LookedUp); err != nil {
		return nil, fmt.Errorf("transactions: %w", err)
	}
	checks := TransactionChecks{Today: today}
	checks.Check(&w, "transactions", r.Transactions)
	*errs = w.Errors
	return &r, nil
}
