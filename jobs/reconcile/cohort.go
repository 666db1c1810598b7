package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Line is one account of a cohort file (cmd/importctl/cohort.Line, which
// jobs may not import): the E4 payload and what E6 to E9 add, each as sent.
type Line struct {
	Account            json.RawMessage
	Notes              json.RawMessage
	Transactions       json.RawMessage
	Statements         json.RawMessage
	PaymentInstruction json.RawMessage
}

// farFuture is the "today" the cohort's side checks dates against: the
// service refused dates after its own today when it imported the line, and
// what it accepted then must not be refused now.
var farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// FromCohortLine computes the summary that the service must hold for the
// line once the runner (importctl run) has imported it, for a supplier of
// country (ISO 3166-1 alpha-2; the country national phone numbers and
// supply postcodes are read in, which the reconciliation endpoint answers in
// its Import-Supplier-Country header). It parses every part with the
// service's own parsers and normalises the account with its validator, so
// phone numbers, postcodes, e-mails and document paths are in the spelling
// the service stores.
//
// The catalogue is not asked: the supplier, every tariff and the business
// contract are taken to exist. Errors: the *problem.Error with which the
// service would refuse a part (the line cannot have been imported as it is),
// or a *LineError naming the part.
func FromCohortLine(ctx context.Context, line Line, country string) (Summary, error) {
	c, sum, balance, err := fromCohortLine(ctx, line, country)
	if err != nil {
		return Summary{}, err
	}
	s := summarise(&c)
	s.TransactionsSum, s.LedgerBalance = money(sum), money(balance)
	return s, nil
}

// CohortCanonical is the canonical form that the service must hold for the
// line, as FromCohortLine digests it (lists in their canonical order, an
// omitted list empty): the cohort's side of Diff. Errors as FromCohortLine.
func CohortCanonical(ctx context.Context, line Line, country string) (Canonical, error) {
	c, _, _, err := fromCohortLine(ctx, line, country)
	if err != nil {
		return Canonical{}, err
	}
	c.sortLists()
	return c.normalised(), nil
}

// fromCohortLine is the canonical form of a line, the sum of its
// transactions' amounts and the ledger balance they make.
func fromCohortLine(ctx context.Context, line Line, country string) (c Canonical, sum, balance decimal.Decimal, err error) {
	fail := func(part string, err error) (Canonical, decimal.Decimal, decimal.Decimal, error) {
		return Canonical{}, decimal.Zero, decimal.Zero, &LineError{Part: part, Err: err}
	}
	val := account.Validator{Catalog: openCatalog{country: country}}
	acc, err := val.Validate(ctx, line.Account)
	if err != nil {
		return fail("account", err)
	}
	c, err = canonicalFromPayload(acc)
	if err != nil {
		return fail("account", err)
	}
	ident := func(key string, raw json.RawMessage) []byte {
		b, _ := json.Marshal(map[string]any{"import_supplier": acc.ImportSupplier,
			"external_account_number": acc.ExternalAccountNumber, key: raw})
		return b
	}
	if len(line.Notes) > 0 {
		r, err := postimport.ParseNotes(ident("notes", line.Notes))
		if err != nil {
			return fail("notes", err)
		}
		c.Notes = append(c.Notes, notesFromPayload(r.Notes)...)
	}
	sum, balance = decimal.Zero, decimal.Zero
	// The ledger's transactions are stored as E7's (account creation writes
	// them with insert_transactions), and count as E7's.
	for _, l := range acc.Ledgers {
		for _, t := range l.Transactions() {
			c.Transactions = append(c.Transactions, txFromPayload(t))
			sum = sum.Add(t.Amount.Decimal())
		}
		balance = balance.Add(postimport.LedgerBalance(l.Transactions()))
	}
	if len(line.Transactions) > 0 {
		r, _, err := postimport.ParseTransactions(ident("transactions", line.Transactions), url.Values{}, farFuture)
		if err != nil {
			return fail("transactions", err)
		}
		for _, t := range r.Transactions {
			c.Transactions = append(c.Transactions, txFromPayload(t))
			sum = sum.Add(t.Amount.Decimal())
		}
		balance = balance.Add(postimport.LedgerBalance(r.Transactions))
	}
	if len(line.Statements) > 0 {
		r, err := postimport.ParseStatements(ident("statements", line.Statements), farFuture)
		if err != nil {
			return fail("statements", err)
		}
		c.Statements = append(c.Statements, statementsFromPayload(r.Statements)...)
	}
	if len(line.PaymentInstruction) > 0 {
		var pi map[string]json.RawMessage
		if err := json.Unmarshal(line.PaymentInstruction, &pi); err != nil {
			return fail("payment_instruction", err)
		}
		pi["import_supplier"], _ = json.Marshal(acc.ImportSupplier)
		pi["external_account_number"], _ = json.Marshal(acc.ExternalAccountNumber)
		body, _ := json.Marshal(pi)
		r, errs, perr := payment.ParseAccountRequest(body)
		if perr != nil {
			return fail("payment_instruction", perr)
		}
		if len(errs) > 0 {
			return fail("payment_instruction", errs.Err("payment_instruction_failed_validation", "Could not validate the payment instruction."))
		}
		c.PaymentInstructions = append(c.PaymentInstructions, CanonicalPayment{Vendor: r.Vendor, Reference: r.Reference, Type: r.Type})
	}
	return c, sum, balance, nil
}

// statementsFromPayload is the canonical form of historical statements as
// sent, with the account (statements) or with E8.
func statementsFromPayload(sts []postimport.Statement) []CanonicalSt {
	var out []CanonicalSt
	for _, st := range sts {
		out = append(out, CanonicalSt{
			StatementID: st.StatementID, Number: st.Number, BillPeriodFromDate: string(st.BillPeriodFromDate),
			BillPeriodToDate: string(st.BillPeriodToDate), IssuedDate: datePtr(st.IssuedDate),
			GrossAmount: st.GrossAmount, StatementPath: st.StatementPath,
		})
	}
	return out
}

// LineError is a part of a cohort line that the service would refuse.
type LineError struct {
	// Part is account, notes, transactions, statements or
	// payment_instruction.
	Part string
	Err  error
}

func (e *LineError) Error() string {
	if p, ok := problem.As(e.Err); ok {
		msg := p.Code
		for _, fe := range p.Errors {
			msg += fmt.Sprintf("; %s at %s", fe.Code, fe.Attr)
		}
		return e.Part + ": " + msg
	}
	return e.Part + ": " + e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }

// openCatalog answers that everything exists: the cohort's side checks the
// form of a line, not the service's catalogue, which it cannot see.
type openCatalog struct{ country string }

func (o openCatalog) Supplier(_ context.Context, code string) (account.Supplier, bool, error) {
	return account.Supplier{Code: code, Country: o.country}, true, nil
}
func (openCatalog) MissingTariffs(context.Context, []string) ([]string, error) { return nil, nil }
func (openCatalog) ContractExists(context.Context, int64, string) (bool, error) {
	return true, nil
}

// canonicalFromPayload is the account part of the canonical form, from the
// validated (normalised) payload.
func canonicalFromPayload(a *account.Account) (Canonical, error) {
	c := Canonical{ExternalAccountNumber: a.ExternalAccountNumber}
	c.UnknownOccupier = a.UnknownOccupier != nil && *a.UnknownOccupier
	b := a.EffectiveBillingAddress()
	c.BillingAddress = CanonicalAddress{StreetAddress: b.StreetAddress, Locality: b.Locality,
		AdministrativeArea: b.AdministrativeArea, Country: b.Country, PostalCode: b.PostalCode}
	if a.Business != nil {
		id := a.Business.BusinessContractIdentifier
		c.BusinessContract = &id
	}
	for _, cu := range a.Customers {
		cc := CanonicalCustomer{GivenName: cu.GivenName, FamilyName: cu.FamilyName, Email: cu.Email,
			Mobile: cu.Mobile, Landline: cu.Landline, DateOfBirth: datePtr(cu.DateOfBirth)}
		for _, p := range cu.AlternativePhoneNumbers {
			cc.AlternativePhoneNumbers = append(cc.AlternativePhoneNumbers, p.PhoneNumber)
		}
		if p := cu.CustomerPreferences; p != nil {
			cc.OptedIntoUpdates, cc.OptedIntoOffers, cc.OptedIntoSMS = p.OptedIntoUpdates, p.OptedIntoOffers, p.OptedIntoSMS
		}
		for _, d := range cu.UserDetails {
			cc.UserDetails = append(cc.UserDetails, CanonicalField{Name: d.Namespace, Value: d.Value})
		}
		c.Customers = append(c.Customers, cc)
	}
	for _, sa := range a.SupplyAddresses {
		cs := CanonicalSupply{Lines: [4]*string{&sa.SupplyAddress1, sa.SupplyAddress2, sa.SupplyAddress3, sa.SupplyAddress4},
			Postcode: sa.SupplyPostcode, FromDate: string(sa.CustomerAtSupplyAddressFromDate)}
		for _, sp := range sa.SupplyPoints {
			p, err := pointFromPayload(sp)
			if err != nil {
				return c, err
			}
			cs.SupplyPoints = append(cs.SupplyPoints, p)
		}
		c.SupplyAddresses = append(c.SupplyAddresses, cs)
	}
	for _, m := range a.Metadata {
		v, err := CanonicalJSON(m.Value)
		if err != nil {
			return c, err
		}
		c.Metadata = append(c.Metadata, CanonicalField{Name: m.Key, Value: v})
	}
	c.Notes = notesFromPayload(a.Notes)
	c.Statements = statementsFromPayload(a.Statements)
	for _, l := range a.Ledgers {
		var last *decimal.Decimal
		if l.LastStatementBalance != nil {
			d := l.LastStatementBalance.Decimal()
			last = &d
		}
		c.Ledger = canonicalLedger(datePtr(l.LastStatementClosingDate), datePtr(l.LastStatementIssueDate), last)
	}
	return c, nil
}

// pointCommon are the members of a supply point's payload that are not its
// type's own fields: the common ones, and, for a type with a layout of its
// own, its meters and transfer readings, which have tables of their own. A
// type without one keeps its meters and readings among its fields, as sent,
// as storage keeps them (account.SupplyPoint.Other).
var (
	pointCommon        = []string{"supply_type", "supply_start_date", "last_billed_to_date", "agreements"}
	pointCommonLayouts = append(slices.Clone(pointCommon), "meters", "transfer_readings")
)

func pointFromPayload(sp account.SupplyPoint) (CanonicalPoint, error) {
	p := CanonicalPoint{SupplyType: sp.SupplyType, SupplyStartDate: string(sp.SupplyStartDate),
		LastBilledToDate: datePtr(sp.LastBilledToDate)}
	// Only the type's own fields are wanted: the lists are left out of
	// the encoding rather than encoded and dropped.
	own := sp
	own.Agreements, own.Meters, own.TransferReadings = nil, nil, nil
	raw, err := json.Marshal(own)
	if err != nil {
		return p, err
	}
	skip := pointCommon
	if account.HasOwnLayout(sp.SupplyType) {
		skip = pointCommonLayouts
	}
	if p.Fields, err = fieldsOf(raw, skip...); err != nil {
		return p, err
	}
	for _, m := range sp.Meters {
		cm := CanonicalMeter{SerialNumber: &m.SerialNumber, Subgroup: m.Subgroup, SealDate: datePtr(m.SealDate),
			MeterNumber: m.MeterNumber, Status: m.Status, ActiveFrom: datePtr(m.ActiveFrom)}
		if m.MeterType != nil {
			raw, err := json.Marshal(m.MeterType)
			if err != nil {
				return p, err
			}
			if cm.MeterType, err = fieldsOf(raw); err != nil {
				return p, err
			}
		}
		for _, r := range m.Registers {
			cr := CanonicalRegister{RegisterType: r.RegisterType, WholeDigits: r.WholeDigits,
				DecimalDigits: r.DecimalDigits, ActiveFrom: datePtr(r.ActiveFrom)}
			if r.Multiplier != nil {
				d := r.Multiplier.Decimal()
				cr.Multiplier = canonicalDecimalPtr(&d)
			}
			cm.Registers = append(cm.Registers, cr)
		}
		p.Meters = append(p.Meters, cm)
	}
	for _, ag := range sp.Agreements {
		p.Agreements = append(p.Agreements, CanonicalField{Name: string(ag.EffectiveFrom), Value: ag.TariffCode})
	}
	for _, tr := range sp.TransferReadings {
		p.TransferReadings = append(p.TransferReadings, CanonicalReading{RegisterType: tr.RegisterType,
			ReadDate: string(tr.ReadDate), Value: tr.Value})
	}
	return p, nil
}

func notesFromPayload(ns []note.Note) []CanonicalNote {
	var out []CanonicalNote
	for _, n := range ns {
		cn := CanonicalNote{IsPinned: n.IsPinned != nil && *n.IsPinned}
		if n.Body != nil {
			cn.Body = *n.Body
		}
		if n.UnpinAt != nil {
			if t, err := time.Parse(time.RFC3339Nano, string(*n.UnpinAt)); err == nil {
				s := utc(t.Truncate(time.Microsecond))
				cn.UnpinAt = &s
			} else {
				s := string(*n.UnpinAt)
				cn.UnpinAt = &s
			}
		}
		for _, d := range n.DocumentPaths {
			cn.DocumentPaths = append(cn.DocumentPaths, d.DocumentPath)
		}
		out = append(out, cn)
	}
	return out
}

func txFromPayload(t postimport.Transaction) CanonicalTx {
	ct := CanonicalTx{TransactionID: t.TransactionID, TransactionDate: string(t.TransactionDate), Type: t.Type,
		Amount: money(t.Amount.Decimal()), Reason: t.Reason, DisplayNote: t.DisplayNote, Note: t.Note,
		Reference: t.Reference, PaymentType: t.PaymentType, ProductCode: t.ProductCode,
		ToPrepayMeterSerialNumber: t.ToPrepayMeterSerialNumber}
	for _, l := range t.LineItems {
		cl := CanonicalLine{RateBand: l.RateBand, StartDate: string(l.StartDate), EndDate: string(l.EndDate),
			NumberOfUnits: l.NumberOfUnits.Decimal().String(), NetAmount: money(l.NetAmount.Decimal()),
			PricePerUnit: l.PricePerUnit.Decimal().String()}
		for _, u := range l.Units {
			cl.Units = append(cl.Units, u.Decimal().String())
		}
		ct.LineItems = append(ct.LineItems, cl)
	}
	for _, x := range t.TaxItems {
		ct.TaxItems = append(ct.TaxItems, CanonicalTax{Amount: money(x.Amount.Decimal()), TaxType: x.TaxType,
			ValueTaxed: money(x.ValueTaxed.Decimal()), Rate: x.Rate.Decimal().String(), UnitType: x.UnitType})
	}
	return ct
}

func datePtr(d *validate.Date) *string {
	if d == nil {
		return nil
	}
	s := string(*d)
	return &s
}

// isMoveNote reports whether a note is the one E7 pins when
// force_add_to_current_statement moves transactions
// (postimport.pinMoveNote): the service writes it, the cohort never sends
// it. A test imports a moved transaction to hold the two together.
func isMoveNote(body string, pinned bool) bool {
	return pinned && strings.HasPrefix(body, "Migration: ") &&
		strings.Contains(body, "were moved to its first day") && strings.Contains(body, "force_add_to_current_statement")
}
