package account

import (
	"encoding/json"
	"fmt"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// String length limits. Where the reference gives a maxLength
// (external_account_number 128, names 255, address parts and postcodes 512,
// e-mail 254, phone numbers 32) it is used; the others are generous bounds
// that keep one payload from carrying megabytes in a single field.
const (
	maxCode       = 128  // identifiers, codes, serial numbers
	maxShortText  = 255  // names, makes and models (reference 6.3: names ≤255)
	maxAddress    = 512  // address lines and parts, postcodes (reference 6.2: ≤512)
	maxLongText   = 2000 // descriptions, product notes, street addresses
	maxPhone      = 32
	maxEmail      = 254 // RFC 5321 path limit
	maxReading    = 22  // the longest value of the reference's reading pattern: "-", 10 digits, ".", 10 digits
	maxAccountRef = 128 // the reference API's maxLength of external_account_number
)

// Blank strings: a required field must have content (the reference's
// `blank`, which it lists with its required meter_serial_number), and so
// must an open code ("" is no code). Every other string accepts "", because
// migrated records often have empty columns and no source refuses one:
// free text (names, address lines, descriptions), formatted fields whose
// reference default is "" (mobile, landline, e-mail, postal_code; reference
// 6.2 and 6.3), and the optional identifiers of spec 2.2.4 (book_number,
// stock_code, the serial numbers of a heat pump, light, pole or water
// heater, and secondary_serial_number, which the spec types "string or
// null"); docs/decisions.md argues each. Mobile and landline, nullable in
// the reference, accept null.

var alternativePhoneSchema = v.NewObject(
	v.Req("phone_number", v.StringValue, func(p *AlternativePhoneNumber) *string { return &p.PhoneNumber },
		v.MaxLength(maxPhone), v.Codes(CodeInvalidPhoneNumber)),
)

var preferencesSchema = v.NewObject(
	v.Opt("opted_into_updates", v.BooleanValue, func(p *CustomerPreferences) **bool { return &p.OptedIntoUpdates }),
	v.Opt("opted_into_offers", v.BooleanValue, func(p *CustomerPreferences) **bool { return &p.OptedIntoOffers }),
	v.Opt("opted_into_sms", v.BooleanValue, func(p *CustomerPreferences) **bool { return &p.OptedIntoSMS }),
)

// userDetailSchema is the reference's element shape (section 6.3):
// {namespace, value}, both strings in its examples.
var userDetailSchema = v.NewObject(
	v.Req("namespace", v.StringValue, func(d *UserDetail) *string { return &d.Namespace }, v.MaxLength(maxShortText)),
	v.Req("value", v.StringValue, func(d *UserDetail) *string { return &d.Value }, v.MaxLength(maxLongText), v.AllowBlank()),
)

var customerSchema = v.NewObject(
	v.Opt("given_name", v.StringValue, func(c *Customer) **string { return &c.GivenName }, v.MaxLength(maxShortText), v.AllowBlank()),
	v.Opt("family_name", v.StringValue, func(c *Customer) **string { return &c.FamilyName }, v.MaxLength(maxShortText), v.AllowBlank()),
	v.Opt("email", v.StringValue, func(c *Customer) **string { return &c.Email }, v.MaxLength(maxEmail), v.AllowBlank(),
		v.Codes(CodeInvalidEmail, CodeTestEmail), v.Note("The domain is lower-cased.")),
	v.Opt("mobile", v.StringValue, func(c *Customer) **string { return &c.Mobile }, v.MaxLength(maxPhone), v.AllowBlank(), v.Nullable(),
		v.Codes(CodeInvalidPhoneNumber), v.Note("Any valid phone number; national numbers are read in the supplier's country; normalised to E.164.")),
	v.Opt("landline", v.StringValue, func(c *Customer) **string { return &c.Landline }, v.MaxLength(maxPhone), v.AllowBlank(), v.Nullable(),
		v.Codes(CodeInvalidPhoneNumber), v.Note("Any valid phone number; national numbers are read in the supplier's country; normalised to E.164.")),
	v.List("alternative_phone_numbers", alternativePhoneSchema, func(c *Customer) *[]AlternativePhoneNumber { return &c.AlternativePhoneNumbers }),
	v.Opt("date_of_birth", v.DateValue, func(c *Customer) **v.Date { return &c.DateOfBirth }),
	v.Obj("customer_preferences", preferencesSchema, func(c *Customer) **CustomerPreferences { return &c.CustomerPreferences }),
	v.List("user_details", userDetailSchema, func(c *Customer) *[]UserDetail { return &c.UserDetails }),
)

var billingAddressSchema = v.NewObject(
	v.Opt("street_address", v.StringValue, func(b *BillingAddress) **string { return &b.StreetAddress }, v.MaxLength(maxLongText), v.AllowBlank(),
		v.Note("May contain line breaks.")),
	v.Opt("locality", v.StringValue, func(b *BillingAddress) **string { return &b.Locality }, v.MaxLength(maxAddress), v.AllowBlank()),
	v.Opt("administrative_area", v.StringValue, func(b *BillingAddress) **string { return &b.AdministrativeArea }, v.MaxLength(maxAddress), v.AllowBlank()),
	v.Req("country", v.StringValue, func(b *BillingAddress) *string { return &b.Country }, v.Codes(CodeInvalidCountry),
		v.Note("ISO 3166-1 alpha-2; upper-cased.")),
	v.Opt("postal_code", v.StringValue, func(b *BillingAddress) **string { return &b.PostalCode }, v.MaxLength(maxAddress), v.AllowBlank(),
		v.Codes(CodeInvalidPostcode), v.Note("Checked against the billing country.")),
)

var metadataSchema = v.NewObject(
	v.Req("key", v.StringValue, func(m *Metadata) *string { return &m.Key }, v.MaxLength(maxShortText), v.Codes(CodeMetadataDuplicateKeys)),
	v.JSONObject("value", func(m *Metadata) *json.RawMessage { return &m.Value }, v.Required(),
		v.Note("Any JSON object; kept as compact JSON.")),
)

var agreementSchema = v.NewObject(
	v.Req("tariff_code", v.StringValue, func(a *Agreement) *string { return &a.TariffCode }, v.MaxLength(maxCode), v.Codes(CodeTariffNotFound)),
	v.Req("effective_from", v.DateValue, func(a *Agreement) *v.Date { return &a.EffectiveFrom },
		v.Codes(CodeAgreementBeforeSupply, CodeAgreementOverlap), v.Note("Inclusive; the agreement runs until the next one starts.")),
)

var registerSchema = v.NewObject(
	v.Req("register_type", v.StringValue, func(r *Register) *string { return &r.RegisterType }, v.OpenCode(),
		v.Note("Required: readings are recorded per register type. A meter may have several registers of one type (a day/night meter has two KWH_IMPORT), kept in their order: spec 2.2.5 gives registers no id, and the reference's meter_with_duplicate_register_ids is about register ids.")),
	v.Opt("whole_digits", v.IntegerValue, func(r *Register) **int64 { return &r.WholeDigits }),
	v.Opt("decimal_digits", v.IntegerValue, func(r *Register) **int64 { return &r.DecimalDigits }),
	v.Opt("active_from", v.DateValue, func(r *Register) **v.Date { return &r.ActiveFrom }),
	v.Opt("multiplier", v.DecimalValue, func(r *Register) **v.Decimal { return &r.Multiplier }),
)

var meterTypeSchema = v.NewObject(
	v.Opt("manufacturer", v.StringValue, func(m *MeterType) **string { return &m.Manufacturer }, v.MaxLength(maxShortText), v.AllowBlank()),
	v.Opt("model", v.StringValue, func(m *MeterType) **string { return &m.Model }, v.MaxLength(maxShortText), v.AllowBlank()),
	v.Opt("amps_low", v.DecimalValue, func(m *MeterType) **v.Decimal { return &m.AmpsLow }),
	v.Opt("amps_high", v.DecimalValue, func(m *MeterType) **v.Decimal { return &m.AmpsHigh }),
	v.Opt("volts_low", v.DecimalValue, func(m *MeterType) **v.Decimal { return &m.VoltsLow }),
	v.Opt("volts_high", v.DecimalValue, func(m *MeterType) **v.Decimal { return &m.VoltsHigh }),
	v.Opt("phase", v.StringValue, func(m *MeterType) **string { return &m.Phase }, v.OpenCode()),
	v.Opt("elements", v.DecimalValue, func(m *MeterType) **v.Decimal { return &m.Elements }),
	v.Opt("stock_code", v.StringValue, func(m *MeterType) **string { return &m.StockCode }, v.MaxLength(maxCode), v.AllowBlank()),
	v.Opt("is_bidirectional", v.BooleanValue, func(m *MeterType) **bool { return &m.IsBidirectional }),
	v.Opt("is_analog", v.BooleanValue, func(m *MeterType) **bool { return &m.IsAnalog }),
	v.Opt("cover_material", v.StringValue, func(m *MeterType) **string { return &m.CoverMaterial }, v.OpenCode()),
	v.Opt("wire_ports", v.IntegerValue, func(m *MeterType) **int64 { return &m.WirePorts }),
	v.Opt("network_connectivity", v.BooleanValue, func(m *MeterType) **bool { return &m.NetworkConnectivity }),
	v.Opt("base", v.StringValue, func(m *MeterType) **string { return &m.Base }, v.OpenCode()),
)

var meterSchema = v.NewObject(
	v.Req("serial_number", v.StringValue, func(m *Meter) *string { return &m.SerialNumber }, v.MaxLength(maxCode),
		v.Codes(CodeDuplicateMeterSerial), v.Note("Required: readings and industry flows identify a meter by its serial number.")),
	v.Opt("subgroup", v.IntegerValue, func(m *Meter) **int64 { return &m.Subgroup }),
	v.Opt("seal_date", v.DateValue, func(m *Meter) **v.Date { return &m.SealDate }),
	v.Opt("meter_number", v.IntegerValue, func(m *Meter) **int64 { return &m.MeterNumber }),
	v.Opt("status", v.StringValue, func(m *Meter) **string { return &m.Status }, v.OpenCode()),
	v.Opt("active_from", v.DateValue, func(m *Meter) **v.Date { return &m.ActiveFrom }),
	v.Obj("meter_type", meterTypeSchema, func(m *Meter) **MeterType { return &m.MeterType }),
	v.List("registers", registerSchema, func(m *Meter) *[]Register { return &m.Registers }),
)

var transferReadingSchema = v.NewObject(
	v.Req("register_type", v.StringValue, func(r *TransferReading) *string { return &r.RegisterType }, v.OpenCode(),
		v.Note("Required, with read_date and value: a reading without any of them cannot be billed from.")),
	v.Req("read_date", v.DateValue, func(r *TransferReading) *v.Date { return &r.ReadDate }),
	v.Req("value", v.StringValue, func(r *TransferReading) *string { return &r.Value }, v.MaxLength(maxReading),
		v.Note("A decimal number written as a string, kept as sent (leading zeros included).")),
)

// Fields shared by several supply types are declared once, so that every
// variant binds them to the same place and documents them the same way.
var (
	locationDescriptionField = v.Opt("location_description", v.StringValue, func(p *SupplyPoint) **string { return &p.LocationDescription },
		v.MaxLength(maxLongText), v.AllowBlank())
	productNoteField = v.Opt("product_note", v.StringValue, func(p *SupplyPoint) **string { return &p.ProductNote },
		v.MaxLength(maxLongText), v.AllowBlank())
	serialNumberField = v.Opt("serial_number", v.StringValue, func(p *SupplyPoint) **string { return &p.SerialNumber },
		v.MaxLength(maxCode), v.AllowBlank())
)

var supplyPointSchema = v.NewUnion("supply_type",
	[]v.Field[SupplyPoint]{
		v.Req("supply_type", v.StringValue, func(p *SupplyPoint) *string { return &p.SupplyType }, v.Codes(CodeSupplyTypeNotRecognised),
			v.Note("A supply type of the catalogue: the five of spec 2.2.4, and those the operator adds (importctl supply-type add). Decides which of the fields below are accepted; a type other than the five keeps its other fields as given.")),
		v.Req("supply_start_date", v.DateValue, func(p *SupplyPoint) *v.Date { return &p.SupplyStartDate }, v.Codes(CodeFutureSupplyStartDate)),
		v.Opt("last_billed_to_date", v.DateValue, func(p *SupplyPoint) **v.Date { return &p.LastBilledToDate }, v.Codes(CodeNoAgreementCoversBilled),
			v.Note("Inclusive: the last day billed.")),
		v.List("agreements", agreementSchema, func(p *SupplyPoint) *[]Agreement { return &p.Agreements }, v.Codes(CodeMeterPointWithNoAgreement),
			v.Note("At least one: every supply point is billable.")),
	},
	v.Variant[SupplyPoint]{Values: []string{SupplyElectricity}, Fields: []v.Field[SupplyPoint]{
		v.Opt("identifier", v.StringValue, func(p *SupplyPoint) **string { return &p.Identifier }, v.Required(), v.MaxLength(maxCode),
			v.Codes(CodeDuplicateSupplyIdentifier), v.Note("Required: the market identifier (MPAN) that readings and industry flows are keyed on.")),
		v.Opt("initial_connection_date", v.DateValue, func(p *SupplyPoint) **v.Date { return &p.InitialConnectionDate }),
		locationDescriptionField,
		v.Opt("book_number", v.StringValue, func(p *SupplyPoint) **string { return &p.BookNumber }, v.MaxLength(maxCode), v.AllowBlank()),
		v.Opt("call_number", v.IntegerValue, func(p *SupplyPoint) **int64 { return &p.CallNumber }),
		v.Opt("energization_status", v.StringValue, func(p *SupplyPoint) **string { return &p.EnergizationStatus }, v.OpenCode()),
		v.List("meters", meterSchema, func(p *SupplyPoint) *[]Meter { return &p.Meters }),
		v.List("transfer_readings", transferReadingSchema, func(p *SupplyPoint) *[]TransferReading { return &p.TransferReadings }),
	}},
	v.Variant[SupplyPoint]{Values: []string{SupplyHeatPump}, Fields: []v.Field[SupplyPoint]{
		v.Opt("serial_number_internal", v.StringValue, func(p *SupplyPoint) **string { return &p.SerialNumberInternal }, v.MaxLength(maxCode), v.AllowBlank()),
		v.Opt("serial_number_external", v.StringValue, func(p *SupplyPoint) **string { return &p.SerialNumberExternal }, v.MaxLength(maxCode), v.AllowBlank()),
		v.Opt("make_model", v.StringValue, func(p *SupplyPoint) **string { return &p.MakeModel }, v.MaxLength(maxShortText), v.AllowBlank()),
		v.Opt("size", v.IntegerValue, func(p *SupplyPoint) **int64 { return &p.Size }),
		locationDescriptionField,
		productNoteField,
	}},
	v.Variant[SupplyPoint]{Values: []string{SupplyLight, SupplyPole}, Fields: []v.Field[SupplyPoint]{
		serialNumberField,
		v.Opt("secondary_serial_number", v.StringValue, func(p *SupplyPoint) **string { return &p.SecondarySerialNumber },
			v.MaxLength(maxCode), v.Nullable(), v.AllowBlank(), v.Note("Spec 2.2.4 types it \"string or null\": null is the same as omitted, and \"\" is kept as sent.")),
		v.Opt("manufacturer_name", v.StringValue, func(p *SupplyPoint) **string { return &p.ManufacturerName }, v.MaxLength(maxShortText), v.AllowBlank()),
		v.Opt("model_name", v.StringValue, func(p *SupplyPoint) **string { return &p.ModelName }, v.MaxLength(maxShortText), v.AllowBlank()),
		v.Opt("location", v.StringValue, func(p *SupplyPoint) **string { return &p.Location }, v.MaxLength(maxLongText), v.AllowBlank()),
		productNoteField,
		v.Opt("installed_at", v.DateValue, func(p *SupplyPoint) **v.Date { return &p.InstalledAt }),
	}},
	v.Variant[SupplyPoint]{Values: []string{SupplyWaterHeater}, Fields: []v.Field[SupplyPoint]{
		serialNumberField,
		v.Opt("tank_size", v.StringValue, func(p *SupplyPoint) **string { return &p.TankSize }, v.OpenCode()),
		v.Opt("tank_type", v.StringValue, func(p *SupplyPoint) **string { return &p.TankType }, v.OpenCode()),
		v.Opt("tank_configuration", v.StringValue, func(p *SupplyPoint) **string { return &p.TankConfiguration }, v.MaxLength(maxShortText), v.AllowBlank()),
	}},
).AcceptOtherVariants(func(p *SupplyPoint) *map[string]json.RawMessage { return &p.Other })

var supplyAddressSchema = v.NewObject(
	v.Req("supply_address1", v.StringValue, func(a *SupplyAddress) *string { return &a.SupplyAddress1 }, v.MaxLength(maxAddress)),
	v.Opt("supply_address2", v.StringValue, func(a *SupplyAddress) **string { return &a.SupplyAddress2 }, v.MaxLength(maxAddress), v.AllowBlank()),
	v.Opt("supply_address3", v.StringValue, func(a *SupplyAddress) **string { return &a.SupplyAddress3 }, v.MaxLength(maxAddress), v.AllowBlank()),
	v.Opt("supply_address4", v.StringValue, func(a *SupplyAddress) **string { return &a.SupplyAddress4 }, v.MaxLength(maxAddress), v.AllowBlank()),
	v.Req("supply_postcode", v.StringValue, func(a *SupplyAddress) *string { return &a.SupplyPostcode }, v.MaxLength(maxAddress),
		v.Codes(CodeInvalidPostcode), v.Note("Checked against the supplier's country.")),
	v.Req("customer_at_supply_address_from_date", v.DateValue, func(a *SupplyAddress) *v.Date { return &a.CustomerAtSupplyAddressFromDate }),
	v.List("supply_points", supplyPointSchema, func(a *SupplyAddress) *[]SupplyPoint { return &a.SupplyPoints }),
)

var businessSchema = v.NewObject(
	v.Req("business_contract_identifier", v.StringValue, func(b *Business) *string { return &b.BusinessContractIdentifier },
		v.MaxLength(maxCode), v.Codes(CodeContractNotFound)),
)

var accountSchema = v.NewObject(
	v.Req("external_account_number", v.StringValue, func(a *Account) *string { return &a.ExternalAccountNumber }, v.MaxLength(maxAccountRef)),
	v.Req("import_supplier", v.StringValue, func(a *Account) *string { return &a.ImportSupplier }, v.MaxLength(maxCode), v.Codes(CodeSupplierNotFound)),
	v.Obj("billing_address", billingAddressSchema, func(a *Account) **BillingAddress { return &a.BillingAddress },
		v.Note("Optional, as in the reference. When omitted, the account's billing address is derived from the first supply address "+
			"(its lines, one per line, as street_address; its postcode as postal_code; the supplier's country), as the reference does "+
			"for an account with one supply address; without a supply address, only the supplier's country is stored.")),
	v.List("metadata", metadataSchema, func(a *Account) *[]Metadata { return &a.Metadata }),
	v.List("customers", customerSchema, func(a *Account) *[]Customer { return &a.Customers },
		v.Codes(CodeCustomerWithUnknown), v.Note("Omitted or empty when unknown_occupier is true.")),
	v.List("supply_addresses", supplyAddressSchema, func(a *Account) *[]SupplyAddress { return &a.SupplyAddresses },
		v.Codes(CodeOccupierManyAddresses), v.Note("At most one when unknown_occupier is true.")),
	v.List("ledgers", ledgerSchema, func(a *Account) *[]Ledger { return &a.Ledgers }, v.Codes(CodeDuplicateLedger), v.Note(ledgersNote)),
	v.List("statements", postimport.StatementSchema, func(a *Account) *[]postimport.Statement { return &a.Statements },
		v.MaxItems(postimport.MaxStatements),
		v.Note(fmt.Sprintf("The account's historical statements: the fields and rules of E8's statements (spec 2.9), stored with the account as E8 stores them, so that they start E7's open statement period as E8's do. "+
			"historical_statement_already_exists cannot happen here: the account is new. At most %d, as in E8. Source: spec 2.2 (an array) and the reference's GB account example, which carries statements in this shape.", postimport.MaxStatements))),
	v.List("notes", note.Schema, func(a *Account) *[]note.Note { return &a.Notes }),
	v.Opt("unknown_occupier", v.BooleanValue, func(a *Account) **bool { return &a.UnknownOccupier },
		v.Codes(CodeCustomerWithUnknown, CodeOccupierManyAddresses),
		v.Note("true: nobody is known at the account; customers must be omitted or empty, and there is at most one supply address.")),
	v.Obj("business", businessSchema, func(a *Account) **Business { return &a.Business }),
).WithMaxValues(v.AccountMaxValues)
