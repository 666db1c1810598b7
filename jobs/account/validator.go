package account

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Validator checks account payloads. The zero value is not usable: Catalog
// is required.
type Validator struct {
	// Catalog resolves the supplier, tariffs and business contracts. When it
	// is a BatchCatalog, one round trip answers all three; when it is a
	// ProductCatalog too, a ledger whose transactions name products costs a
	// second (products are never cached: they may have been created a
	// moment ago).
	Catalog Catalog
	// SupplyTypes, when set, refuses a supply_type that is not in the
	// catalogue (supply_type_not_recognised). E3 and E4 set it; E5 checks
	// the staged payload again without it: supply types are never removed
	// from the catalogue, so one known at staging is known at creation.
	SupplyTypes SupplyTypeCatalog
	// Now returns the current time; nil means time.Now. The rules that
	// compare a date with today read it, and date today in the supplier's
	// time zone (checker.today; UTC for a supplier without one, or not
	// found): for example, no statement ends after today and no supply
	// starts after it. A note's unpin_at is compared with its created_at,
	// never with now.
	Now func() time.Time
}

// detailFailed is the top-level detail of a refused payload (spec E3).
const detailFailed = "Could not validate account data."

// Failed returns the refusal of a payload with the problems in errs, or nil
// when errs is empty: the same top-level code and detail as validation, for
// problems found later, such as a document that the store does not hold.
func Failed(errs problem.List) *problem.Error {
	return errs.Err(CodeFailedValidation, detailFailed)
}

// Validate parses body (raw request bytes) and checks every rule. On
// success it returns the normalised Account, with Supplier set. On failure
// it returns a *problem.Error of Kind Invalid: code "parse_error" for
// malformed JSON (detail names the byte offset) or a body that is not a
// JSON object, without field problems; otherwise code
// "account_failed_validation" with one problem.FieldError per problem, each
// at its own dot path. A failing catalogue (database down, context
// cancelled) comes back as a plain error wrapping the cause.
//
// Validate queries the catalogue once per payload when it is a
// BatchCatalog, and at most three times otherwise, and once more for a
// ledger whose transactions name products (ProductCatalog).
func (v Validator) Validate(ctx context.Context, body []byte) (*Account, error) {
	acc, _, err := v.ValidateSubject(ctx, body)
	return acc, err
}

// Subject names the account a payload is about, as far as validation can
// tell even when it refuses the payload: the supplier's id when the
// catalogue found the supplier (among those the Validator's Catalog may
// see), and the external account number when it had no problem of its
// own. A field that validation cannot trust is zero.
type Subject struct {
	SupplierID            int64
	ExternalAccountNumber string
}

// Known reports whether both the supplier and the account number are known.
func (s Subject) Known() bool { return s.SupplierID != 0 && s.ExternalAccountNumber != "" }

// ValidateSubject is Validate, and also returns the payload's Subject,
// refused or not (zero for a body that does not parse), so that a caller
// can say which account a refusal was about.
func (v Validator) ValidateSubject(ctx context.Context, body []byte) (*Account, Subject, error) {
	if v.Catalog == nil {
		return nil, Subject{}, errors.New("account: Validator has no Catalog")
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	c := checker{now: now().UTC()}
	// A request whose client hung up stops between the phases of its
	// validation (parse, bind, look up, check), so that the work that goes
	// on after it is one phase's, each linear in a bounded body.
	if _, err := accountSchema.Decode(ctx, body, &c.w, &c.a); err != nil {
		if p, ok := problem.As(err); ok {
			return nil, Subject{}, p // a body that is not a JSON object
		}
		validate.NoteSubject(ctx, c.a.ImportSupplier, c.a.ExternalAccountNumber)
		return nil, Subject{}, fmt.Errorf("validate account: %w", err)
	}
	validate.NoteSubject(ctx, c.a.ImportSupplier, c.a.ExternalAccountNumber)

	if err := c.lookup(ctx, v.Catalog); err != nil {
		return nil, Subject{}, fmt.Errorf("validate account: %w", err)
	}
	if err := c.lookupProducts(ctx, v.Catalog); err != nil {
		return nil, Subject{}, fmt.Errorf("validate account: %w", err)
	}
	if v.SupplyTypes != nil {
		if err := c.checkSupplyTypes(ctx, v.SupplyTypes); err != nil {
			return nil, Subject{}, fmt.Errorf("validate account: %w", err)
		}
	}
	if err := validate.Checkpoint(ctx, validate.LookedUp); err != nil {
		return nil, Subject{}, fmt.Errorf("validate account: %w", err)
	}
	c.checkCustomers()
	c.checkBillingAddress()
	c.checkSupplyAddresses()
	c.checkMetadata()
	note.Check(&c.w, "notes", c.a.Notes)
	postimport.CheckStatements(&c.w, "statements", c.a.Statements, c.today())
	c.checkLedgers()
	c.checkBusiness()
	if len(c.w.Errors) > 0 {
		return nil, c.subject(), c.w.Errors.Err(CodeFailedValidation, detailFailed)
	}

	// Sorting waits until every rule has run, because problems name
	// agreements by their index in the input.
	for i := range c.a.SupplyAddresses {
		for j := range c.a.SupplyAddresses[i].SupplyPoints {
			slices.SortStableFunc(c.a.SupplyAddresses[i].SupplyPoints[j].Agreements, func(x, y Agreement) int {
				return cmp.Compare(x.EffectiveFrom, y.EffectiveFrom)
			})
		}
	}
	c.a.Supplier = c.supplier
	return &c.a, c.subject(), nil
}

// subject is the Subject of the payload checked.
func (c *checker) subject() Subject {
	s := Subject{ExternalAccountNumber: c.a.ExternalAccountNumber}
	if c.supplierFound {
		s.SupplierID = c.supplier.ID
	}
	return s
}

// checker runs the rules that the schema cannot express, on the Account as
// far as the schema could bind it. A field that had a problem of its own is
// left at its zero value, so every rule here skips zero values rather than
// piling a second problem onto the first.
type checker struct {
	w   validate.Walker
	a   Account
	now time.Time

	supplier      Supplier
	supplierFound bool
	// country is the supplier's country, or "" when the supplier is unknown.
	country        string
	missingTariffs map[string]bool
	contractExists bool
	// phones holds the answer for each phone number text checked so far in
	// this payload, so that a number sent twice (a customer's mobile again
	// as an alternative number, a landline shared by two customers) is
	// parsed and checked once. It lives as long as the payload's check:
	// answers are never kept across payloads.
	phones map[string]phoneAnswer

	// missingProducts are the product codes of the ledger's transactions
	// that the catalogue does not have.
	missingProducts []string
}

// phoneAnswer is normalisePhone's answer for one text.
type phoneAnswer struct {
	normalised string
	result     phoneResult
}

// lookup asks the catalogue everything the payload needs at once.
func (c *checker) lookup(ctx context.Context, cat Catalog) error {
	code := c.a.ImportSupplier
	var tariffs []string
	seen := map[string]bool{}
	for _, sa := range c.a.SupplyAddresses {
		for _, sp := range sa.SupplyPoints {
			for _, ag := range sp.Agreements {
				if ag.TariffCode != "" && !seen[ag.TariffCode] {
					seen[ag.TariffCode] = true
					tariffs = append(tariffs, ag.TariffCode)
				}
			}
		}
	}
	var contract string
	if c.a.Business != nil {
		contract = c.a.Business.BusinessContractIdentifier
	}

	if bc, ok := cat.(BatchCatalog); ok {
		if code == "" && len(tariffs) == 0 {
			return nil
		}
		l, err := bc.Lookup(ctx, code, tariffs, contract)
		if err != nil {
			return err
		}
		c.supplier, c.supplierFound = l.Supplier, l.SupplierFound
		c.contractExists = l.ContractExists
		c.setMissing(l.MissingTariffs)
	} else {
		var err error
		if code != "" {
			if c.supplier, c.supplierFound, err = cat.Supplier(ctx, code); err != nil {
				return err
			}
		}
		if len(tariffs) > 0 {
			missing, err := cat.MissingTariffs(ctx, tariffs)
			if err != nil {
				return err
			}
			c.setMissing(missing)
		}
		if c.supplierFound && contract != "" {
			if c.contractExists, err = cat.ContractExists(ctx, c.supplier.ID, contract); err != nil {
				return err
			}
		}
	}

	if code != "" && !c.supplierFound {
		c.w.AddAt("import_supplier", CodeSupplierNotFound, "Import supplier %q not found.", code)
	}
	if c.supplierFound {
		c.country = c.supplier.Country
	}
	return nil
}

func (c *checker) setMissing(codes []string) {
	for _, t := range codes {
		if c.missingTariffs == nil {
			c.missingTariffs = map[string]bool{}
		}
		c.missingTariffs[t] = true
	}
}

func (c *checker) checkCustomers() {
	a := &c.a
	if a.UnknownOccupier != nil && *a.UnknownOccupier && len(a.Customers) > 0 {
		c.w.AddAt("customers", CodeCustomerWithUnknown,
			"An account with an unknown occupier has no customers; omit customers or set unknown_occupier to false.")
	}
	for i := range a.Customers {
		cu := &a.Customers[i]
		if cu.Email != nil && *cu.Email != "" {
			e, code := normaliseEmail(*cu.Email)
			switch code {
			case "":
				*cu.Email = e
			case CodeInvalidEmail:
				c.w.AddAt(validate.Attr("customers", i, "email"), code, "Enter a valid email address.")
			default:
				c.w.AddAt(validate.Attr("customers", i, "email"), code,
					"%s looks like a test address; send the customer's real address or omit the field.", *cu.Email)
			}
		}
		if cu.Mobile != nil && *cu.Mobile != "" {
			c.phone(cu.Mobile, "customers", i, "mobile")
		}
		if cu.Landline != nil && *cu.Landline != "" {
			c.phone(cu.Landline, "customers", i, "landline")
		}
		for j := range cu.AlternativePhoneNumbers {
			if p := &cu.AlternativePhoneNumbers[j].PhoneNumber; *p != "" {
				c.phone(p, "customers", i, "alternative_phone_numbers", j, "phone_number")
			}
		}
	}
}

// phone checks and normalises *p in place; attr gives its path.
func (c *checker) phone(p *string, attr ...any) {
	ans, ok := c.phones[*p]
	if !ok {
		ans.normalised, ans.result = normalisePhone(*p, c.country)
		if c.phones == nil {
			c.phones = make(map[string]phoneAnswer, 4)
		}
		c.phones[*p] = ans
	}
	switch ans.result {
	case phoneValid:
		*p = ans.normalised
	case phoneInvalid:
		c.w.AddAt(validate.Attr(attr...), CodeInvalidPhoneNumber, "%s is not a valid phone number", *p)
	}
}

func (c *checker) checkBillingAddress() {
	b := c.a.BillingAddress
	if b == nil || b.Country == "" {
		return
	}
	country, ok := normaliseCountry(b.Country)
	if !ok {
		c.w.AddAt("billing_address.country", CodeInvalidCountry, "%q is not an ISO 3166-1 alpha-2 country code.", b.Country)
		return
	}
	b.Country = country
	if b.PostalCode != nil && *b.PostalCode != "" {
		if pc, ok := normalisePostcode(*b.PostalCode, country); ok {
			*b.PostalCode = pc
		} else {
			c.w.AddAt("billing_address.postal_code", CodeInvalidPostcode, "%q is not a valid postcode in %s.", *b.PostalCode, country)
		}
	}
}

func (c *checker) checkSupplyAddresses() {
	if u := c.a.UnknownOccupier; u != nil && *u && len(c.a.SupplyAddresses) > 1 {
		c.w.AddAt("supply_addresses", CodeOccupierManyAddresses,
			"An account with an unknown occupier has at most one supply address; this one has %d.", len(c.a.SupplyAddresses))
	}
	var identifiers map[string]bool // across the account
	for i := range c.a.SupplyAddresses {
		sa := &c.a.SupplyAddresses[i]
		if sa.SupplyPostcode != "" && c.country != "" {
			if pc, ok := normalisePostcode(sa.SupplyPostcode, c.country); ok {
				sa.SupplyPostcode = pc
			} else {
				c.w.AddAt(validate.Attr("supply_addresses", i, "supply_postcode"), CodeInvalidPostcode,
					"%q is not a valid postcode in %s.", sa.SupplyPostcode, c.country)
			}
		}
		for j := range sa.SupplyPoints {
			sp := &sa.SupplyPoints[j]
			c.checkSupplyPoint(sp, i, j)
			if id := sp.Identifier; id != nil && sp.SupplyType == SupplyElectricity {
				if identifiers[*id] {
					c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "identifier"), CodeDuplicateSupplyIdentifier,
						"Supply point identifier %q appears more than once in the account.", *id)
				}
				identifiers = setAdd(identifiers, *id)
			}
			// A serial names one meter of a supply point; the same meter may
			// serve two supply points (an import and an export MPAN).
			for _, m := range validate.Repeats(sp.Meters, func(x *Meter) string { return x.SerialNumber }) {
				c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "meters", m, "serial_number"), CodeDuplicateMeterSerial,
					"Meter serial number %q appears more than once in this supply point.", sp.Meters[m].SerialNumber)
			}
		}
	}
}

// checkSupplyTypes refuses every supply point whose supply_type is not in
// the catalogue, asking about all of the payload's types at once.
func (c *checker) checkSupplyTypes(ctx context.Context, cat SupplyTypeCatalog) error {
	var types []string
	for _, sa := range c.a.SupplyAddresses {
		for _, sp := range sa.SupplyPoints {
			if sp.SupplyType != "" && !slices.Contains(types, sp.SupplyType) {
				types = append(types, sp.SupplyType)
			}
		}
	}
	if len(types) == 0 {
		return nil
	}
	unknown, err := cat.UnknownSupplyTypes(ctx, types)
	if err != nil || len(unknown) == 0 {
		return err
	}
	for i, sa := range c.a.SupplyAddresses {
		for j, sp := range sa.SupplyPoints {
			if slices.Contains(unknown, sp.SupplyType) {
				c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "supply_type"), CodeSupplyTypeNotRecognised,
					"Supply type %q is not recognised; the service operator adds supply types with importctl supply-type add.", sp.SupplyType)
			}
		}
	}
	return nil
}

func setAdd(m map[string]bool, k string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[k] = true
	return m
}

func (c *checker) checkSupplyPoint(sp *SupplyPoint, i, j int) {
	start := sp.SupplyStartDate
	if today := c.today(); start != "" && start > today {
		c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "supply_start_date"), CodeFutureSupplyStartDate,
			"The supply starts on %s, after today (%s in the supplier's time zone).", start, today)
	}
	c.checkAgreementCover(sp, i, j)
	for k, ag := range sp.Agreements {
		if ag.EffectiveFrom != "" && start != "" && ag.EffectiveFrom < start {
			c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "agreements", k, "effective_from"), CodeAgreementBeforeSupply,
				"The agreement starts (%s) before the supply does (%s).", ag.EffectiveFrom, start)
		}
		if c.missingTariffs[ag.TariffCode] {
			c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "agreements", k, "tariff_code"), CodeTariffNotFound,
				"Tariff %q not found.", ag.TariffCode)
		}
	}
	for _, k := range validate.Repeats(sp.Agreements, func(x *Agreement) string { return string(x.EffectiveFrom) }) {
		c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "agreements", k, "effective_from"), CodeAgreementOverlap,
			"Another agreement of this supply point also starts on %s; agreements must follow each other without overlap.", sp.Agreements[k].EffectiveFrom)
	}
	for r, tr := range sp.TransferReadings {
		if tr.Value == "" {
			continue
		}
		if !validReading(tr.Value) {
			c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "transfer_readings", r, "value"), validate.CodeInvalid,
				"A reading is a decimal number in a string, such as \"12345.6\": at most 10 digits before the point and 10 after it.")
		}
	}
}

// checkAgreementCover refuses a supply point without agreements (every
// supply point is billable, docs/decisions.md) and one billed up to a day
// before its first agreement starts. Agreements run from their
// effective_from until the next one starts, the latest without end, so the
// earliest effective_from is the only one that can leave a billed day
// uncovered. A supply point whose agreements had a problem of their own is
// not looked at again.
func (c *checker) checkAgreementCover(sp *SupplyPoint, i, j int) {
	at := validate.Attr("supply_addresses", i, "supply_points", j, "agreements")
	if len(sp.Agreements) == 0 {
		if !c.w.HasErrorAt(at) { // agreements that are not an array
			c.w.AddAt(at, CodeMeterPointWithNoAgreement,
				"This supply point has no agreement; every supply point is billed on a tariff from its first agreement.")
		}
		return
	}
	billed := sp.LastBilledToDate
	if billed == nil || *billed == "" {
		return
	}
	first := sp.Agreements[0].EffectiveFrom
	for _, ag := range sp.Agreements {
		if ag.EffectiveFrom == "" {
			return
		}
		first = min(first, ag.EffectiveFrom)
	}
	if first > *billed {
		c.w.AddAt(validate.Attr("supply_addresses", i, "supply_points", j, "last_billed_to_date"), CodeNoAgreementCoversBilled,
			"No agreement covers the last billed day %s: the first agreement starts on %s.", *billed, first)
	}
}

func (c *checker) checkMetadata() {
	for _, i := range validate.Repeats(c.a.Metadata, func(m *Metadata) string { return m.Key }) {
		c.w.AddAt(validate.Attr("metadata", i, "key"), CodeMetadataDuplicateKeys, "Metadata key %q appears more than once.", c.a.Metadata[i].Key)
	}
}

func (c *checker) checkBusiness() {
	b := c.a.Business
	if b == nil || b.BusinessContractIdentifier == "" || !c.supplierFound || c.contractExists {
		return
	}
	c.w.AddAt("business.business_contract_identifier", CodeContractNotFound,
		"No business contract %q exists for import supplier %s; create the business (E1) first.", b.BusinessContractIdentifier, c.supplier.Code)
}

// today is the date of now in the supplier's time zone, in which the rules
// that compare a date with today date it.
func (c *checker) today() validate.Date { return validate.DateIn(c.now, c.supplier.TimeZone) }
