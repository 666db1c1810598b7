// Package account holds the account import payload of spec section 2.2: its
// typed form, and the validation that E3 (validate), E4 (stage) and the
// worker that creates accounts all run.
//
// The JSON encoding of an Account is the normalised payload. Validating that
// encoding again gives the same Account, which is what lets the worker trust
// staged data and still re-check it against a catalogue that may have changed.
//
// Field names and JSON types come from the schema in schema.go; the rules
// that look across fields or outside the payload are in validator.go. Both
// are listed in RULES.md, which TestRulesFile keeps in step with the code.
package account

import (
	"encoding/json"
	"strings"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Account is one normalised account import payload. Optional fields are
// pointers or slices that stay nil when the caller omitted them, so that the
// encoding omits them too; an empty array that was sent stays an empty array.
type Account struct {
	ImportSupplier        string                 `json:"import_supplier"`
	ExternalAccountNumber string                 `json:"external_account_number"`
	BillingAddress        *BillingAddress        `json:"billing_address,omitzero"`
	Metadata              []Metadata             `json:"metadata,omitzero"`
	Customers             []Customer             `json:"customers,omitzero"`
	SupplyAddresses       []SupplyAddress        `json:"supply_addresses,omitzero"`
	Ledgers               []Ledger               `json:"ledgers,omitzero"`
	Statements            []postimport.Statement `json:"statements,omitzero"`
	Notes                 []note.Note            `json:"notes,omitzero"`
	UnknownOccupier       *bool                  `json:"unknown_occupier,omitzero"`
	Business              *Business              `json:"business,omitzero"`

	// Supplier is the import supplier that ImportSupplier names, as the
	// catalogue returned it during validation. It is not part of the payload.
	Supplier Supplier `json:"-"`
}

// BillingAddress is where bills are sent; its country decides how its
// postal_code is checked.
type BillingAddress struct {
	StreetAddress      *string `json:"street_address,omitzero"`
	Locality           *string `json:"locality,omitzero"`
	AdministrativeArea *string `json:"administrative_area,omitzero"`
	Country            string  `json:"country"`
	PostalCode         *string `json:"postal_code,omitzero"`
}

// EffectiveBillingAddress is the billing address to store: the payload's,
// or when it has none, one derived from the first supply address, as the
// reference does for an account without a billing address and one supply
// address (section 6.1): the address lines that are not blank, one per
// line, as street_address, the supply postcode as postal_code, and the
// supplier's country (supply postcodes are checked against it). Without a
// supply address only the supplier's country is set.
func (a *Account) EffectiveBillingAddress() BillingAddress {
	if a.BillingAddress != nil {
		return *a.BillingAddress
	}
	b := BillingAddress{Country: a.Supplier.Country}
	if len(a.SupplyAddresses) == 0 {
		return b
	}
	sa := a.SupplyAddresses[0]
	lines := []string{sa.SupplyAddress1}
	for _, l := range []*string{sa.SupplyAddress2, sa.SupplyAddress3, sa.SupplyAddress4} {
		if l != nil && strings.TrimSpace(*l) != "" {
			lines = append(lines, *l)
		}
	}
	street := strings.Join(lines, "\n")
	postcode := sa.SupplyPostcode
	b.StreetAddress, b.PostalCode = &street, &postcode
	return b
}

// Metadata is one caller-defined key with a free-form JSON object.
type Metadata struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Customer is one person on the account. Phone numbers are in E.164 form
// once validated.
type Customer struct {
	GivenName               *string                  `json:"given_name,omitzero"`
	FamilyName              *string                  `json:"family_name,omitzero"`
	Email                   *string                  `json:"email,omitzero"`
	Mobile                  *string                  `json:"mobile,omitzero"`
	Landline                *string                  `json:"landline,omitzero"`
	AlternativePhoneNumbers []AlternativePhoneNumber `json:"alternative_phone_numbers,omitzero"`
	DateOfBirth             *validate.Date           `json:"date_of_birth,omitzero"`
	CustomerPreferences     *CustomerPreferences     `json:"customer_preferences,omitzero"`
	UserDetails             []UserDetail             `json:"user_details,omitzero"`
}

// AlternativePhoneNumber is a further number for a customer.
type AlternativePhoneNumber struct {
	PhoneNumber string `json:"phone_number"`
}

// CustomerPreferences are the customer's marketing and contact choices.
type CustomerPreferences struct {
	OptedIntoUpdates *bool `json:"opted_into_updates,omitzero"`
	OptedIntoOffers  *bool `json:"opted_into_offers,omitzero"`
	OptedIntoSMS     *bool `json:"opted_into_sms,omitzero"`
}

// UserDetail is one caller-defined value about a customer, in a namespace
// (reference section 6.3: {namespace, value}).
type UserDetail struct {
	Namespace string `json:"namespace"`
	Value     string `json:"value"`
}

// SupplyAddress is a property supplied under the account.
type SupplyAddress struct {
	SupplyAddress1                  string        `json:"supply_address1"`
	SupplyAddress2                  *string       `json:"supply_address2,omitzero"`
	SupplyAddress3                  *string       `json:"supply_address3,omitzero"`
	SupplyAddress4                  *string       `json:"supply_address4,omitzero"`
	SupplyPostcode                  string        `json:"supply_postcode"`
	CustomerAtSupplyAddressFromDate validate.Date `json:"customer_at_supply_address_from_date"`
	SupplyPoints                    []SupplyPoint `json:"supply_points,omitzero"`
}

// SupplyPoint is one supplied thing at an address. Which of its fields may
// be set depends on SupplyType; the struct is flat because the payload is.
// A supply type without fields of its own here keeps every field besides the
// common ones in Other, as given; the JSON encoding writes them back beside
// the common fields.
type SupplyPoint struct {
	SupplyType       string         `json:"supply_type"`
	SupplyStartDate  validate.Date  `json:"supply_start_date"`
	LastBilledToDate *validate.Date `json:"last_billed_to_date,omitzero"`
	// Agreements are sorted by EffectiveFrom once validated.
	Agreements []Agreement `json:"agreements,omitzero"`

	// ELECTRICITY
	Identifier            *string           `json:"identifier,omitzero"`
	InitialConnectionDate *validate.Date    `json:"initial_connection_date,omitzero"`
	BookNumber            *string           `json:"book_number,omitzero"`
	CallNumber            *int64            `json:"call_number,omitzero"`
	EnergizationStatus    *string           `json:"energization_status,omitzero"`
	Meters                []Meter           `json:"meters,omitzero"`
	TransferReadings      []TransferReading `json:"transfer_readings,omitzero"`

	// ELECTRICITY and HEAT_PUMP
	LocationDescription *string `json:"location_description,omitzero"`

	// HEAT_PUMP
	SerialNumberInternal *string `json:"serial_number_internal,omitzero"`
	SerialNumberExternal *string `json:"serial_number_external,omitzero"`
	MakeModel            *string `json:"make_model,omitzero"`
	Size                 *int64  `json:"size,omitzero"`

	// HEAT_PUMP, LIGHT and POLE
	ProductNote *string `json:"product_note,omitzero"`

	// LIGHT, POLE and WATER_HEATER
	SerialNumber *string `json:"serial_number,omitzero"`

	// LIGHT and POLE
	SecondarySerialNumber *string        `json:"secondary_serial_number,omitzero"`
	ManufacturerName      *string        `json:"manufacturer_name,omitzero"`
	ModelName             *string        `json:"model_name,omitzero"`
	Location              *string        `json:"location,omitzero"`
	InstalledAt           *validate.Date `json:"installed_at,omitzero"`

	// WATER_HEATER
	TankSize          *string `json:"tank_size,omitzero"`
	TankType          *string `json:"tank_type,omitzero"`
	TankConfiguration *string `json:"tank_configuration,omitzero"`

	// Other holds the fields of a supply type without a layout of its own
	// (any type but ELECTRICITY, HEAT_PUMP, LIGHT, POLE and WATER_HEATER),
	// each as compact JSON. Nil for the types above.
	Other map[string]json.RawMessage `json:"-"`
}

// HasOwnLayout reports whether the supply type has fields of its own in
// SupplyPoint (and rows of its own in storage); the fields of any other
// type are in Other.
func HasOwnLayout(supplyType string) bool {
	switch supplyType {
	case SupplyElectricity, SupplyHeatPump, SupplyLight, SupplyPole, SupplyWaterHeater:
		return true
	}
	return false
}

// MarshalJSON writes the supply point with the members of Other beside its
// common fields, so that the normalised payload carries them as sent.
func (p SupplyPoint) MarshalJSON() ([]byte, error) {
	type plain SupplyPoint
	b, err := json.Marshal(plain(p))
	if err != nil || len(p.Other) == 0 {
		return b, err
	}
	o, err := json.Marshal(p.Other)
	if err != nil {
		return nil, err
	}
	// Both are objects; the common fields are never empty (supply_type
	// and supply_start_date are always written).
	return append(append(b[:len(b)-1], ','), o[1:]...), nil
}

// Agreement puts a supply point on a tariff from EffectiveFrom (inclusive)
// until the next agreement's EffectiveFrom.
type Agreement struct {
	TariffCode    string        `json:"tariff_code"`
	EffectiveFrom validate.Date `json:"effective_from"`
}

// TransferReading is a meter reading taken at the change of supplier.
type TransferReading struct {
	RegisterType string        `json:"register_type"`
	ReadDate     validate.Date `json:"read_date"`
	Value        string        `json:"value"`
}

// Meter is a meter at an ELECTRICITY supply point.
type Meter struct {
	SerialNumber string         `json:"serial_number"`
	Subgroup     *int64         `json:"subgroup,omitzero"`
	SealDate     *validate.Date `json:"seal_date,omitzero"`
	MeterNumber  *int64         `json:"meter_number,omitzero"`
	Status       *string        `json:"status,omitzero"`
	ActiveFrom   *validate.Date `json:"active_from,omitzero"`
	MeterType    *MeterType     `json:"meter_type,omitzero"`
	Registers    []Register     `json:"registers,omitzero"`
}

// MeterType is the make and electrical characteristics of a meter.
type MeterType struct {
	Manufacturer        *string           `json:"manufacturer,omitzero"`
	Model               *string           `json:"model,omitzero"`
	AmpsLow             *validate.Decimal `json:"amps_low,omitzero"`
	AmpsHigh            *validate.Decimal `json:"amps_high,omitzero"`
	VoltsLow            *validate.Decimal `json:"volts_low,omitzero"`
	VoltsHigh           *validate.Decimal `json:"volts_high,omitzero"`
	Phase               *string           `json:"phase,omitzero"`
	Elements            *validate.Decimal `json:"elements,omitzero"`
	StockCode           *string           `json:"stock_code,omitzero"`
	IsBidirectional     *bool             `json:"is_bidirectional,omitzero"`
	IsAnalog            *bool             `json:"is_analog,omitzero"`
	CoverMaterial       *string           `json:"cover_material,omitzero"`
	WirePorts           *int64            `json:"wire_ports,omitzero"`
	NetworkConnectivity *bool             `json:"network_connectivity,omitzero"`
	Base                *string           `json:"base,omitzero"`
}

// Register is one register of a meter.
type Register struct {
	RegisterType  string            `json:"register_type"`
	WholeDigits   *int64            `json:"whole_digits,omitzero"`
	DecimalDigits *int64            `json:"decimal_digits,omitzero"`
	ActiveFrom    *validate.Date    `json:"active_from,omitzero"`
	Multiplier    *validate.Decimal `json:"multiplier,omitzero"`
}

// Business links the account to a business contract created with E1.
type Business struct {
	BusinessContractIdentifier string `json:"business_contract_identifier"`
}
