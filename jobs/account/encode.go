package account

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// AppendJSON appends the normalised payload to b: exactly the bytes that a
// json.Encoder with SetEscapeHTML(false) writes for a, without the newline
// it ends with. It fails where that encoder fails (a set Decimal without a
// literal, which validation never builds).
//
// It exists because E3 answers the whole normalised payload, and
// encoding/json spent more on it than the rest of the answer: it reflects
// over every field, and SupplyPoint's MarshalJSON (which writes Other beside
// the common fields) encodes each supply point on its own, after which the
// outer encoder scans that output again to compact it. Written field by
// field, the same bytes cost a fraction. TestAppendJSON holds the two
// encodings together for every field of every type here, so a field added
// to a struct without a line below fails the build's tests.
func (a *Account) AppendJSON(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.account(a)
	return e.b, e.err
}

// encoder appends JSON to b; err is the first failure. html is set while
// a supply point is written: SupplyPoint.MarshalJSON encodes with
// json.Marshal, which escapes <, > and & (and U+2028, U+2029) as \u003c,
// \u003e, \u0026 (\u2028, \u2029), and the outer encoder keeps those
// escapes, so the supply points of the answer have them and the rest of it
// does not.
type encoder struct {
	b    []byte
	err  error
	html bool
}

// object writes the members of one JSON object: each key call writes the
// separator and the key, the caller then writes the value.
type object struct {
	e     *encoder
	empty bool
}

func (e *encoder) open() object { e.b = append(e.b, '{'); return object{e: e, empty: true} }

func (o *object) close() { o.e.b = append(o.e.b, '}') }

// key starts the member name, which must need no escaping (every field name
// of the payload is lower-case ASCII letters, digits and underscores).
func (o *object) key(name string) *encoder {
	if !o.empty {
		o.e.b = append(o.e.b, ',')
	}
	o.empty = false
	o.e.b = append(o.e.b, '"')
	o.e.b = append(o.e.b, name...)
	o.e.b = append(o.e.b, '"', ':')
	return o.e
}

func (o *object) str(name, s string) { o.key(name).str(s) }

func (o *object) strPtr(name string, s *string) {
	if s != nil {
		o.key(name).str(*s)
	}
}

func (o *object) datePtr(name string, d *validate.Date) {
	if d != nil {
		o.key(name).str(string(*d))
	}
}

func (o *object) datetimePtr(name string, d *validate.Datetime) {
	if d != nil {
		o.key(name).str(string(*d))
	}
}

func (o *object) intPtr(name string, n *int64) {
	if n != nil {
		e := o.key(name)
		e.b = strconv.AppendInt(e.b, *n, 10)
	}
}

func (o *object) boolPtr(name string, v *bool) {
	if v != nil {
		e := o.key(name)
		e.b = strconv.AppendBool(e.b, *v)
	}
}

func (o *object) decimalPtr(name string, d *validate.Decimal) {
	if d != nil {
		o.key(name).decimal(*d)
	}
}

// errZeroDecimal is what Decimal.MarshalJSON refuses.
var errZeroDecimal = errors.New("decimal: marshal of zero Decimal")

func (e *encoder) decimal(d validate.Decimal) {
	s := d.String()
	if s == "" {
		if e.err == nil {
			e.err = errZeroDecimal
		}
		s = "null"
	}
	e.b = append(e.b, s...)
}

// raw writes a json.RawMessage as encoding/json does: compacted (and
// HTML-escaped in a supply point), and null when nil.
func (e *encoder) raw(m json.RawMessage) {
	if m == nil {
		e.b = append(e.b, "null"...)
		return
	}
	buf := bytes.NewBuffer(e.b)
	if !e.html {
		if err := json.Compact(buf, m); err != nil && e.err == nil {
			e.err = err
		}
		e.b = buf.Bytes()
		return
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, m); err != nil && e.err == nil {
		e.err = err
	}
	json.HTMLEscape(buf, compact.Bytes())
	e.b = buf.Bytes()
}

// list writes a slice as encoding/json does (a nil slice is never passed:
// every slice field is omitzero), each element by item.
func list[T any](e *encoder, s []T, item func(*encoder, *T)) {
	e.b = append(e.b, '[')
	for i := range s {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		item(e, &s[i])
	}
	e.b = append(e.b, ']')
}

// listField writes an omitzero slice field: nothing when s is nil, [] when
// it is empty.
func listField[T any](o *object, name string, s []T, item func(*encoder, *T)) {
	if s != nil {
		list(o.key(name), s, item)
	}
}

func (e *encoder) account(a *Account) {
	o := e.open()
	o.str("import_supplier", a.ImportSupplier)
	o.str("external_account_number", a.ExternalAccountNumber)
	if a.BillingAddress != nil {
		o.key("billing_address").billingAddress(a.BillingAddress)
	}
	listField(&o, "metadata", a.Metadata, (*encoder).metadata)
	listField(&o, "customers", a.Customers, (*encoder).customer)
	listField(&o, "supply_addresses", a.SupplyAddresses, (*encoder).supplyAddress)
	listField(&o, "ledgers", a.Ledgers, (*encoder).ledger)
	listField(&o, "statements", a.Statements, (*encoder).statement)
	listField(&o, "notes", a.Notes, (*encoder).note)
	o.boolPtr("unknown_occupier", a.UnknownOccupier)
	if a.Business != nil {
		b := o.key("business").open()
		b.str("business_contract_identifier", a.Business.BusinessContractIdentifier)
		b.close()
	}
	o.close()
}

func (e *encoder) billingAddress(b *BillingAddress) {
	o := e.open()
	o.strPtr("street_address", b.StreetAddress)
	o.strPtr("locality", b.Locality)
	o.strPtr("administrative_area", b.AdministrativeArea)
	o.str("country", b.Country)
	o.strPtr("postal_code", b.PostalCode)
	o.close()
}

func (e *encoder) metadata(m *Metadata) {
	o := e.open()
	o.str("key", m.Key)
	o.key("value").raw(m.Value)
	o.close()
}

func (e *encoder) customer(c *Customer) {
	o := e.open()
	o.strPtr("given_name", c.GivenName)
	o.strPtr("family_name", c.FamilyName)
	o.strPtr("email", c.Email)
	o.strPtr("mobile", c.Mobile)
	o.strPtr("landline", c.Landline)
	listField(&o, "alternative_phone_numbers", c.AlternativePhoneNumbers, func(e *encoder, p *AlternativePhoneNumber) {
		a := e.open()
		a.str("phone_number", p.PhoneNumber)
		a.close()
	})
	o.datePtr("date_of_birth", c.DateOfBirth)
	if p := c.CustomerPreferences; p != nil {
		po := o.key("customer_preferences").open()
		po.boolPtr("opted_into_updates", p.OptedIntoUpdates)
		po.boolPtr("opted_into_offers", p.OptedIntoOffers)
		po.boolPtr("opted_into_sms", p.OptedIntoSMS)
		po.close()
	}
	listField(&o, "user_details", c.UserDetails, func(e *encoder, d *UserDetail) {
		u := e.open()
		u.str("namespace", d.Namespace)
		u.str("value", d.Value)
		u.close()
	})
	o.close()
}

func (e *encoder) supplyAddress(a *SupplyAddress) {
	o := e.open()
	o.str("supply_address1", a.SupplyAddress1)
	o.strPtr("supply_address2", a.SupplyAddress2)
	o.strPtr("supply_address3", a.SupplyAddress3)
	o.strPtr("supply_address4", a.SupplyAddress4)
	o.str("supply_postcode", a.SupplyPostcode)
	o.str("customer_at_supply_address_from_date", string(a.CustomerAtSupplyAddressFromDate))
	listField(&o, "supply_points", a.SupplyPoints, (*encoder).supplyPoint)
	o.close()
}

// supplyPoint writes what SupplyPoint.MarshalJSON writes: the fields, then
// the members of Other in the order of their keys.
func (e *encoder) supplyPoint(p *SupplyPoint) {
	e.html = true
	o := e.open()
	o.str("supply_type", p.SupplyType)
	o.str("supply_start_date", string(p.SupplyStartDate))
	o.datePtr("last_billed_to_date", p.LastBilledToDate)
	listField(&o, "agreements", p.Agreements, func(e *encoder, a *Agreement) {
		ao := e.open()
		ao.str("tariff_code", a.TariffCode)
		ao.str("effective_from", string(a.EffectiveFrom))
		ao.close()
	})
	o.strPtr("identifier", p.Identifier)
	o.datePtr("initial_connection_date", p.InitialConnectionDate)
	o.strPtr("book_number", p.BookNumber)
	o.intPtr("call_number", p.CallNumber)
	o.strPtr("energization_status", p.EnergizationStatus)
	listField(&o, "meters", p.Meters, (*encoder).meter)
	listField(&o, "transfer_readings", p.TransferReadings, func(e *encoder, r *TransferReading) {
		ro := e.open()
		ro.str("register_type", r.RegisterType)
		ro.str("read_date", string(r.ReadDate))
		ro.str("value", r.Value)
		ro.close()
	})
	o.strPtr("location_description", p.LocationDescription)
	o.strPtr("serial_number_internal", p.SerialNumberInternal)
	o.strPtr("serial_number_external", p.SerialNumberExternal)
	o.strPtr("make_model", p.MakeModel)
	o.intPtr("size", p.Size)
	o.strPtr("product_note", p.ProductNote)
	o.strPtr("serial_number", p.SerialNumber)
	o.strPtr("secondary_serial_number", p.SecondarySerialNumber)
	o.strPtr("manufacturer_name", p.ManufacturerName)
	o.strPtr("model_name", p.ModelName)
	o.strPtr("location", p.Location)
	o.datePtr("installed_at", p.InstalledAt)
	o.strPtr("tank_size", p.TankSize)
	o.strPtr("tank_type", p.TankType)
	o.strPtr("tank_configuration", p.TankConfiguration)
	if len(p.Other) > 0 {
		keys := make([]string, 0, len(p.Other))
		for k := range p.Other {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			o.empty = false
			e.b = append(e.b, ',')
			e.str(k)
			e.b = append(e.b, ':')
			e.raw(p.Other[k])
		}
	}
	o.close()
	e.html = false
}

func (e *encoder) meter(m *Meter) {
	o := e.open()
	o.str("serial_number", m.SerialNumber)
	o.intPtr("subgroup", m.Subgroup)
	o.datePtr("seal_date", m.SealDate)
	o.intPtr("meter_number", m.MeterNumber)
	o.strPtr("status", m.Status)
	o.datePtr("active_from", m.ActiveFrom)
	if t := m.MeterType; t != nil {
		to := o.key("meter_type").open()
		to.strPtr("manufacturer", t.Manufacturer)
		to.strPtr("model", t.Model)
		to.decimalPtr("amps_low", t.AmpsLow)
		to.decimalPtr("amps_high", t.AmpsHigh)
		to.decimalPtr("volts_low", t.VoltsLow)
		to.decimalPtr("volts_high", t.VoltsHigh)
		to.strPtr("phase", t.Phase)
		to.decimalPtr("elements", t.Elements)
		to.strPtr("stock_code", t.StockCode)
		to.boolPtr("is_bidirectional", t.IsBidirectional)
		to.boolPtr("is_analog", t.IsAnalog)
		to.strPtr("cover_material", t.CoverMaterial)
		to.intPtr("wire_ports", t.WirePorts)
		to.boolPtr("network_connectivity", t.NetworkConnectivity)
		to.strPtr("base", t.Base)
		to.close()
	}
	listField(&o, "registers", m.Registers, func(e *encoder, r *Register) {
		ro := e.open()
		ro.str("register_type", r.RegisterType)
		ro.intPtr("whole_digits", r.WholeDigits)
		ro.intPtr("decimal_digits", r.DecimalDigits)
		ro.datePtr("active_from", r.ActiveFrom)
		ro.decimalPtr("multiplier", r.Multiplier)
		ro.close()
	})
	o.close()
}

func (e *encoder) statement(s *postimport.Statement) {
	o := e.open()
	o.str("statement_id", s.StatementID)
	o.strPtr("number", s.Number)
	o.str("bill_period_from_date", string(s.BillPeriodFromDate))
	o.str("bill_period_to_date", string(s.BillPeriodToDate))
	o.datePtr("issued_date", s.IssuedDate)
	o.intPtr("gross_amount", s.GrossAmount)
	o.strPtr("statement_path", s.StatementPath)
	o.close()
}

func (e *encoder) note(n *note.Note) {
	o := e.open()
	o.strPtr("body", n.Body)
	listField(&o, "document_paths", n.DocumentPaths, func(e *encoder, d *note.DocumentPath) {
		do := e.open()
		do.str("document_path", d.DocumentPath)
		do.close()
	})
	o.datetimePtr("created_at", n.CreatedAt)
	o.boolPtr("is_pinned", n.IsPinned)
	o.datetimePtr("unpin_at", n.UnpinAt)
	o.close()
}

// str writes s as a JSON string the way encoding/json does: ", \ and
// control characters escaped (\b, \f, \n, \r, \t by name, the others as
// \u00XX), invalid UTF-8 as \ufffd, U+2028 and U+2029 as \u2028 and
// \u2029, and with e.html also <, > and & as \u003c, \u003e and \u0026.
func (e *encoder) str(s string) {
	const hex = "0123456789abcdef"
	b := append(e.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && !(e.html && (c == '<' || c == '>' || c == '&')) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	e.b = append(b, '"')
}
