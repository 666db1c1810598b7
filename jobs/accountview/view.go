// Package accountview is the read model of one imported account: everything the
// service holds about it, from its import process to its ledger balance, as
// one document, so that an operator can check an import against the source
// system (importctl account show). It only reads.
package accountview

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// View is an account as the service holds it: the document that importctl
// account show --json prints. Its JSON field names are stable
// (docs/operating.md, "Reading an account back"). Dates are "YYYY-MM-DD", times
// RFC 3339 in UTC, and every amount of money a string with two decimal
// places, as E7 answers it.
type View struct {
	ImportSupplier        string  `json:"import_supplier"`
	ExternalAccountNumber string  `json:"external_account_number"`
	Process               Process `json:"import_process"`
	// Account is nil until E5 has created the account.
	Account *Account `json:"account"`
}

// Process is the account's import process (E4, E5, E10).
type Process struct {
	Status               string     `json:"status"`
	ServiceAccountNumber *string    `json:"service_account_number"`
	StagedAt             time.Time  `json:"staged_at"`
	UpdatedAt            time.Time  `json:"updated_at"`
	AccountCreatedAt     *time.Time `json:"account_created_at"`
	// LastError is the section 7 body of the last failed processing, or
	// null; kept only while the account does not exist, as E10 shows it.
	LastError json.RawMessage `json:"last_error"`
	// Skipped is true while the account is marked to be skipped
	// (importctl account skip).
	Skipped bool `json:"skipped"`
}

// Account is a created account with everything imported onto it.
type Account struct {
	ServiceAccountNumber string          `json:"service_account_number"`
	CreatedAt            time.Time       `json:"created_at"`
	OperationsTeam       string          `json:"operations_team"`
	UnknownOccupier      bool            `json:"unknown_occupier"`
	BillingAddress       BillingAddress  `json:"billing_address"`
	LastBilledToDate     *string         `json:"last_billed_to_date"`
	Business             *Business       `json:"business"`
	Customers            []Customer      `json:"customers"`
	SupplyAddresses      []SupplyAddress `json:"supply_addresses"`
	Metadata             []Metadata      `json:"metadata"`
	Notes                []Note          `json:"notes"`
	Transactions         []Transaction   `json:"transactions"`
	Statements           []Statement     `json:"statements"`
	PaymentInstructions  []Payment       `json:"payment_instructions"`
	Ledger               Ledger          `json:"ledger"`
}

// BillingAddress is where the account's bills go.
type BillingAddress struct {
	StreetAddress      *string `json:"street_address"`
	Locality           *string `json:"locality"`
	AdministrativeArea *string `json:"administrative_area"`
	Country            string  `json:"country"`
	PostalCode         *string `json:"postal_code"`
}

// Business is the business whose contract the account names.
type Business struct {
	ExternalBusinessIdentifier string  `json:"external_business_identifier"`
	BusinessType               string  `json:"business_type"`
	CompanyName                string  `json:"company_name"`
	CompanyNumber              string  `json:"company_number"`
	ContractIdentifier         string  `json:"business_contract_identifier"`
	ContractValidFromDate      *string `json:"contract_valid_from_date"`
	ContractSignedAtDate       *string `json:"contract_signed_at_date"`
}

// Customer is one of the account's customers, in payload order.
type Customer struct {
	GivenName               *string      `json:"given_name"`
	FamilyName              *string      `json:"family_name"`
	Email                   *string      `json:"email"`
	Mobile                  *string      `json:"mobile"`
	Landline                *string      `json:"landline"`
	AlternativePhoneNumbers []string     `json:"alternative_phone_numbers"`
	DateOfBirth             *string      `json:"date_of_birth"`
	OptedIntoUpdates        *bool        `json:"opted_into_updates"`
	OptedIntoOffers         *bool        `json:"opted_into_offers"`
	OptedIntoSMS            *bool        `json:"opted_into_sms"`
	UserDetails             []UserDetail `json:"user_details"`
}

// UserDetail is a customer's {namespace, value} pair.
type UserDetail struct {
	Namespace string `json:"namespace"`
	Value     string `json:"value"`
}

// SupplyAddress is an address with its supply points, in payload order.
type SupplyAddress struct {
	SupplyAddress1                  string        `json:"supply_address1"`
	SupplyAddress2                  *string       `json:"supply_address2"`
	SupplyAddress3                  *string       `json:"supply_address3"`
	SupplyAddress4                  *string       `json:"supply_address4"`
	SupplyPostcode                  string        `json:"supply_postcode"`
	CustomerAtSupplyAddressFromDate string        `json:"customer_at_supply_address_from_date"`
	SupplyPoints                    []SupplyPoint `json:"supply_points"`
}

// SupplyPoint is a supply point with its meters, agreements and transfer
// readings.
type SupplyPoint struct {
	SupplyType       string  `json:"supply_type"`
	SupplyStartDate  string  `json:"supply_start_date"`
	LastBilledToDate *string `json:"last_billed_to_date"`
	// Fields are the type's own fields under their payload names: for a
	// type with a table of its own, those set, in the payload schema's
	// order; for any other type, the fields as sent.
	Fields           Fields            `json:"fields"`
	Meters           []Meter           `json:"meters"`
	Agreements       []Agreement       `json:"agreements"`
	TransferReadings []TransferReading `json:"transfer_readings"`
}

// Meter is a meter of a supply point with its registers.
type Meter struct {
	SerialNumber *string `json:"serial_number"`
	Subgroup     *int64  `json:"subgroup"`
	SealDate     *string `json:"seal_date"`
	MeterNumber  *int64  `json:"meter_number"`
	Status       *string `json:"status"`
	ActiveFrom   *string `json:"active_from"`
	// MeterType holds the meter_type fields that are set.
	MeterType Fields     `json:"meter_type"`
	Registers []Register `json:"registers"`
}

// Register is a meter register.
type Register struct {
	RegisterType  string           `json:"register_type"`
	WholeDigits   *int64           `json:"whole_digits"`
	DecimalDigits *int64           `json:"decimal_digits"`
	ActiveFrom    *string          `json:"active_from"`
	Multiplier    *decimal.Decimal `json:"multiplier"`
}

// Agreement is a supply point's tariff from a date on.
type Agreement struct {
	TariffCode    string `json:"tariff_code"`
	ProductCode   string `json:"product_code"`
	EffectiveFrom string `json:"effective_from"`
}

// TransferReading is a meter reading taken at the transfer.
type TransferReading struct {
	RegisterType string `json:"register_type"`
	ReadDate     string `json:"read_date"`
	Value        string `json:"value"`
}

// Metadata is one metadata entry, its value as sent.
type Metadata struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Note is a note of the account (E5's payload, E6, or a note E7 pinned),
// oldest first.
type Note struct {
	Body          string     `json:"body"`
	CreatedAt     time.Time  `json:"created_at"`
	IsPinned      bool       `json:"is_pinned"`
	UnpinAt       *time.Time `json:"unpin_at"`
	DocumentPaths []string   `json:"document_paths"`
}

// Transaction is a financial transaction (E7), in date order.
type Transaction struct {
	TransactionID   string `json:"transaction_id"`
	TransactionDate string `json:"transaction_date"`
	// OriginalTransactionDate is the date sent when E7 moved the
	// transaction into the open statement period.
	OriginalTransactionDate   *string    `json:"original_transaction_date"`
	Type                      string     `json:"type"`
	Amount                    Money      `json:"amount"`
	Reason                    *string    `json:"reason"`
	DisplayNote               *string    `json:"display_note"`
	Note                      *string    `json:"note"`
	Reference                 *string    `json:"reference"`
	PaymentType               *string    `json:"payment_type"`
	ProductCode               *string    `json:"product_code"`
	Description               *string    `json:"description"`
	ToPrepayMeterSerialNumber *string    `json:"to_prepay_meter_serial_number"`
	LineItems                 []LineItem `json:"line_items"`
	TaxItems                  []TaxItem  `json:"tax_items"`
}

// LineItem is a line of a transaction.
type LineItem struct {
	RateBand      string            `json:"rate_band"`
	StartDate     string            `json:"start_date"`
	EndDate       string            `json:"end_date"`
	NumberOfUnits decimal.Decimal   `json:"number_of_units"`
	NetAmount     Money             `json:"net_amount"`
	PricePerUnit  decimal.Decimal   `json:"price_per_unit"`
	Units         []decimal.Decimal `json:"units"`
}

// TaxItem is a tax of a transaction.
type TaxItem struct {
	Amount     Money           `json:"amount"`
	TaxType    string          `json:"tax_type"`
	ValueTaxed Money           `json:"value_taxed"`
	Rate       decimal.Decimal `json:"rate"`
	UnitType   *string         `json:"unit_type"`
}

// Statement is a historical statement (E8), in period order.
type Statement struct {
	StatementID        string  `json:"statement_id"`
	Number             *string `json:"number"`
	BillPeriodFromDate string  `json:"bill_period_from_date"`
	BillPeriodToDate   string  `json:"bill_period_to_date"`
	IssuedDate         *string `json:"issued_date"`
	// GrossAmount is in the currency's lowest denomination, as E8 takes it.
	GrossAmount   *int64  `json:"gross_amount"`
	StatementPath *string `json:"statement_path"`
}

// Payment is a verified payment instruction that covers the account: the
// account's own (E9, For "account") or one of its business that names it
// (E2, For "business").
type Payment struct {
	For                        string          `json:"for"`
	ExternalBusinessIdentifier *string         `json:"external_business_identifier"`
	Vendor                     string          `json:"vendor"`
	Reference                  string          `json:"reference"`
	Type                       string          `json:"type"`
	VendorStatus               string          `json:"vendor_status"`
	VendorDetails              json.RawMessage `json:"vendor_details"`
	VerifiedAt                 time.Time       `json:"verified_at"`
}

// Ledger is the account's ledger. Balance is what the customer owes
// (positive: in debit), as stored and moved by E7; FromTransactions is the
// same sum computed again from the transactions, each amount with the sign
// its type takes (postimport.LedgerSign). The two differ only if the
// ledger was changed outside E7. The transactions include those of the
// payload's ledger (jobs/account), stored with the account as E7 stores
// its own; the last statement is that ledger's, nil when it had none.
type Ledger struct {
	Currency         string `json:"currency"`
	Balance          Money  `json:"balance"`
	FromTransactions Money  `json:"balance_from_transactions"`
	// LastStatementClosingDate and LastStatementIssueDate are the payload
	// ledger's, as sent; LastStatementBalance is in the reference's sign
	// (credit positive), as sent.
	LastStatementClosingDate *string `json:"last_statement_closing_date"`
	LastStatementIssueDate   *string `json:"last_statement_issue_date"`
	LastStatementBalance     *Money  `json:"last_statement_balance"`
}

// Consistent reports whether the stored balance is the sum of the
// transactions.
func (l Ledger) Consistent() bool { return l.Balance.Equal(l.FromTransactions.Decimal) }

// Money is an amount in the currency's major unit, read from a numeric
// column without a float, and written as a string: exactly, with at least
// two decimal places ("71.00", "0.125"), as stored. E7 keeps fractional
// pennies, and an operator comparing a balance with its transactions must
// see them.
type Money struct{ decimal.Decimal }

// MarshalJSON writes the amount as a string (String).
func (m Money) MarshalJSON() ([]byte, error) { return []byte(`"` + m.String() + `"`), nil }

// String returns the exact amount with at least two decimal places.
func (m Money) String() string {
	places := 0
	if _, frac, ok := strings.Cut(m.Decimal.String(), "."); ok { // String drops trailing zeros
		places = len(frac)
	}
	return m.StringFixed(int32(max(2, places)))
}

// Fields is a JSON object kept as read, its members in their order.
type Fields json.RawMessage

// MarshalJSON writes the object; an empty Fields is {}.
func (f Fields) MarshalJSON() ([]byte, error) {
	if len(f) == 0 {
		return []byte("{}"), nil
	}
	return f, nil
}

// UnmarshalJSON keeps the object's text; null leaves f empty.
func (f *Fields) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = nil
		return nil
	}
	*f = append((*f)[:0], b...)
	return nil
}

// Field is one member of a Fields object, its value as JSON text (numbers
// exactly as stored).
type Field struct {
	Name  string
	Value json.RawMessage
}

// List returns the members of f in order.
func (f Fields) List() ([]Field, error) {
	if len(f) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(f))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("fields: not a JSON object: %s", f)
	}
	var out []Field
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("fields: %w", err)
		}
		name, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("fields: member name %v is not a string", t)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("fields: %w", err)
		}
		out = append(out, Field{Name: name, Value: v})
	}
	return out, nil
}

// Load reads the account of supplier with the external account number, in
// one read-only snapshot.
//
// Errors: a *problem.Error of Kind NotFound when the supplier does not
// exist (import_supplier_not_found) or nothing was staged under the number
// (import_process_does_not_exist); otherwise a database failure.
func Load(ctx context.Context, d *db.DB, supplier, externalAccountNumber string) (*View, error) {
	tx, err := d.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("account view: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// Times in the documents below are written in UTC.
	if _, err := tx.ExecContext(ctx, `SET LOCAL TimeZone = 'UTC'`); err != nil {
		return nil, fmt.Errorf("account view: %w", err)
	}
	v, accountID, err := loadProcess(ctx, tx, supplier, externalAccountNumber)
	if err != nil || !accountID.Valid {
		return v, err
	}
	err = LoadAccounts(ctx, tx, []int64{accountID.Int64}, func(_ int64, a *Account) error {
		v.Account = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// LoadVisible is Load for a caller that sees only some import suppliers (an
// API key's scope, visible): another supplier's account answers
// import_supplier_not_found, as a missing supplier does, so that a key
// learns nothing of the suppliers it does not see (as E10 answers).
//
// Errors: those of Load.
func LoadVisible(ctx context.Context, d *db.DB, supplier, externalAccountNumber string, visible func(string) bool) (*View, error) {
	if !visible(supplier) {
		return nil, problem.New(problem.NotFound, imports.CodeImportSupplierNotFound, "Import supplier "+supplier+" does not exist.")
	}
	return Load(ctx, d, supplier, externalAccountNumber)
}

// LoadAccounts reads the accounts with the ids in one statement, so one
// snapshot, and calls each for every account found, in no particular order.
// It is Load's reading of an account, for callers that read many at once
// (the reconciliation summaries read a page of accounts in one round trip).
// Times are in the session's time zone: Load sets UTC. An error from each
// stops the reading and is returned.
func LoadAccounts(ctx context.Context, q sqlx.QueryerContext, ids []int64, each func(id int64, a *Account) error) error {
	rows, err := q.QueryContext(ctx, accountSQL, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("account view: read account: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var doc []byte
		if err := rows.Scan(&id, &doc); err != nil {
			return fmt.Errorf("account view: read account: %w", err)
		}
		a := new(Account)
		if err := json.Unmarshal(doc, a); err != nil {
			return fmt.Errorf("account view: decode account: %w", err)
		}
		a.Ledger.FromTransactions = Money{ledgerSum(a.Transactions)}
		if err := each(id, a); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("account view: read account: %w", err)
	}
	return nil
}

// ledgerSum is the balance the transactions make, E7's rule.
func ledgerSum(ts []Transaction) decimal.Decimal {
	sum := decimal.Zero
	for _, t := range ts {
		sum = sum.Add(t.Amount.Mul(decimal.NewFromInt(postimport.LedgerSign(t.Type))))
	}
	return sum
}

const processSQL = `SELECT s.code, p.external_account_number, p.status, p.service_account_number, p.created_at,
	p.updated_at, p.account_created_at, p.last_error, a.id AS account_id,
	EXISTS (SELECT 1 FROM skipped_accounts k WHERE k.supplier_id = s.id AND k.external_account_number = $2) AS skipped
FROM import_suppliers s
LEFT JOIN import_processes p ON p.supplier_id = s.id AND p.external_account_number = $2
LEFT JOIN accounts a ON a.import_process_id = p.id
WHERE s.code = $1`

// loadProcess reads the import process and the id of its account, if any.
func loadProcess(ctx context.Context, tx *db.Tx, supplier, number string) (*View, sql.NullInt64, error) {
	var r struct {
		Code             string         `db:"code"`
		Number           sql.NullString `db:"external_account_number"`
		Status           sql.NullString `db:"status"`
		ServiceNumber    sql.NullString `db:"service_account_number"`
		CreatedAt        sql.NullTime   `db:"created_at"`
		UpdatedAt        sql.NullTime   `db:"updated_at"`
		AccountCreatedAt sql.NullTime   `db:"account_created_at"`
		LastError        []byte         `db:"last_error"`
		AccountID        sql.NullInt64  `db:"account_id"`
		Skipped          bool           `db:"skipped"`
	}
	err := tx.GetContext(ctx, &r, processSQL, supplier, number)
	if errors.Is(err, db.ErrNotFound) {
		return nil, r.AccountID, problem.New(problem.NotFound, imports.CodeImportSupplierNotFound,
			"Import supplier "+supplier+" does not exist.")
	}
	if err != nil {
		return nil, r.AccountID, fmt.Errorf("account view: read process: %w", err)
	}
	if !r.Number.Valid {
		return nil, r.AccountID, problem.New(problem.NotFound, imports.CodeProcessDoesNotExist,
			"No account "+number+" of supplier "+supplier+" was staged (E4).")
	}
	v := &View{ImportSupplier: r.Code, ExternalAccountNumber: r.Number.String, Process: Process{
		Status: r.Status.String, StagedAt: r.CreatedAt.Time.UTC(), UpdatedAt: r.UpdatedAt.Time.UTC(),
		LastError: json.RawMessage("null"), Skipped: r.Skipped,
	}}
	if r.ServiceNumber.Valid {
		v.Process.ServiceAccountNumber = &r.ServiceNumber.String
	}
	if r.AccountCreatedAt.Valid {
		t := r.AccountCreatedAt.Time.UTC()
		v.Process.AccountCreatedAt = &t
	}
	if len(r.LastError) > 0 && r.Status.String != status.Completed {
		v.Process.LastError = r.LastError
	}
	return v, r.AccountID, nil
}

// accountSQL reads each account of the ids in $1 (an array) as its id and one
// JSON document that decodes into
// Account: one statement, so one snapshot, whatever the account holds.
// Lists are in payload order (position), notes and payment instructions in
// the order they were written, transactions by date, statements by period.
// Numbers stay numeric from the column to the JSON text, which decimal and
// Fields read exactly. It builds json, not jsonb, so that objects keep their
// members in the order written here (the payload's), which jsonb would sort.
//
// Every table is reached through an index, except two that have none on the
// column an account's rows are found by (transfer_readings.supply_point_id,
// payment_instruction_accounts.account_id): each is read once, not once per
// supply point. Meters are found through their supply point and serial
// number, which E5 always sets (a meter's serial number is required).
//
//go:embed sql/account.sql
var accountSQL string
