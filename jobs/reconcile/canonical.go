package reconcile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Canonical is an account's content as imported, in the one form that both
// sides build: the client from a cohort line (FromCohortLine), the service
// from its rows (the store). It holds what the caller sent and the service
// keeps as sent, after the normalisation the service applies on the way in
// (the same Go functions on both sides), and leaves out what the service
// assigns: ids, the service account number, the operations team (E5's
// request, not the line), timestamps it sets (a note's created_at when the
// note has none, a transaction's description and moved date), vendor answers
// and payment instructions of a business (E2). docs/reconciliation.md lists
// every member.
//
// Lists whose order is the payload's (customers, supply addresses and points,
// meters, registers, readings, phone numbers, user details, document paths)
// keep it; agreements are in effective date order, as validation sorts them;
// lists the service orders its own way (metadata, notes, transactions,
// statements, payment instructions) are sorted by a key of their own here,
// so that neither side's order matters.
type Canonical struct {
	ExternalAccountNumber string              `json:"external_account_number"`
	UnknownOccupier       bool                `json:"unknown_occupier"`
	BillingAddress        CanonicalAddress    `json:"billing_address"`
	BusinessContract      *string             `json:"business_contract_identifier"`
	Customers             []CanonicalCustomer `json:"customers"`
	SupplyAddresses       []CanonicalSupply   `json:"supply_addresses"`
	Metadata              []CanonicalField    `json:"metadata"`
	Notes                 []CanonicalNote     `json:"notes"`
	Transactions          []CanonicalTx       `json:"transactions"`
	Statements            []CanonicalSt       `json:"statements"`
	PaymentInstructions   []CanonicalPayment  `json:"payment_instructions"`
	// Ledger is the last statement of the payload's ledger; nil (and left
	// out of the encoding, so that the digest of an account without one is
	// what it was before ledgers were accepted) when it has none of it.
	// The ledger's transactions are among Transactions.
	Ledger *CanonicalLedger `json:"ledger,omitempty"`
}

// CanonicalLedger is the last statement of the payload's ledger, as sent:
// dates as YYYY-MM-DD, the balance a canonical decimal in the reference's
// sign (credit positive).
type CanonicalLedger struct {
	LastStatementClosingDate *string `json:"last_statement_closing_date"`
	LastStatementIssueDate   *string `json:"last_statement_issue_date"`
	LastStatementBalance     *string `json:"last_statement_balance"`
}

// canonicalLedger is the canonical form of a last statement, nil when it
// has none of its three fields.
func canonicalLedger(closing, issued *string, balance *decimal.Decimal) *CanonicalLedger {
	if closing == nil && issued == nil && balance == nil {
		return nil
	}
	return &CanonicalLedger{LastStatementClosingDate: closing, LastStatementIssueDate: issued,
		LastStatementBalance: canonicalDecimalPtr(balance)}
}

// CanonicalAddress is the billing address stored: the payload's, or the one
// derived from the first supply address (account.EffectiveBillingAddress).
type CanonicalAddress struct {
	StreetAddress      *string `json:"street_address"`
	Locality           *string `json:"locality"`
	AdministrativeArea *string `json:"administrative_area"`
	Country            string  `json:"country"`
	PostalCode         *string `json:"postal_code"`
}

// CanonicalCustomer is a customer, phone numbers in E.164 as validation
// normalises them.
type CanonicalCustomer struct {
	GivenName               *string          `json:"given_name"`
	FamilyName              *string          `json:"family_name"`
	Email                   *string          `json:"email"`
	Mobile                  *string          `json:"mobile"`
	Landline                *string          `json:"landline"`
	AlternativePhoneNumbers []string         `json:"alternative_phone_numbers"`
	DateOfBirth             *string          `json:"date_of_birth"`
	OptedIntoUpdates        *bool            `json:"opted_into_updates"`
	OptedIntoOffers         *bool            `json:"opted_into_offers"`
	OptedIntoSMS            *bool            `json:"opted_into_sms"`
	UserDetails             []CanonicalField `json:"user_details"`
}

// CanonicalSupply is a supply address with its supply points.
type CanonicalSupply struct {
	Lines        [4]*string       `json:"lines"`
	Postcode     string           `json:"postcode"`
	FromDate     string           `json:"from_date"`
	SupplyPoints []CanonicalPoint `json:"supply_points"`
}

// CanonicalPoint is a supply point. Fields are its type's own fields that
// are set, by name, each value in canonical JSON (CanonicalJSON).
type CanonicalPoint struct {
	SupplyType       string             `json:"supply_type"`
	SupplyStartDate  string             `json:"supply_start_date"`
	LastBilledToDate *string            `json:"last_billed_to_date"`
	Fields           []CanonicalField   `json:"fields"`
	Meters           []CanonicalMeter   `json:"meters"`
	Agreements       []CanonicalField   `json:"agreements"` // {effective_from, tariff_code}
	TransferReadings []CanonicalReading `json:"transfer_readings"`
}

// CanonicalMeter is a meter; MeterType holds the meter_type fields set.
type CanonicalMeter struct {
	SerialNumber *string             `json:"serial_number"`
	Subgroup     *int64              `json:"subgroup"`
	SealDate     *string             `json:"seal_date"`
	MeterNumber  *int64              `json:"meter_number"`
	Status       *string             `json:"status"`
	ActiveFrom   *string             `json:"active_from"`
	MeterType    []CanonicalField    `json:"meter_type"`
	Registers    []CanonicalRegister `json:"registers"`
}

// CanonicalRegister is a meter register; Multiplier is a canonical decimal.
type CanonicalRegister struct {
	RegisterType  string  `json:"register_type"`
	WholeDigits   *int64  `json:"whole_digits"`
	DecimalDigits *int64  `json:"decimal_digits"`
	ActiveFrom    *string `json:"active_from"`
	Multiplier    *string `json:"multiplier"`
}

// CanonicalReading is a transfer reading, its value as sent.
type CanonicalReading struct {
	RegisterType string `json:"register_type"`
	ReadDate     string `json:"read_date"`
	Value        string `json:"value"`
}

// CanonicalField is a name and a value: a metadata key and its value in
// canonical JSON, a user detail, a supply point or meter field.
type CanonicalField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CanonicalNote is a note without its created_at, which the service sets
// when the note has none and so cannot tell apart from one sent. UnpinAt is
// RFC 3339 in UTC.
type CanonicalNote struct {
	Body          string   `json:"body"`
	IsPinned      bool     `json:"is_pinned"`
	UnpinAt       *string  `json:"unpin_at"`
	DocumentPaths []string `json:"document_paths"`
}

// CanonicalTx is a transaction as sent: its date is the one sent, which the
// service keeps as original_transaction_date when it moves the transaction.
// Amounts have two decimal places, other numbers are canonical decimals.
type CanonicalTx struct {
	TransactionID             string          `json:"transaction_id"`
	TransactionDate           string          `json:"transaction_date"`
	Type                      string          `json:"type"`
	Amount                    string          `json:"amount"`
	Reason                    *string         `json:"reason"`
	DisplayNote               *string         `json:"display_note"`
	Note                      *string         `json:"note"`
	Reference                 *string         `json:"reference"`
	PaymentType               *string         `json:"payment_type"`
	ProductCode               *string         `json:"product_code"`
	ToPrepayMeterSerialNumber *string         `json:"to_prepay_meter_serial_number"`
	LineItems                 []CanonicalLine `json:"line_items"`
	TaxItems                  []CanonicalTax  `json:"tax_items"`
}

// CanonicalLine is a line item of a transaction.
type CanonicalLine struct {
	RateBand      string   `json:"rate_band"`
	StartDate     string   `json:"start_date"`
	EndDate       string   `json:"end_date"`
	NumberOfUnits string   `json:"number_of_units"`
	NetAmount     string   `json:"net_amount"`
	PricePerUnit  string   `json:"price_per_unit"`
	Units         []string `json:"units"`
}

// CanonicalTax is a tax item of a transaction.
type CanonicalTax struct {
	Amount     string  `json:"amount"`
	TaxType    string  `json:"tax_type"`
	ValueTaxed string  `json:"value_taxed"`
	Rate       string  `json:"rate"`
	UnitType   *string `json:"unit_type"`
}

// CanonicalSt is a historical statement.
type CanonicalSt struct {
	StatementID        string  `json:"statement_id"`
	Number             *string `json:"number"`
	BillPeriodFromDate string  `json:"bill_period_from_date"`
	BillPeriodToDate   string  `json:"bill_period_to_date"`
	IssuedDate         *string `json:"issued_date"`
	GrossAmount        *int64  `json:"gross_amount"`
	StatementPath      *string `json:"statement_path"`
}

// CanonicalPayment is the account's own payment instruction (E9) as sent:
// vendor, reference and type, without the vendor's answer.
type CanonicalPayment struct {
	Vendor    string `json:"vendor"`
	Reference string `json:"reference"`
	Type      string `json:"type"`
}

// sortLists puts the lists that have no order of their own in the order of
// their keys, so that both sides agree whatever order they read them in.
func (c *Canonical) sortLists() {
	slices.SortStableFunc(c.Metadata, func(a, b CanonicalField) int { return strings.Compare(a.Name, b.Name) })
	sortByEncoding(c.Notes)
	slices.SortStableFunc(c.Transactions, func(a, b CanonicalTx) int { return strings.Compare(a.TransactionID, b.TransactionID) })
	slices.SortStableFunc(c.Statements, func(a, b CanonicalSt) int { return strings.Compare(a.StatementID, b.StatementID) })
	sortByEncoding(c.PaymentInstructions)
}

// sortByEncoding sorts a list whose members have no key of their own by
// their JSON encodings, each computed once.
func sortByEncoding[T any](list []T) {
	if len(list) < 2 {
		return
	}
	type keyed struct {
		key []byte
		v   T
	}
	ks := make([]keyed, len(list))
	for i, v := range list {
		ks[i] = keyed{mustJSON(v), v}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return bytes.Compare(a.key, b.key) })
	for i := range ks {
		list[i] = ks[i].v
	}
}

// Digest is the hex SHA-256 of the canonical form's JSON encoding (struct
// members in declaration order, lists as sortLists leaves them, nil lists
// as []): the same content always gives the same digest.
func (c *Canonical) Digest() string {
	c.sortLists()
	sum := sha256.Sum256(mustJSON(c.normalised()))
	return hex.EncodeToString(sum[:])
}

// normalised returns c with every nil list empty, so that a list the
// payload omitted and an empty one stored encode alike.
func (c Canonical) normalised() Canonical {
	c.Customers = orEmpty(c.Customers)
	for i := range c.Customers {
		cu := &c.Customers[i]
		cu.AlternativePhoneNumbers = orEmpty(cu.AlternativePhoneNumbers)
		cu.UserDetails = orEmpty(cu.UserDetails)
	}
	c.SupplyAddresses = orEmpty(c.SupplyAddresses)
	for i := range c.SupplyAddresses {
		sa := &c.SupplyAddresses[i]
		sa.SupplyPoints = orEmpty(sa.SupplyPoints)
		for j := range sa.SupplyPoints {
			sp := &sa.SupplyPoints[j]
			sp.Fields, sp.Agreements = orEmpty(sp.Fields), orEmpty(sp.Agreements)
			sp.Meters, sp.TransferReadings = orEmpty(sp.Meters), orEmpty(sp.TransferReadings)
			for k := range sp.Meters {
				sp.Meters[k].MeterType = orEmpty(sp.Meters[k].MeterType)
				sp.Meters[k].Registers = orEmpty(sp.Meters[k].Registers)
			}
		}
	}
	c.Metadata, c.Notes = orEmpty(c.Metadata), orEmpty(c.Notes)
	for i := range c.Notes {
		c.Notes[i].DocumentPaths = orEmpty(c.Notes[i].DocumentPaths)
	}
	c.Transactions = orEmpty(c.Transactions)
	for i := range c.Transactions {
		t := &c.Transactions[i]
		t.LineItems, t.TaxItems = orEmpty(t.LineItems), orEmpty(t.TaxItems)
		for k := range t.LineItems {
			t.LineItems[k].Units = orEmpty(t.LineItems[k].Units)
		}
	}
	c.Statements, c.PaymentInstructions = orEmpty(c.Statements), orEmpty(c.PaymentInstructions)
	return c
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// mustJSON encodes v without HTML escaping; the canonical types always
// encode.
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("reconcile: encode canonical form: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// CanonicalJSON rewrites a JSON value in one spelling: objects with their
// members sorted by name, numbers as exact decimals without trailing zeros
// ("1.50" and "1.5" are one number; jsonb and numeric columns keep either),
// strings as encoding/json writes them without HTML escaping, no spaces.
func CanonicalJSON(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("canonical json: more than one value")
	}
	var b strings.Builder
	if err := writeCanonical(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeCanonical(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(canonicalNumber(x.String()))
	case string:
		b.Write(mustJSON(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(mustJSON(k))
			b.WriteByte(':')
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical json: unexpected %T", v)
	}
	return nil
}

// canonicalNumber is a decimal literal without trailing zeros; a literal
// that decimal cannot read is kept as written.
func canonicalNumber(lit string) string {
	d, err := decimal.NewFromString(lit)
	if err != nil {
		return lit
	}
	return d.String()
}

// canonicalDecimalPtr is canonicalNumber of an optional literal.
func canonicalDecimalPtr(d *decimal.Decimal) *string {
	if d == nil {
		return nil
	}
	s := d.String()
	return &s
}

// money writes an amount with two decimal places, as E7 answers it.
func money(d decimal.Decimal) string { return d.StringFixed(2) }

// utc writes a time as RFC 3339 in UTC with its fraction, if any.
func utc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// fieldsOf turns a JSON object into its members with canonical values,
// sorted by name, leaving out the names in skip and null values.
func fieldsOf(raw []byte, skip ...string) ([]CanonicalField, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("fields: %w", err)
	}
	var out []CanonicalField
	for k, v := range m {
		if slices.Contains(skip, k) || string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		cv, err := CanonicalJSON(v)
		if err != nil {
			return nil, err
		}
		out = append(out, CanonicalField{Name: k, Value: cv})
	}
	slices.SortFunc(out, func(a, b CanonicalField) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
